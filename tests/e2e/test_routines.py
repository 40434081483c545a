"""Routines end to end (issue 29): the scheduler (mam.routines.fire) with a clock the test drives, each
tick delegated to demo agents in real tmux panes over a real broker. The schedule's time is the test's;
the jobs take real time (a `demo-sleep: 5` brief runs 5 s), and each step the test takes while a job is
open sees it open. No sleeps: every wait polls the registry with a deadline."""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from mam.node.service import Service
from mam.routines.fire import Scheduler
from mam.routines.manage import Spec, add, log, request_run, set_paused
from mam.routines.webhook import Endpoint, signature
from mam.settings import load_settings
from mam.store import jobs as jobs_table
from mam.store.registry import Registry
from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.helpers.jobs import FAST, create_demo
from tests.helpers.mamcli import mam

T0 = 1_800_000_000.0  # the schedule's clock starts here (any time will do: the test drives it)


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@dataclass
class World:
    ws: Workspace
    registry: Registry
    clock: Clock
    scheduler: Scheduler

    def add(self, name: str, **options) -> None:
        options.setdefault("target", "w")
        options.setdefault("brief", "routine work")
        add(self.registry, Spec(name=name, **options), now=self.clock.t)

    def step_at(self, t: float) -> None:
        self.clock.t = t
        self.scheduler.step()

    def log(self, name: str) -> list[dict]:
        """The routine's receipts, oldest first."""
        return list(reversed(log(self.registry, name, limit=100)))

    def settled(self, name: str, timeout: float = 60) -> list[dict]:
        """The receipts once no tick of `name` is firing (each fired job has ended)."""
        return wait_for(
            lambda: (rows := self.log(name)) and all(r["status"] != "firing" for r in rows) and rows,
            timeout=timeout,
            message=lambda: f"ticks of {name} still firing: {self.log(name)}",
        )

    def first_job(self, name: str) -> str:
        """The job of the routine's first tick, once it is registered (its id is fixed just before)."""
        job_id = wait_for(lambda: self.log(name)[0]["job"], timeout=30, message=f"{name}'s first tick did not fire")
        wait_for(lambda: self.registry.find_job(job_id), timeout=30, message=f"job {job_id} was not registered")
        return str(job_id)

    def job(self, job_id: str) -> jobs_table.JobRow:
        return self.registry.job(job_id)


