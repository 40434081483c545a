"""The token caps the governor decides on (mam/governor/budget.py), on a real registry: the daily cap
counts only what was committed on this UTC day, a session's --token-budget only its own jobs, and each
cap's 80 % warning is given once for good."""

from __future__ import annotations

from pathlib import Path

from mam.governor import budget
from mam.settings import load_settings
from mam.store import reservations as rs
from mam.store.registry import Registry
from mam.store.sessions import SessionRow
from mam.workspace import Workspace


def registry(tmp_path: Path) -> Registry:
    ws = Workspace(tmp_path / "ws")
    ws.root.mkdir()
    reg = Registry(ws)
    for name, limit in (("a", 1000), ("b", 0)):
        reg.add_session(
            SessionRow(name=name, agent="demo", role="dev", backend="tmux", server="s", cwd="/", token_budget=limit)
        )
    return reg


def commit(reg: Registry, job: str, qid: int, session: str, tokens: int, day: str = "") -> None:
    with reg.write() as conn:
        rs.put(conn, job_id=job, qid=qid, session=session, role="dev", reserved=tokens, status=rs.HELD)
        assert rs.settle(conn, job, committed=tokens, source="measured")
        if day:  # settled on another UTC day
            conn.execute("UPDATE reservations SET day = ? WHERE job_id = ?", (day, job))


def caps_of(reg: Registry, env: dict[str, str], session: str) -> dict[str, tuple[int, int, int]]:
    settings = load_settings(env_file=None, environ=env)
    with reg.read() as conn:
        rows = rs.unsettled(conn)
        got = budget.caps(conn, settings, budget.scope(conn, rows), sessions=[session])
    return {c.name: (c.limit, c.committed, c.reserved) for c in got}


def test_the_daily_cap_counts_today_only_and_the_lifetime_cap_everything(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    commit(reg, "job-old", 1, "b", 700, day="2000-01-01")
    commit(reg, "job-new", 2, "b", 200)
    with reg.write() as conn:
        rs.put(conn, job_id="job-open", qid=3, session="b", role="dev", reserved=50, status=rs.HELD)
    env = {"MAM_TOKEN_BUDGET": "5000", "MAM_TOKEN_BUDGET_DAILY": "1000"}
    assert caps_of(reg, env, "b") == {"lifetime": (5000, 900, 50), "daily": (1000, 200, 50)}


def test_a_sessions_own_budget_counts_its_jobs_only(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    commit(reg, "job-a", 1, "a", 300)
    commit(reg, "job-b", 2, "b", 600)
    assert caps_of(reg, {}, "a") == {"session": (1000, 300, 0)}
    assert caps_of(reg, {}, "b") == {}  # no budget of its own, none in the workspace


def test_the_80_percent_warning_is_given_once_per_cap(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    settings = load_settings(env_file=None, environ={"MAM_TOKEN_BUDGET": "1000"})
    commit(reg, "job-1", 1, "a", 700)
    with reg.write() as conn:
        assert budget.warnings(conn, settings, session="b") == []  # 70 %
    commit(reg, "job-2", 2, "a", 150)
    with reg.write() as conn:
        (note,) = budget.warnings(conn, settings, session="b")  # 85 %: the lifetime cap, once
        assert (note["cap"], note["limit"], note["used"]) == ("lifetime", 1000, 850)
    commit(reg, "job-3", 3, "a", 100)
    with reg.write() as conn:
        assert budget.warnings(conn, settings, session="b") == []  # 95 %: already told
        assert [n["cap"] for n in budget.warnings(conn, settings, session="a")] == ["session"]  # a's own, 950/1000


def test_the_estimate_is_the_median_of_the_roles_last_20_completed_measured_jobs(tmp_path: Path) -> None:
    from mam.governor.gate import estimate_for
    from mam.outcomes import JobState
    from mam.store import jobs as jobs_table

    reg = registry(tmp_path)
    settings = load_settings(env_file=None, environ={"MAM_DEFAULT_ESTIMATE_TOKENS": "777"})

    def job(n: int, tokens: int, state: JobState, source: str = "measured", role: str = "dev") -> None:
        with reg.write() as conn:
            row = jobs_table.insert(
                conn, job_id=f"job-{n}", session="a", kind="job", target="a", parent_job=None,
                state=state.value, owner="", data={},
            )  # fmt: skip
            rs.put(conn, job_id=row.id, qid=row.qid, session="a", role=role, reserved=tokens, status=rs.HELD)
            rs.settle(conn, row.id, committed=tokens, source=source)

    with reg.read() as conn:
        assert estimate_for(conn, "dev", settings) == 777  # no history yet
    for n in range(5):  # the oldest five: far larger, and pushed out by the 20 after them
        job(n, 100_000, JobState.COMPLETED)
    for n in range(5, 25):
        job(n, 100 + n, JobState.COMPLETED)
    job(30, 1, JobState.FAILED)  # neither a failed job,
    job(31, 1, JobState.COMPLETED, source="estimate")  # nor one whose usage was not measured,
    job(32, 1, JobState.COMPLETED, role="reviewer")  # nor another role's counts
    with reg.read() as conn:
        assert estimate_for(conn, "dev", settings) == int((114 + 115) / 2)  # the median of 105..124
        assert estimate_for(conn, "reviewer", settings) == 1
        assert estimate_for(conn, "", settings) == 777
