"""The `mam` console script: `mam event ...` (run by agents once per event) takes the lean path
(mam.fast_event for the usual event, else mam.event_cli), which imports neither click nor paho nor
YAML; `mam job delegate` goes to the workspace's forkserver where one serves (mam.forkserver);
every other command, and a delegation no forkserver takes, goes to click."""

from __future__ import annotations

import gc
import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["event"]:
        from mam.fast_event import run

        code = run(args[1:])  # the usual event of a local job; None: nothing was written
        if code is None:
            from mam.event_cli import main as event_main

            code = event_main(args[1:])
        gc.freeze()  # as mam.cli.main: nothing to collect on the way out
        sys.exit(code)
    if "delegate" in args:
        from mam.forkserver import client

        if client.served(args):
            code = client.run(args)  # in the workspace's warm forkserver; None: here, as always
            if code is not None:
                sys.exit(code)
    from mam.cli import main as cli_main

    cli_main(args)
