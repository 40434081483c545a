"""The `mam` console script: `mam event`, `mam job delegate` and `mam job wait` go to their lean front end
(mam.node.front: one typed request to the workspace's node, mam.node.client, the one place that bends
around start-up time); every other command runs here through click (mam.cli)."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    from mam.node import front

    code = front.main(args)
    if code is not None:
        # This process holds nothing to clean up, so it skips the interpreter's teardown (about 2 ms of CPU,
        # paid by every agent event) once what it printed is out.
        if argv is None:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except (OSError, ValueError):
                code = code or 1
            os._exit(code)
        sys.exit(code)
    from mam.cli import main as cli_main

    cli_main(args)
