"""`mam job cancel` stops the agent's turn (issue 40): real tmux, the demo agent, a real broker.

The cancel presses the CLI's interrupt keys (Escape for the demo agent, as a quick pause does) before the job
ends, so the session's next job, waiting behind it, is typed into an agent no longer busy with the cancelled
one and completes; the demo agent's own log shows its turn interrupted. `--no-interrupt` keeps the old
behaviour: the turn runs to its end. A job whose brief was never typed is dropped with nothing pressed."""

from __future__ import annotations

import json

from mam.util.poll import wait_for
from tests.e2e.test_interrupt import spawn_delegate, state
from tests.e2e.test_node import open_job
from tests.e2e.test_pause import SHORT, agent_turns, finish
from tests.helpers.jobs import audit_kinds, create_demo
from tests.helpers.mamcli import mam


def _work(ws, session, job: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(t.get("work")) for t in agent_turns(ws, session) if t.get("job") == job and t.get("work")]


def test_cancel_interrupts_the_turn_and_the_next_job_is_typed_and_completes(wired):
    s = create_demo("c")
    # A turn far longer than the next job's start deadline: it gets its turn only if the cancel stops this one.
    first = spawn_delegate("--target", "c", "--brief", "demo-sleep: 600", "--json", *SHORT)
    procs = [first]
    try:
        job = open_job(wired)
        second = spawn_delegate("--target", "c", "--brief", "demo-write: next.txt :: next", "--json", *SHORT)
        procs.append(second)
        waiting = open_job(wired, "pending")
        third = spawn_delegate("--target", "c", "--brief", "never typed", "--json", *SHORT)
        procs.append(third)
        dropped = wait_for(lambda: next((j for j in _pending(wired) if j != waiting), ""), timeout=30)

        # A job never typed is only dropped: nothing pressed, the running turn goes on.
        assert mam("job", "cancel", dropped, check=True).returncode == 0
        assert not any(line.get("kind") == "interrupted" for line in audit_kinds(wired, dropped))
        assert state(job) == "running" and "interrupted" not in _work(wired, s, job)
        finish(third)
        assert third.returncode == 5

        view = json.loads(mam("job", "cancel", job, "--json", check=True).stdout)
        assert view["state"] == "cancelled" and view["reason"] == "cancelled_by_user"
        wait_for(lambda: "interrupted" in _work(wired, s, job), timeout=30, message="the turn was not interrupted")
        assert any(line.get("kind") == "interrupted" for line in audit_kinds(wired, job))
        out, err = finish(second)
        assert second.returncode == 0, err
        assert json.loads(out)["state"] == "completed"
        assert (wired.root / "next.txt").read_text() == "next\n"
        finish(first)
        assert first.returncode == 5
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def test_no_interrupt_only_ends_the_job_and_the_turn_runs_to_its_end(wired):
    s = create_demo("n")
    proc = spawn_delegate("--target", "n", "--brief", "demo-sleep: 2", "--json", *SHORT)
    try:
        job = open_job(wired)
        mam("job", "cancel", job, "--no-interrupt", check=True)
        wait_for(lambda: "end" in _work(wired, s, job), timeout=30, message="the turn did not run to its end")
        assert "interrupted" not in _work(wired, s, job)
        assert not any(line.get("kind") == "interrupted" for line in audit_kinds(wired, job))
        finish(proc)
        assert proc.returncode == 5
    finally:
        if proc.poll() is None:
            proc.kill()


def _pending(ws) -> list[str]:  # type: ignore[no-untyped-def]
    from mam.store import jobs as jobs_table
    from mam.store.registry import Registry

    registry = Registry(ws)
    try:
        with registry.read() as conn:
            return [r.id for r in jobs_table.open_jobs(conn) if r.state == "pending"]
    finally:
        registry.close()
