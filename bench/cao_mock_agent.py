"""A stand-in for CAO's `mock_cli` test agent, written for bench/vs_cao.py from its documented behaviour.

CAO 2.5.4's `mock_cli` provider types `mock_cli --delay-ms N` into a shell and reads the pane:
a `❯ ` prompt at the end means idle, a `> MOCK:` line before it means completed. The agent it
drives (a fixture in CAO's tests, not in the package) prints `MockCli ready.` and the prompt,
then for every line it reads: strips bracketed-paste markers, waits --delay-ms (50 by default),
prints `> MOCK: <line>` and the prompt again; `/exit` or `/quit` ends it. This program does the
same, so CAO can be driven end to end with its own provider and the same 50 ms of work per job.
"""

from __future__ import annotations

import argparse
import sys
import time

PROMPT = "\u276f "
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mock_cli")
    parser.add_argument("--delay-ms", type=int, default=50)
    args, _unknown = parser.parse_known_args(argv)  # extra flags are ignored, as CAO's fixture does
    out = sys.stdout
    out.write("MockCli ready.\n" + PROMPT)
    out.flush()
    for raw in sys.stdin:
        line = raw.rstrip("\r\n").removeprefix(PASTE_START).removesuffix(PASTE_END)
        if line in ("/exit", "/quit"):
            out.write("goodbye\n")
            out.flush()
            return 0
        if line:
            time.sleep(args.delay_ms / 1000)
            out.write(f"> MOCK: {line}\n")
        out.write(PROMPT)
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