@pytest.fixture
def world(workspace, mosquitto_broker, monkeypatch) -> Iterator[World]:
    for key, value in {**mosquitto_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    create_demo("w")
    registry = Registry(workspace)
    settings = load_settings(env_file=workspace.env_file, environ=os.environ)
    clock = Clock(T0)
    # Each tick's delegation is the node's attempt (run here, as a node in this process would).
    scheduler = Scheduler(
        workspace, settings, registry, clock=clock, fire=Service(workspace, settings, daemon=False).attempt
    )
    yield World(workspace, registry, clock, scheduler)
    scheduler.join(timeout=60)
    registry.close()


def statuses(rows: list[dict]) -> list[tuple[str, str]]:
    return [(r["status"], r["reason"] if r["status"] == "skipped" else (r["outcome"] or "")) for r in rows]


def spans(w: World, rows: list[dict]) -> list[tuple[float, float]]:
    out = []
    for r in rows:
        if r["job"]:
            job = w.job(r["job"])
            out.append((job.created_at, job.ended_at or float("inf")))
    return sorted(out)


def never_overlap(intervals: list[tuple[float, float]]) -> bool:
    return all(a_end <= b_start for (_a, a_end), (b_start, _b) in zip(intervals, intervals[1:]))


def test_skip_never_opens_a_second_job_logs_the_skipped_ticks_and_fires_again_after(world):
    world.add("slow", brief="demo-sleep: 5\nlook around", every="2s")
    world.step_at(T0 + 2)
    first = world.first_job("slow")
    assert world.job(first).open
    world.step_at(T0 + 4)  # the job sleeps 5 s: it is still open at both steps
    world.step_at(T0 + 6)
    assert world.job(first).open, "the job ended before the skipped ticks were decided: the test proves nothing"
    wait_for(lambda: not world.job(first).open, timeout=60, message="the first job did not end")
    world.step_at(T0 + 8)
    rows = world.settled("slow")
    assert statuses(rows) == [
        ("done", "completed"),
        ("skipped", "active"),
        ("skipped", "active"),
        ("done", "completed"),
    ], rows
    assert [r["key"] for r in rows] == [f"routine:slow:{r['scheduled']}" for r in rows]
    assert rows[1]["detail"] == f"job {first} is still open"
    assert never_overlap(spans(world, rows))
    assert world.job(rows[3]["job"]).data["meta"]["idempotency_key"] == rows[3]["key"]


def test_coalesce_runs_exactly_one_tick_after_the_open_job(world):
    world.add("co", brief="demo-sleep: 5\nlook around", every="2s", concurrency="coalesce")
    world.step_at(T0 + 2)
    first = world.first_job("co")
    world.step_at(T0 + 4)
    world.step_at(T0 + 6)
    assert world.job(first).open
    waiting = world.log("co")
    assert [(r["status"], r["reason"]) for r in waiting[1:]] == [("skipped", "active"), ("pending", "active")]
    wait_for(lambda: not world.job(first).open, timeout=60, message="the first job did not end")
    world.step_at(T0 + 6.5)  # no new tick: the coalesced one fires now
    world.step_at(T0 + 7)
    rows = world.settled("co")
    assert statuses(rows) == [("done", "completed"), ("skipped", "active"), ("done", "completed")], rows
    assert rows[2]["scheduled"] == waiting[2]["scheduled"]
    assert never_overlap(spans(world, rows))


@pytest.mark.parametrize(("catch_up", "fired"), [("skip", 0), ("once", 1), ("all:2", 2)])
def test_after_the_node_was_down_for_several_periods_catch_up_fires_none_one_or_two(world, catch_up, fired):
    world.add("r", brief="quick", every="10s", catch_up=catch_up)
    world.step_at(T0 + 10)
    world.settled("r")
    # The node is down from T0+11 to T0+65: the ticks at 20, 30, 40, 50 and 60 pass unseen.
    world.step_at(T0 + 65.5)
    for _ in range(fired + 1):  # catch-up ticks fire one after another: a step after each one ends
        world.settled("r")
        world.step_at(T0 + 65.5)
    rows = world.settled("r")
    assert [r["scheduled"][-3:] for r in rows] == ["10Z", "20Z", "30Z", "40Z", "50Z", "00Z"]
    late = [r for r in rows[1:] if r["job"]]
    assert len(late) == fired, rows
    assert all(r["reason"] == "missed" for r in rows[1:])
    assert all(r["status"] == "skipped" for r in rows[1:] if not r["job"])
    if catch_up == "once":
        assert late[0]["scheduled"].endswith(":00Z")  # the latest one
    if catch_up == "all:2":
        assert [r["scheduled"][-3:] for r in late] == ["20Z", "30Z"]  # the oldest, in order
    assert never_overlap(spans(world, rows))
    world.step_at(T0 + 70)  # back on schedule
    assert world.settled("r")[-1]["status"] == "done"


def test_a_hold_or_a_paused_routine_fires_nothing(world):
    world.add("h", brief="quick", every="10s")
    mam("pause", "--all", "--by", "ops", check=True)  # the workspace's hold, as a person sets it
    world.step_at(T0 + 10)
    request_run(world.registry, "h", now=T0 + 11)
    world.step_at(T0 + 11)
    mam("resume", "--all", check=True)
    set_paused(world.registry, "h", True, now=T0 + 12)
    world.step_at(T0 + 20)
    request_run(world.registry, "h", now=T0 + 21)
    world.step_at(T0 + 21)
    rows = world.log("h")
    assert [(r["trigger"], r["status"], r["reason"]) for r in rows] == [
        ("schedule", "skipped", "hold"),
        ("run", "skipped", "hold"),
        ("schedule", "skipped", "paused"),
        ("run", "skipped", "paused"),
    ], rows
    assert "mam pause --all by ops" in rows[0]["detail"]
    assert all(r["job"] is None for r in rows)
    with world.registry.read() as conn:
        assert jobs_table.open_jobs(conn) == [] and conn.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0


def test_a_budget_refusal_is_logged_as_a_skip(world, monkeypatch):
    monkeypatch.setenv("MAM_TOKEN_BUDGET", "100")
    monkeypatch.setenv("MAM_DEFAULT_ESTIMATE_TOKENS", "5000")
    world.scheduler.settings = load_settings(env_file=world.ws.env_file, environ=os.environ)
    world.add("b", brief="quick", every="10s")
    world.step_at(T0 + 10)
    rows = world.log("b")
    assert [(r["status"], r["reason"]) for r in rows] == [("skipped", "budget")], rows
    assert "lifetime token budget" in rows[0]["detail"]
    with world.registry.read() as conn:
        assert conn.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_signed_webhook_fires_one_tick_and_replayed_or_forged_ones_fire_nothing(world):
    out = add(world.registry, Spec(name="hook", target="w", brief="on the hook", on_webhook=True), now=world.clock.t)
    secret, url = out["secret"], out["url"]
    endpoint = Endpoint(world.registry, clock=world.clock, on_tick=lambda: None)
    assert endpoint.start() and url.endswith(f":{endpoint.port}/routine/hook")
    try:
        body = json.dumps({"text": "release 1.2 is tagged"}).encode()
        stamp = str(int(world.clock.t))
        good = {
            "X-Mam-Timestamp": stamp,
            "X-Mam-Delivery": "d-1",
            "X-Mam-Signature": signature(secret, stamp, "d-1", body),
        }
        assert post(url, body, good)[0] == 202
        assert post(url, body, good) == (409, {"accepted": False, "reason": "replayed"})
        forged = {**good, "X-Mam-Delivery": "d-2"}
        assert post(url, body, forged) == (401, {"accepted": False, "reason": "unauthorized"})
        wrong_key = {**good, "X-Mam-Delivery": "d-3", "X-Mam-Signature": signature("0" * 64, stamp, "d-3", body)}
        assert post(url, body, wrong_key)[1]["reason"] == "unauthorized"  # before the signature: nothing told
        old = str(int(world.clock.t) - 301)
        stale = {**good, "X-Mam-Timestamp": old, "X-Mam-Signature": signature(secret, old, "d-4", body)}
        stale["X-Mam-Delivery"] = "d-4"
        assert post(url, body, stale)[1]["reason"] == "stale_timestamp"
        assert post(url.replace("/hook", "/nope"), body, good) == post(url, body, forged)  # no routine: the same
    finally:
        endpoint.stop()  # writes the refusals counted since the first
    world.step_at(world.clock.t + 1)
    rows = world.settled("hook")
    fired = [r for r in rows if r["job"]]
    assert len(fired) == 1 and fired[0]["outcome"] == "completed", rows
    refused = [(r["reason"], r["detail"]) for r in rows if r["status"] == "refused"]
    assert refused == [
        ("replayed", "a webhook delivery was refused"),  # the first after a quiet minute, at once
        ("bad_signature", "4 webhook deliveries refused (bad_signature 3, stale_timestamp 1)"),  # the rest, summed
    ]
    meta = world.job(fired[0]["job"]).data["meta"]
    brief = "on the hook\n\nrelease 1.2 is tagged"  # the body's text, appended to the routine's brief
    assert meta["brief_sha256"] == hashlib.sha256(brief.encode()).hexdigest()
    assert secret not in json.dumps(world.job(fired[0]["job"]).data) and secret not in json.dumps(rows)
    with world.registry.read() as conn:
        assert conn.execute("SELECT count(*) FROM jobs").fetchone()[0] == 1
