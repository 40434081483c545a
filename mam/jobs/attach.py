"""Attaching to a job another delegation made (its idempotency key named it): nothing is made or
injected; the caller waits for the job's end by the registry, like `job_wait`, and gets its outcome.

A job whose wrapper died is ended by the same rules a waiting wrapper applies (mam.jobs.stale), so
an attached caller never waits on an orphan forever.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from mam.ids import check_id
from mam.jobs.result import Outcome, outcome_from_row
from mam.jobs.stale import close_if_abandoned
from mam.store.registry import Registry
from mam.util import pokes

KEY_MAX = 128
DEDUP_PREFIX = "dedup-"


def check_key(value: object) -> str:
    """An idempotency key: 1-128 letters, digits, '.', '_', '-' or ':', starting with a letter or digit
    (a routine's ticks are keyed `routine:NAME:TIME`, mam.routines)."""
    return check_id(value, "idempotency key", limit=KEY_MAX, colon=True)


def dedup_key(session: str, brief: str) -> str:
    """The key `--dedup` derives: sha256 of the target session and the brief text."""
    digest = hashlib.sha256(session.encode("utf-8") + b"\0" + brief.encode("utf-8")).hexdigest()
    return DEDUP_PREFIX + digest


# A wrapper that dies commits nothing, so nothing pokes: its job is looked at this often to close it.
OWNER_CHECK_S = 2.0


def wait_attached(registry: Registry, job_id: str) -> Outcome:
    """Wait until the job ends (it has its own deadlines; a dead wrapper's job is closed), then its outcome.
    Woken by each commit of the job's row (its `job:<id>` key), and every OWNER_CHECK_S for a dead owner."""
    with pokes.Waiter(registry.ws, [pokes.job_key(job_id)]) as waiter:  # listening before the first look
        while True:
            row = registry.job(job_id)
            if not row.open:
                return replace(outcome_from_row(registry, job_id), attached=True)
            close_if_abandoned(registry.ws, registry, job_id)
            waiter.wait(OWNER_CHECK_S)
