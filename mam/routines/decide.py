"""What becomes of a routine's ticks: pure decisions (no clock, no I/O), which mam.routines.fire applies.

Scheduled ticks (`plan_schedule`): the ticks from the routine's next undecided tick to now. The latest
one is on time if it is at most `grace` late (half a period, between 5 s and 60 s); every earlier one,
and a late latest one, was missed (the node was down). Missed ticks follow the catch-up policy:
`skip` fires none, `once` fires the latest one, `all:N` fires the N oldest. A paused routine's ticks
are skipped (`paused`).

A pending tick (`verdict`): skipped if its routine is paused (`paused`) or the workspace is held
(`hold`); then the concurrency policy, when the routine's last job is still open: `skip` skips it
(`active`), `coalesce` keeps only the latest pending tick, which fires once the open job ends,
`queue` fires it anyway (the job waits its turn behind the open one, as any delegation does).
Missed ticks the catch-up policy fires wait for each other instead (see `verdict`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mam.errors import UsageError
from mam.routines.schedule import Due, iso

CONCURRENCY = ("skip", "coalesce", "queue")
CATCH_UP_MAX = 100  # all:N takes N up to this; at most this many missed ticks get a receipt each
GRACE_MIN_S, GRACE_MAX_S = 5.0, 60.0

# Why a tick did not fire (a receipt's `reason`).
ACTIVE, PAUSED, HOLD, BUDGET, MISSED = "active", "paused", "hold", "budget", "missed"


def check_catch_up(text: str) -> str:
    """`skip`, `once` or `all:N` (1 <= N <= CATCH_UP_MAX)."""
    if text in ("skip", "once"):
        return text
    kind, _, n = text.partition(":")
    if kind == "all" and n.isdigit() and 1 <= int(n) <= CATCH_UP_MAX:
        return f"all:{int(n)}"
    raise UsageError(f"--catch-up {text!r}: use skip, once or all:N (N from 1 to {CATCH_UP_MAX})")


def check_concurrency(text: str) -> str:
    if text not in CONCURRENCY:
        raise UsageError(f"--concurrency {text!r}: use skip, coalesce or queue")
    return text


@dataclass(frozen=True)
class Tick:
    at: float
    fire: bool  # pending (to fire) or skipped
    reason: str = ""
    detail: str = ""


def grace(period_s: float) -> float:
    return min(max(period_s / 2, GRACE_MIN_S), GRACE_MAX_S)


def plan_schedule(due: Due, now: float, *, period_s: float, catch_up: str, paused: bool) -> list[Tick]:
    """One Tick per due tick, oldest first (see the module docstring)."""
    ticks = list(due.ticks)
    if not ticks:
        return []
    if paused:
        return [Tick(t, False, PAUSED, "the routine is paused") for t in ticks]
    current = ticks[-1] if now - ticks[-1] <= grace(period_s) else None
    missed = ticks[:-1] if current is not None else ticks
    firing: set[float] = set()
    if catch_up == "once" and missed:
        firing = {missed[-1]}
    elif catch_up.startswith("all:"):
        firing = set(missed[: int(catch_up.split(":")[1])])
    out = []
    for i, t in enumerate(missed):
        if t in firing:
            out.append(Tick(t, True, MISSED, f"missed; fired late by the catch-up policy {catch_up}"))
            continue
        detail = f"missed (the node was not running); catch-up {catch_up}"
        if i == 0 and due.dropped:
            detail += f"; {due.dropped} earlier ticks were missed too, before {iso(t)}"
        out.append(Tick(t, False, MISSED, detail))
    if current is not None:
        out.append(Tick(current, True))
    return out


@dataclass(frozen=True)
class Verdict:
    action: str  # fire | skip | wait
    reason: str = ""
    detail: str = ""


FIRE, SKIP, WAIT = "fire", "skip", "wait"


def verdict(
    *, paused: bool, hold: str, concurrency: str, open_job: str, newer_pending: bool, catching_up: bool = False
) -> Verdict:
    """What to do with one pending tick now (the budget is checked after this, by the caller).
    `catching_up`: a missed tick the catch-up policy fires; those fire one after another (with `queue`,
    at once), never skipped for an open job nor coalesced, since the policy asked for each of them."""
    if paused:
        return Verdict(SKIP, PAUSED, "the routine is paused")
    if hold:
        return Verdict(SKIP, HOLD, f"the workspace is held ({hold})")
    if catching_up:
        if open_job and concurrency != "queue":
            return Verdict(WAIT, MISSED, f"catch-up: fires once job {open_job} ends")
        return Verdict(FIRE)
    if concurrency == "coalesce" and newer_pending:
        return Verdict(SKIP, ACTIVE, "coalesced into a later tick")
    if open_job and concurrency == "skip":
        return Verdict(SKIP, ACTIVE, f"job {open_job} is still open")
    if open_job and concurrency == "coalesce":
        return Verdict(WAIT, ACTIVE, f"fires once job {open_job} ends")
    return Verdict(FIRE)
