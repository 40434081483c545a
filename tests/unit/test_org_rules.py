"""What holds a `todo` task (issue 42), as the node decides it and every view shows it: mam.org.rules, pure."""

from __future__ import annotations

from collections import Counter

from mam.org.brief import task_brief
from mam.org.rules import BLOCKERS, BREAKER, BUSY, DAILY_CAP, HOLD, World, chain, held_by, plan
from mam.store.org import DONE, IN_REVIEW, TODO, RoleRow, TaskRow


def role(name: str, session: str, **kw) -> RoleRow:
    fields = {"reports_to": "", "daily_runs": None, "breaker": 3, "failures": 0, "tripped_at": None}
    return RoleRow(name=name, session=session, created_at=0.0, updated_at=0.0, **{**fields, **kw})


def task(n: int, role_name: str = "dev", **kw) -> TaskRow:
    fields = {
        "title": f"task {n}",
        "brief": "",
        "parent": "",
        "state": TODO,
        "wait": "",
        "wake": "assigned",
        "note": "",
    }
    return TaskRow(n=n, id=f"t-{n}", role=role_name, idempotency_key=None, created_at=0.0, updated_at=0.0,
                   ended_at=None, **{**fields, **kw})  # fmt: skip


def world(**kw) -> World:
    given = {"roles": {"dev": role("dev", "w"), "ops": role("ops", "v")}, "states": {}, "blockers": {}}
    return World(**{**given, **kw})


def test_tasks_of_a_role_wait_their_turn_in_creation_order_and_other_roles_run_beside() -> None:
    out = plan([task(1), task(2), task(3, "ops")], world())
    assert [(t.id, why) for t, why in out] == [("t-1", ""), ("t-2", BUSY), ("t-3", "")]


def test_a_task_with_a_blocker_not_done_is_held_by_its_blockers_and_does_not_hold_the_next() -> None:
    w = world(states={"t-9": IN_REVIEW}, blockers={"t-1": ["t-9"]})
    assert [why for _t, why in plan([task(1), task(2)], w)] == [BLOCKERS, ""]
    w = world(states={"t-9": DONE}, blockers={"t-1": ["t-9"]})
    assert held_by(task(1), w) == ""


def test_hold_breaker_daily_caps_and_a_busy_session_each_hold_a_task() -> None:
    assert held_by(task(1), world(held=True)) == HOLD
    tripped = world()
    tripped.roles = {"dev": role("dev", "w", tripped_at=5.0, failures=3)}
    assert held_by(task(1), tripped) == BREAKER
    capped = world(runs_today=Counter({"dev": 1}))
    capped.roles = {"dev": role("dev", "w", daily_runs=1)}
    assert held_by(task(1), capped) == DAILY_CAP
    assert held_by(task(1), world(runs_today=Counter({"ops": 2}), workspace_cap=2)) == DAILY_CAP
    assert held_by(task(1), world(runs_today=Counter({"ops": 1}), workspace_cap=2)) == ""
    assert held_by(task(1), world(busy={"w"})) == BUSY


def test_a_task_that_runs_counts_against_the_caps_of_the_tasks_after_it() -> None:
    w = world(workspace_cap=1)
    assert [why for _t, why in plan([task(1), task(2, "ops")], w)] == ["", DAILY_CAP]
    assert w.runs_today == Counter({"dev": 1}) and w.busy == {"w"}


def test_the_chain_of_command_walks_reports_to_and_stops_at_a_cycle() -> None:
    roles = {
        "dev": role("dev", "w", reports_to="lead"),
        "lead": role("lead", "l", reports_to="ceo"),
        "ceo": role("ceo", "c"),
        "a": role("a", "x", reports_to="b"),
        "b": role("b", "y", reports_to="a"),
    }
    assert chain(roles, "dev") == ["lead", "ceo"] and chain(roles, "ceo") == [] and chain(roles, "a") == ["b"]


def test_the_brief_names_the_task_its_parent_its_role_and_whom_it_reports_to() -> None:
    text = task_brief(
        task(2, brief="Do the thing.", parent="t-1", wake="blockers_resolved", note="mind the tests"),
        role("dev", "w", reports_to="lead"),
        chain=["lead", "ceo"],
        parent=task(1, "lead", title="The whole thing"),
        blockers=[task(3, state=DONE, title="First this")],
        reason="blockers_resolved",
    )
    assert text.splitlines()[:5] == [
        "You play role dev in this workspace's organisation; you report to lead (chain of command: lead -> ceo).",
        "Task t-2: task 2",
        "It is part of task t-1: The whole thing",
        "It waited for: t-3 (First this), done",
        "Woken because every task it was blocked by is done.",
    ]
    assert "Note from the person who reopened it: mind the tests" in text and text.endswith("\n\nDo the thing.")
