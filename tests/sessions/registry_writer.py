"""One registry writer for the crash-safety test: `python registry_writer.py WORKSPACE SESSION COUNT PROGRESS`.

It sets its own session row's `note` to 1, 2, ... COUNT through the library (one committed
write each, which also refreshes the YAML mirror), and after each write has returned, so is
committed, appends the counter to PROGRESS and fsyncs it. The test kills some writers with
SIGKILL at any moment; PROGRESS then tells from outside which updates were surely committed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mam.store.registry import Registry
from mam.workspace import Workspace


def main(root: str, name: str, count: int, progress: str) -> int:
    registry = Registry(Workspace(Path(root)))
    fd = os.open(progress, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        for counter in range(1, count + 1):
            registry.update_session(name, note=str(counter))
            os.write(fd, f"{counter}\n".encode())
            os.fsync(fd)
    finally:
        os.close(fd)
        registry.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
