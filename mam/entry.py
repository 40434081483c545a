"""The `mam` console script: `mam job delegate`, `mam job wait` and `mam event` go to the workspace's
node through the thin client (mam.node.client, the one module that bends around start-up time);
every other command, and one the node does not take, runs here through click (mam.cli)."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    from mam.node import client

    code = client.run(args)
    if code is not None:
        # Served by the node: this process holds nothing to clean up, so it skips the interpreter's teardown
        # (about 2 ms of CPU, paid by every agent event) once what it printed is out.
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
