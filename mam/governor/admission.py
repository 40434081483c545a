"""Whether a job may start now: the pure decision of the governor (no I/O, no clock).

A job asks for one running slot and a token reservation. It is admitted when, after every
earlier job still queued that would itself be admitted (FIFO by the registry's job order; a job
held only by its own role's cap or by a budget holds no later job back), there is a free slot
under the workspace cap and under its role's cap, and its reservation fits every token cap.

A token cap the job can never fit (what is committed for good, plus this reservation, passes
it) refuses the job at once; one it would fit once reservations in flight settle makes it wait.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum


class Hold(str, Enum):
    """What keeps a queued job waiting (its `queued_for`)."""

    SLOT = "slot"  # MAM_MAX_RUNNING_JOBS
    ROLE_SLOT = "role_slot"  # MAM_MAX_RUNNING_JOBS_<ROLE>
    BUDGET = "budget"  # a token cap, while other reservations are in flight
    HOLD = "hold"  # the workspace is held (`mam pause --all`, mam/jobs/pause.py): nothing is typed anywhere

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Want:
    """A job asking to start: its order in the registry, where it runs, and the tokens it reserves."""

    job_id: str
    qid: int
    session: str
    role: str
    tokens: int


@dataclass(frozen=True)
class Cap:
    """One token cap: `limit` tokens for the jobs in its scope (`session`: one session's; '': all)."""

    name: str  # lifetime / daily / session
    limit: int
    committed: int  # spent for good in its scope
    reserved: int  # held by jobs in flight in its scope
    session: str = ""

    def applies(self, want: Want) -> bool:
        return not self.session or self.session == want.session


@dataclass(frozen=True)
class Load:
    """What is held now: running slots (in all and per role) and the token caps with their use."""

    running: int = 0
    running_by_role: Mapping[str, int] = field(default_factory=dict)
    max_running: int = 0  # 0: no cap
    max_running_by_role: Mapping[str, int] = field(default_factory=dict)  # role -> cap (0 or absent: none)
    caps: Sequence[Cap] = ()


@dataclass(frozen=True)
class Verdict:
    admitted: bool
    hold: Hold | None = None  # why it waits (queued)
    exhausted: Cap | None = None  # the cap that refuses it for good
    detail: str = ""

    @property
    def refused(self) -> bool:
        return self.exhausted is not None


def _slot(load: Load, running: int, by_role: Mapping[str, int], want: Want) -> Hold | None:
    if load.max_running and running >= load.max_running:
        return Hold.SLOT
    role_cap = load.max_running_by_role.get(want.role, 0) if want.role else 0
    if role_cap and by_role.get(want.role, 0) >= role_cap:
        return Hold.ROLE_SLOT
    return None


def decide(want: Want, ahead: Iterable[Want], load: Load) -> Verdict:
    """The verdict for `want`, given the jobs queued before it (`ahead`, any order) and the load."""
    running = load.running
    by_role = dict(load.running_by_role)
    extra: dict[int, int] = {i: 0 for i in range(len(load.caps))}  # tokens the admitted jobs ahead would reserve
    for other in sorted(ahead, key=lambda w: w.qid):
        if other.qid >= want.qid or _slot(load, running, by_role, other) is not None:
            continue
        if any(
            cap.applies(other) and cap.limit and cap.committed + cap.reserved + extra[i] + other.tokens > cap.limit
            for i, cap in enumerate(load.caps)
        ):
            continue  # it waits for a budget (or is refused): it takes nothing
        running += 1
        by_role[other.role] = by_role.get(other.role, 0) + 1
        for i, cap in enumerate(load.caps):
            if cap.applies(other):
                extra[i] += other.tokens
    for cap in load.caps:
        if cap.applies(want) and cap.limit and cap.committed + want.tokens > cap.limit:
            scope = f" of session {cap.session}" if cap.session else ""
            return Verdict(
                False,
                exhausted=cap,
                detail=f"the {cap.name} token budget{scope} is spent: {cap.committed} of {cap.limit} tokens committed, "
                f"this job reserves {want.tokens}",
            )
    hold = _slot(load, running, by_role, want)
    if hold is Hold.SLOT:
        return Verdict(False, hold=hold, detail=f"{running} of {load.max_running} running slots taken")
    if hold is Hold.ROLE_SLOT:
        cap_n = load.max_running_by_role.get(want.role, 0)
        return Verdict(False, hold=hold, detail=f"{by_role.get(want.role, 0)} of {cap_n} slots of role {want.role}")
    for i, cap in enumerate(load.caps):
        if cap.applies(want) and cap.limit and cap.committed + cap.reserved + extra[i] + want.tokens > cap.limit:
            return Verdict(
                False,
                hold=Hold.BUDGET,
                detail=f"the {cap.name} token budget waits for reservations in flight "
                f"({cap.committed} committed + {cap.reserved + extra[i]} reserved of {cap.limit})",
            )
    return Verdict(True)
