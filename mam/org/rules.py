"""The org's rules as pure functions: which `todo` task runs now, and what holds each of the others.

No I/O, no clock: the scheduler (mam.org.scheduler) and every view (`mam task show`, `mam top`, the page) hand
in what they read from the registry, so what a view says holds a task is what the node decides.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from mam.store.org import DONE, RoleRow, TaskRow

# What holds a `todo` task (its `queued_for`), in the order they are looked at.
BLOCKERS, HOLD, BREAKER, DAILY_CAP, BUSY = "blockers", "hold", "breaker", "daily_cap", "busy"


@dataclass
class World:
    """What the rules look at: every role, the state of every task a blocker names, each task's blockers, the
    runs each role started today, the workspace's own daily cap (0: none), whether the workspace is held, and
    the sessions busy with an open job."""

    roles: Mapping[str, RoleRow]
    states: Mapping[str, str]
    blockers: Mapping[str, list[str]]
    runs_today: Counter[str] = field(default_factory=Counter)
    workspace_cap: int = 0
    held: bool = False
    busy: set[str] = field(default_factory=set)


def held_by(task: TaskRow, world: World) -> str:
    """What holds `task` (a `todo` one) now: a QUEUED_FOR word, or '' when it may run."""
    if any(world.states.get(b) != DONE for b in world.blockers.get(task.id, [])):
        return BLOCKERS
    if world.held:
        return HOLD
    role = world.roles.get(task.role)
    if role is None:
        return BREAKER  # never: a role with tasks that are not ended cannot be removed
    if role.tripped:
        return BREAKER
    if role.daily_runs is not None and world.runs_today[role.name] >= role.daily_runs:
        return DAILY_CAP
    if world.workspace_cap and sum(world.runs_today.values()) >= world.workspace_cap:
        return DAILY_CAP
    if role.session in world.busy:
        return BUSY
    return ""


def plan(todo: Iterable[TaskRow], world: World) -> list[tuple[TaskRow, str]]:
    """Each `todo` task (in creation order) with what holds it ('': it runs now). A task that runs takes its
    session (one job per session: the role's later tasks wait their turn, `busy`) and counts against the caps
    of the tasks after it; `world` is updated so."""
    out = []
    for task in todo:
        why = held_by(task, world)
        if not why:
            role = world.roles[task.role]
            world.busy.add(role.session)
            world.runs_today[role.name] += 1
        out.append((task, why))
    return out


def chain(roles: Mapping[str, RoleRow], name: str) -> list[str]:
    """Whom `name` reports to, then whom that one reports to, up to the role that reports to no one."""
    out: list[str] = []
    seen = {name}
    up = roles[name].reports_to if name in roles else ""
    while up and up not in seen:
        out.append(up)
        seen.add(up)
        up = roles[up].reports_to if up in roles else ""
    return out
