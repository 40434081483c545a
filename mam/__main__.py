"""`python -m mam`: the `mam` command, as mam/bin/mam runs it."""

import sys

from mam.node import front


def click(args: list[str]) -> None:
    from mam.cli import main

    main(args)


front.run(sys.argv[1:], click)
