"""The governor's pure admission decision (mam/governor/admission.py): slots, role slots, FIFO, budgets."""

from __future__ import annotations

from mam.governor.admission import Cap, Hold, Load, Want, decide


def want(qid: int, *, role: str = "dev", session: str = "", tokens: int = 10) -> Want:
    return Want(job_id=f"j{qid}", qid=qid, session=session or f"s{qid}", role=role, tokens=tokens)


def test_no_cap_admits() -> None:
    assert decide(want(1), [], Load(running=50)).admitted


def test_a_full_workspace_queues_for_a_slot() -> None:
    v = decide(want(5), [], Load(running=2, max_running=2))
    assert not v.admitted and not v.refused and v.hold is Hold.SLOT
    assert decide(want(5), [], Load(running=1, max_running=2)).admitted


def test_fifo_an_earlier_queued_job_takes_the_free_slot_first() -> None:
    load = Load(running=1, max_running=2)
    assert decide(want(5), [want(3)], load).hold is Hold.SLOT
    assert decide(want(3), [want(5)], load).admitted  # a later one never holds an earlier one back


def test_a_role_cap_holds_its_role_only_and_never_blocks_others() -> None:
    load = Load(running=1, running_by_role={"reviewer": 1}, max_running=3, max_running_by_role={"reviewer": 1})
    assert decide(want(4, role="reviewer"), [], load).hold is Hold.ROLE_SLOT
    # an earlier reviewer held by its role cap takes no slot from a later developer
    assert decide(want(5, role="dev"), [want(4, role="reviewer")], load).admitted


def test_a_spent_budget_refuses_at_once_and_one_in_flight_queues() -> None:
    spent = Load(caps=[Cap("lifetime", 100, committed=95, reserved=0)])
    v = decide(want(1, tokens=10), [], spent)
    assert v.refused and v.exhausted is not None and v.exhausted.name == "lifetime" and "spent" in v.detail
    in_flight = Load(caps=[Cap("lifetime", 100, committed=50, reserved=45)])
    v = decide(want(1, tokens=10), [], in_flight)
    assert not v.refused and v.hold is Hold.BUDGET
    assert decide(want(1, tokens=5), [], in_flight).admitted


def test_a_session_cap_counts_only_its_session() -> None:
    load = Load(caps=[Cap("session", 100, committed=100, reserved=0, session="a")])
    assert decide(want(1, session="a"), [], load).refused
    assert decide(want(2, session="b"), [], load).admitted


def test_jobs_ahead_reserve_before_a_later_one() -> None:
    load = Load(caps=[Cap("lifetime", 100, committed=0, reserved=0)])
    assert decide(want(2, tokens=60), [want(1, tokens=60)], load).hold is Hold.BUDGET
    # one ahead that cannot fit takes nothing
    assert decide(want(2, tokens=60), [want(1, tokens=200)], load).admitted
