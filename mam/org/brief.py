"""The brief of a task's job: who the agent is in the organisation, the task and why it was woken, then the
task's own brief. The footer mam adds after it (mam.jobs.brief, kind `task`) says how to report the task's
disposition."""

from __future__ import annotations

from mam.store.org import BLOCKERS_RESOLVED, REOPENED, UNBLOCKED, RoleRow, TaskRow

WHY = {
    "assigned": "the task was assigned to your role",
    BLOCKERS_RESOLVED: "every task it was blocked by is done",
    REOPENED: "a person reopened it",
    UNBLOCKED: "the task it waited on is done",
}


def task_brief(
    task: TaskRow,
    role: RoleRow,
    *,
    chain: list[str],
    parent: TaskRow | None,
    blockers: list[TaskRow],
    reason: str,
) -> str:
    """The text delegated for one wake of `task` (kept with its run: the same text whatever restarts)."""
    if chain:
        above = f"you report to {chain[0]}" + (f" (chain of command: {' -> '.join(chain)})" if len(chain) > 1 else "")
    else:
        above = "you report to no one: you lead this organisation"
    lines = [f"You play role {role.name} in this workspace's organisation; {above}.", f"Task {task.id}: {task.title}"]
    if parent is not None:
        lines.append(f"It is part of task {parent.id}: {parent.title}")
    if blockers:
        lines.append("It waited for: " + "; ".join(f"{b.id} ({b.title}), {b.state}" for b in blockers))
    why = WHY.get(reason, reason)
    if reason == UNBLOCKED and task.wait:
        why += f" ({task.wait})"
    lines.append(f"Woken because {why}.")
    if task.note:
        lines.append(f"Note from the person who reopened it: {task.note}")
    return "\n".join(lines) + "\n\n" + (task.brief or task.title)
