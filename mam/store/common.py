"""What the job files share with their readers, in a module that imports nothing: the audit log's
file name and the clock of every job record and audit line (`mam event` reads a record without
importing the store's writers)."""

from __future__ import annotations

import time

AUDIT = "audit.jsonl"


def now_ms() -> int:
    return int(time.time() * 1000)
