"""Run a fault schedule and check the invariants after it.

Invariants (each violation is reported with the seed and the schedule step):
- the brief was injected at most once (audit and the pane itself);
- the job ended in exactly one terminal state, and replaying its audit log gives that state (every
  field of the record, as `mam job replay` checks it);
- `mam job delegate` exited with the code of the record it printed, and the registry still holds that
  state and reason (a command refused before it registered anything exits 3 and left nothing typed);
- no job is lost: every job on either host (a runner's copy too) ends;
- a remote job's origin accepted no event from an epoch older than the job's at that moment;
- every event the wrapper accepted is in the store of the host where it was emitted;
  the registries pass integrity_check and their YAML mirrors match them;
- no process of the run is left behind, and no stale lock blocks the next job on a session;
- with `governor=True` (tests/faults/governor.py): peak running <= the cap, no leaked slot or reservation.

With `cluster=True` (tests/faults/cluster.py) the broker is a 3-node NATS cluster whose nodes the schedule
kills, and the remote host is cut off for longer than the liveness window and joined again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mam.jobs.audit_log import check as check_replay
from mam.jobs.model import TERMINAL, JobState
from mam.jobs.record import read_audit
from mam.outcomes import Exit, Reason, ending
from mam.store import jobs as jobs_table
from mam.store import mirror
from mam.store import sessions as sessions_table
from mam.util.poll import Timeout, wait_for
from tests.faults import governor as gov
from tests.faults.schedule import Step, make_schedule, waves
from tests.faults.world import Host, World
from tests.helpers.jobs import replayed_state

WRAPPER_ARGS = ["--start-deadline", "3", "--heartbeat", "0.5", "--timeout", "15", "--dispatch-wait", "30"]
# On a cluster a surviving node takes seconds to accept a client that moved and to grant its subscriptions
# (docs/broker.md): a liveness window of 4 x 2 s, which a partition outlasts.
CLUSTER_HEARTBEAT_S = 2.0
CLUSTER_WRAPPER_ARGS = [
    "--start-deadline", "10", "--heartbeat", str(CLUSTER_HEARTBEAT_S), "--timeout", "30", "--dispatch-wait", "30",
]  # fmt: skip


@dataclass(frozen=True)
class Act:
    step: Step
    verb: str  # pause / resume / cancel
    code: int
    said: str  # its stderr's end
    began: float  # time.time()
    ended: float


@dataclass
class Report:
    seed: int
    steps: list[Step]
    violations: list[str] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    governor: str = ""  # the governor variant's figures
    acts: list[Act] = field(default_factory=list)  # the pauses, resumes and holds a person did
    seen: Counter[str] = field(default_factory=Counter)  # what the checks met that is no violation (refused epochs...)

    def violate(self, step: Step | None, text: str) -> None:
        where = step.describe() if step else "(run)"
        self.violations.append(f"seed={self.seed} {where}: {text}")

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for outcome in self.outcomes.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        text = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        acts: dict[str, int] = {}
        for act in self.acts:
            key = f"{act.verb}{'' if act.code == 0 else ' refused'}"
            acts[key] = acts.get(key, 0) + 1
        done = ", ".join(f"{k} {v}" for k, v in sorted(acts.items()))
        seen = ", ".join(f"{k} {v}" for k, v in sorted(self.seen.items()))
        return (
            f"seed {self.seed}: {len(self.steps)} jobs in {self.seconds:.0f}s; {text}; "
            + (f"actions: {done}; " if done else "")
            + (f"seen: {seen}; " if seen else "")
            + f"{len(self.violations)} violation(s)"
            + (f"\n{self.governor}" if self.governor else "")
        )


def run_schedule(
    root: Path,
    *,
    seed: int,
    jobs: int,
    width: int = 6,
    governor: bool = False,
    cluster: bool = False,
    sessions: tuple[int, int] | None = None,
) -> Report:
    """`sessions`: (local, remote) demo sessions; by default 6 and 2, on a cluster 4 and 4."""
    started = time.monotonic()
    local, far = sessions or ((4, 4) if cluster else (6, 2))
    world = World.build(
        root, local_sessions=local, remote_sessions=far, extra_env=gov.env() if governor else None, cluster=cluster
    )
    world.wrapper_args = (CLUSTER_WRAPPER_ARGS if cluster else WRAPPER_ARGS) + (gov.wrapper_args() if governor else [])
    window_s = CLUSTER_HEARTBEAT_S * int(world.origin.env["MAM_HEARTBEAT_K"]) if cluster else 0.0
    steps = make_schedule(seed, jobs, world.origin.sessions, world.remote.sessions, cluster=cluster, window_s=window_s)
    report = Report(seed, steps)
    sampler = gov.Sampler(world.origin.ws.db_path) if governor else None
    if sampler is not None:
        sampler.start()
    try:
        for wave in waves(steps, width):
            _run_wave(world, wave, report)
        _final_checks(world, report)
        if sampler is not None:
            sampler.finish()
            _governor_checks(world, sampler, report)
    finally:
        if sampler is not None:
            sampler.finish()
        try:
            world.shutdown()
            _no_leftovers(world, report)
        finally:
            world.close()
        report.seconds = time.monotonic() - started
    return report


# -- one wave -----------------------------------------------------------------------------------
def _run_wave(world: World, wave: list[Step], report: Report) -> None:
    wrappers: dict[str, subprocess.Popen[str]] = {}
    t0 = time.monotonic()
    marks = [("start", t0)]
    for step in wave:
        target = f"remote:rf/{step.session}" if step.remote else f"tmux:{step.session}"
        brief = (
            f"Fault suite job {step.index}.\ndemo-behaviour: {step.behaviour}\n"
            f"demo-write: out-{step.index}.txt :: job {step.index}"
        )
        extra = ["--allow-insecure-broker"] if step.remote else []
        wrappers[step.job_id] = world.origin.spawn(
            "job",
            "delegate",
            "--json",
            "--target",
            target,
            "--brief",
            brief,
            "--job-id",
            step.job_id,
            *world.wrapper_args,
            *extra,
        )
    pause = threading.Event()
    moments: list[tuple[float, Callable[[], None]]] = []
    for step in wave:
        moments.extend(_faults(world, step, wrappers[step.job_id]))
        if step.action != "none":
            moments.append((step.action_at, lambda s=step: _act(world, s, "pause", report)))
            moments.append((step.action_at + step.resume_after, lambda s=step: _act(world, s, "resume", report)))
    for at, run in sorted(moments, key=lambda m: m[0]):
        delay = t0 + at - time.monotonic()
        if delay > 0:
            pause.wait(delay)  # the schedule's moment for this kill or action, not a wait for a condition
        run()
    _cancel_still_paused(world, wave, report)
    said: dict[str, Said] = {}
    for job_id, proc in wrappers.items():
        try:
            out, err = proc.communicate(timeout=150)
            said[job_id] = Said(proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            report.violate(_step(wave, job_id), "the wrapper hung for 150 s")
    marks.append(("wrappers", time.monotonic()))
    world.restore()
    marks.append(("restore", time.monotonic()))
    for step in wave:
        _settle(world, step, report, said.get(step.job_id))
    _check_pauses(world, wave, report)
    marks.append(("settle", time.monotonic()))
    _check_panes(world, wave, report)
    _revive_sessions(world, wave, report)
    marks.append(("revive", time.monotonic()))
    if os.environ.get("MAM_FAULT_VERBOSE"):
        spans = " ".join(f"{name}={b - a:.1f}s" for (_, a), (name, b) in zip(marks, marks[1:]))
        print(
            f"wave {[s.index for s in wave]}: {spans}; "
            + "; ".join(s.describe() + " => " + report.outcomes.get(s.job_id, "?") for s in wave),
            flush=True,
        )


def _step(wave: list[Step], job_id: str) -> Step | None:
    return next((s for s in wave if s.job_id == job_id), None)


@dataclass(frozen=True)
class Said:
    """How one `mam job delegate` of the wave ended: its exit code and what it printed."""

    rc: int
    out: str
    err: str

    def record(self) -> dict:
        try:
            printed = json.loads(self.out or "{}")
        except ValueError:
            return {}
        return printed if isinstance(printed, dict) else {}


def _faults(world: World, step: Step, wrapper: subprocess.Popen[str]) -> list[tuple[float, Callable[[], None]]]:
    """The step's fault as moments of the wave: (seconds after the wrappers started, what is done then)."""
    if step.victim == "partition" and world.cluster is not None:
        plane = world.cluster
        moments = [
            (step.kill_after, lambda: plane.partition("remote")),
            (step.kill_after + step.cut_s, lambda: plane.join("remote")),
        ]
        if step.takeover:  # its jobs taken over at a new epoch while their runner cannot hear it
            moments.append((step.kill_after + step.cut_s / 2, lambda: _kill_node(world)))
        return moments
    return [(step.kill_after, lambda: _kill(world, step, wrapper))]


def _kill_node(world: World) -> None:
    """SIGKILL the origin's node: every attempt of the host; each client follows its job in a new node."""
    try:
        pid = int(json.loads((world.origin.ws.run_dir / "node.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return
    if "mam.node" in _cmdline(pid):
        _sigkill(pid)


def _kill(world: World, step: Step, wrapper: subprocess.Popen[str]) -> None:
    host = world.remote if step.remote else world.origin
    if step.victim == "wrapper":
        wrapper.kill()
    elif step.victim == "agent":
        row = host.session_row(step.session)
        if row is not None and row.pane_pid:
            _sigkill(row.pane_pid)
    elif step.victim == "heartbeater":
        pidfile = host.ws.job_log_dir(step.job_id) / "heartbeat.pid"
        try:
            pid = int(pidfile.read_text().split()[0])  # "pid start-time"
        except (OSError, ValueError):
            return
        if step.job_id in _cmdline(pid):
            _sigkill(pid)
    elif step.victim == "monitor" and world.monitor is not None:
        world.monitor.kill()
        world.monitor.wait()
        if step.restart:
            world.start_monitor()
    elif step.victim == "runner" and world.runner is not None:
        world.runner.kill()
        world.runner.wait()
        if step.restart:
            world.start_runner()
    elif step.victim == "node":
        _kill_node(world)
    elif step.victim == "broker" and world.cluster is not None:  # one NATS node, as a crashed machine
        world.cluster.kill_node(step.broker_node)
        if step.restart:
            world.cluster.start_node(step.broker_node)
    elif step.victim == "broker" and world.broker is not None:
        world.broker.kill()
        if step.restart:
            world.broker.restart()


def _act(world: World, step: Step, verb: str, report: Report) -> None:
    """A person's pause or resume of the step's job (`hold`: of the whole workspace), as the CLI does it."""
    if step.action == "hold":
        args = [verb, "--all", "--by", "faults"]
    else:
        args = ["job", verb, step.job_id, "--by", "faults"] + (["--mode", step.action] if verb == "pause" else [])
    began = time.time()
    proc = world.origin.run(*args, timeout=60)
    report.acts.append(Act(step, verb, proc.returncode, (proc.stderr or "").strip()[-200:], began, time.time()))


def _cancel_still_paused(world: World, wave: list[Step], report: Report) -> None:
    """A job whose resume was refused (its agent killed and not resumable) stays paused, by design: a person
    cancels it. So does this, once the wave's actions are over (else its wrapper would wait for ever)."""
    reg = world.origin.registry()
    try:
        paused = [s for s in wave if (row := reg.find_job(s.job_id)) is not None and row.state == "paused"]
    finally:
        reg.close()
    for step in paused:
        world.origin.run("job", "cancel", step.job_id, timeout=60)
        report.acts.append(Act(step, "cancel", 0, "still paused after its resume", time.time(), time.time()))


def _check_pauses(world: World, wave: list[Step], report: Report) -> None:
    """Nothing was typed into a paused job's session (no brief, reminder, nudge or send between its pause and its
    resume), and no brief anywhere while the workspace was held."""
    typed = ("injected", "resume_injected", "dispatched", "reminded", "nudge", "sent")
    lines = {s.job_id: read_audit(world.origin.ws, s.job_id) for s in wave}
    for step in wave:
        window: int | None = None
        state, pasting = "pending", False  # pasting: paused while its brief's paste was under way (claimed)
        for line in lines[step.job_id]:
            inp = line.get("input") if line.get("kind") == "input" else None
            what = inp.get("input") if isinstance(inp, dict) else ""
            if what == "pause":
                window, pasting = int(line["ts_ms"]), state == "delivering"
            elif what in ("resume", "end") or (line.get("kind") == "input" and line.get("state") != "paused"):
                window = None
            elif window is not None and line.get("kind") == "injected" and pasting:
                pasting = False  # the end of the paste the pause found under way, not a new one
            elif window is not None and line.get("kind") in typed:
                report.violate(step, f"{line['kind']} at {line['ts_ms']} while paused since {window}")
            if line.get("kind") == "input":
                state = str(line.get("state") or state)
    holds = [a for a in report.acts if a.step in wave and a.step.action == "hold"]
    held_from = next((a.ended for a in holds if a.verb == "pause" and a.code == 0), None)
    released = next((a.began for a in holds if a.verb == "resume"), None)
    if held_from is None or released is None:
        return
    for step in wave:
        for line in lines[step.job_id]:
            if line.get("kind") in ("injected", "dispatched") and held_from * 1000 < line["ts_ms"] < released * 1000:
                report.violate(step, f"{line['kind']} at {line['ts_ms']} while the workspace was held")


def _sigkill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _settle(world: World, step: Step, report: Report, said: Said | None) -> None:
    """Wait (by the registry) until the job is terminal: the wrapper or, if it died, the monitor ends it."""
    reg = world.origin.registry()
    try:

        def terminal() -> bool:
            row = reg.find_job(step.job_id)
            return row is not None and not row.open

        refused = said is not None and said.rc == Exit.BROKER_UNAVAILABLE and not said.record()
        if (step.victim == "wrapper" or refused) and reg.find_job(step.job_id) is None:
            # The wrapper died before registering, or refused at once without a broker: nothing was sent.
            report.outcomes[step.job_id] = "never_registered" if step.victim == "wrapper" else "refused/exit_3"
            if any(line["kind"] in ("injected", "dispatched") for line in read_audit(world.origin.ws, step.job_id)):
                report.violate(step, "a job that was never registered was injected")
            if step.remote and any(line["kind"] == "injected" for line in read_audit(world.remote.ws, step.job_id)):
                report.violate(step, "a job that was never registered was typed on the runner's host")
            return
        try:
            wait_for(terminal, timeout=60, interval=0.1)
        except Timeout:
            row = reg.find_job(step.job_id)
            report.violate(step, f"job still open after 60 s: {row.state if row else 'never registered'}")
            report.outcomes[step.job_id] = "open"
            return
        row = reg.job(step.job_id)
    finally:
        reg.close()
    report.outcomes[step.job_id] = f"{row.state}/{row.reason}"
    _check_job(world, step, row, report)
    _check_exit(step, row, said, report)
    if step.remote:
        _check_epochs(world, step, report)
        ended = int(row.data.get("job", {}).get("ended_ms") or 0)
        typed = [int(x["ts_ms"]) for x in read_audit(world.remote.ws, step.job_id) if x["kind"] == "injected"]
        if ended and any(at > ended for at in typed):  # a gap docs/broker.md names, not a broken invariant
            report.seen["typed on the runner after the origin ended"] += 1


def _check_exit(step: Step, row, said: Said | None, report: Report) -> None:
    """`mam job delegate` exited with its record's code, and that record is what the registry still holds."""
    if said is None or said.rc < 0:  # the wrapper killed (its job followed by the node or the monitor), or hung
        return
    printed = said.record()
    if printed.get("taken_over"):  # exit 5 by design: another attempt followed the job to its end
        if said.rc != Exit.NOT_DELIVERED:
            report.violate(step, f"taken over, yet exited {said.rc}")
        return
    state, reason = printed.get("state"), printed.get("reason")
    try:
        ends = ending(Reason(str(reason)))
    except ValueError:
        report.violate(step, f"exited {said.rc} printing {state}/{reason}: {said.err.strip()[-300:]}")
        return
    if (ends.state.value, ends.exit_code) != (state, said.rc):
        report.violate(step, f"exited {said.rc} printing {state}/{reason} (its code is {ends.exit_code})")
    if (row.state, row.reason) != (state, reason):
        report.violate(step, f"printed {state}/{reason}, the registry holds {row.state}/{row.reason}")


def _check_epochs(world: World, step: Step, report: Report) -> None:
    """A remote job's origin accepted no runner event from an epoch older than the job's at that moment (each
    take-over raises it), and it counts the ones it refused (`stale_epoch`)."""
    epoch = 0
    for line in read_audit(world.origin.ws, step.job_id):
        kind = line.get("kind")
        if kind in ("created", "taken_over", "followed"):
            epoch = int(line.get("epoch") or 0)
        elif kind == "stale_epoch":
            report.seen["stale_epoch refused"] += 1
        elif kind == "input" and (inp := line.get("input") or {}).get("input") == "event":
            carried = int((inp.get("body") or {}).get("epoch") or 0)
            if carried < epoch:
                report.violate(step, f"accepted {inp.get('type')} seq {inp.get('seq')} of epoch {carried} at {epoch}")


def _check_job(world: World, step: Step, row, report: Report) -> None:
    ws = world.origin.ws
    lines = read_audit(ws, step.job_id)
    injected = sum(1 for line in lines if line["kind"] in ("injected", "dispatched"))
    if injected > 1:
        report.violate(step, f"brief sent {injected} times by the origin")
    if step.remote:
        remote_injected = sum(1 for line in read_audit(world.remote.ws, step.job_id) if line["kind"] == "injected")
        if remote_injected > 1:
            report.violate(step, f"brief injected {remote_injected} times on the runner's host")
    if JobState(row.state) not in TERMINAL:
        report.violate(step, f"state {row.state} is not terminal")

    def replay_matches() -> bool:
        # A process killed between its commit and its export leaves the file behind until the next
        # export of the job (the monitor exports dead owners' jobs within one monitor interval).
        replayed = replayed_state(ws, step.job_id)
        return (replayed.state.value, replayed.reason) == (row.state, row.reason) and replay_check().equal

    def replay_check():  # `mam job replay`'s check: every field of the record, and every step's logged state
        reg = world.origin.registry()
        try:
            return check_replay(ws, reg, step.job_id)
        finally:
            reg.close()

    try:
        wait_for(replay_matches, timeout=10, interval=0.2)
    except Timeout:
        replayed = replayed_state(ws, step.job_id)
        report.violate(
            step,
            f"audit replay gives {replayed.state.value}/{replayed.reason}, registry says {row.state}/{row.reason}; "
            f"differences {replay_check().differences}, first divergent step {replay_check().first_divergence}",
        )
    accepted = [
        line["input"]["seq"] for line in lines if line["kind"] == "input" and line["input"].get("input") == "event"
    ]
    store_host = world.remote if step.remote else world.origin
    reg = store_host.registry()
    try:
        stored = {e.seq for e in reg.events_after(step.job_id, 0)}
    finally:
        reg.close()
    missing = sorted(set(accepted) - stored)
    if missing:
        report.violate(step, f"accepted events {missing} are not in the {store_host.name} store")


def _check_panes(world: World, wave: list[Step], report: Report) -> None:
    """Each job's nonce is in its session's pane at most once."""
    for step in wave:
        host = world.remote if step.remote else world.origin
        row = host.session_row(step.session)
        record = world.origin.ws.job_record(step.job_id)
        if row is None or not row.pane_id or not record.exists():
            continue
        nonce = json.loads(record.read_text()).get("nonce", "")
        count = host.capture(row.pane_id).count(nonce) if nonce else 0
        if count > 1:
            report.violate(step, f"the brief's nonce is in the pane {count} times")


def _revive_sessions(world: World, wave: list[Step], report: Report) -> None:
    """Re-create sessions whose agent died, so later jobs have a live target; a session marked
    terminated while its agent still runs is a violation."""
    for host in (world.origin, world.remote):
        names = {s.session for s in wave if s.remote == (host is world.remote)}
        if host is world.remote and names:
            host.run("monitor", "--once")  # the remote host has no monitor of its own running
        for name in names:
            try:
                wait_for(lambda h=host, n=name: _dead_or_fine(h, n), timeout=20, interval=0.1)
            except Timeout:
                pass
        for name in host.sessions:  # every session: a wave may also end an agent it did not target
            row = host.session_row(name)
            if row is None or row.status != "terminated":
                continue
            if row.pane_pid and "mam.agents.demo_agent" in _cmdline(row.pane_pid):
                report.violate(
                    None, f"{host.name} session {name} was marked terminated while its agent runs: {row.note}"
                )
            host.create(name)


def _dead_or_fine(host: Host, name: str) -> bool:
    row = host.session_row(name)
    if row is None or row.status in ("terminated", "stopped"):  # stopped: a hard pause's, relaunched by its next job
        return True
    return bool(row.pane_pid) and _cmdline(row.pane_pid) != ""


# -- after the whole schedule -------------------------------------------------------------------
def _final_checks(world: World, report: Report) -> None:
    # No lost job: every job of the run on either host ends, a runner's copy too (by the origin's final state or
    # its own deadlines).
    for host in (world.origin, world.remote):
        try:
            wait_for(lambda h=host: not _open_jobs(h), timeout=60, interval=0.2)
        except Timeout:
            report.violate(None, f"jobs still open on the {host.name} host: {_open_jobs(host)[:10]}")
    # No stale lock: one probe job per live session must be delivered and complete.
    for host, prefix in ((world.origin, "tmux"), (world.remote, "remote:rf")):
        for name in host.sessions:
            target = f"{prefix}:{name}" if prefix == "tmux" else f"{prefix}/{name}"
            extra = ["--allow-insecure-broker"] if host is world.remote else []
            proc = world.origin.run(
                "job",
                "delegate",
                "--json",
                "--target",
                target,
                "--brief",
                "probe\ndemo-behaviour: ok",
                "--start-deadline",
                "10",
                "--heartbeat",
                "0.5",
                "--dispatch-wait",
                "10",
                *extra,
                timeout=90,
            )
            if proc.returncode != 0:
                try:
                    out = json.loads(proc.stdout)
                    why = f"{out.get('state')}/{out.get('reason')}: {out.get('detail')}"
                except ValueError:
                    why = proc.stdout[-300:]
                report.violate(None, f"probe job on {target} exited {proc.returncode}: {why} {proc.stderr[-300:]}")
    # Heartbeaters of ended jobs stop by themselves.
    try:
        wait_for(
            lambda: not [p for p in world.leftovers() if "event started" in p and "--heartbeat" in p],
            timeout=10,
            interval=0.2,
        )
    except Timeout:
        report.violate(None, f"heartbeaters still running after their jobs ended: {world.leftovers()[:3]}")
    for host in (world.origin, world.remote):
        reg = host.registry()
        try:
            if reg.db.integrity_check() != "ok":
                report.violate(None, f"{host.name} registry integrity_check failed")
            with reg.read() as conn:
                gen = sessions_table.generation(conn)
                rows = [r.as_dict() for r in sessions_table.list_all(conn)]
            if mirror.read_generation(host.ws.mirror_path) != gen:
                reg.refresh_mirror()
                report.violate(None, f"{host.name} YAML mirror was stale (generation behind the database)")
            import yaml

            doc = yaml.safe_load(host.ws.mirror_path.read_text())
            if doc["sessions"] != rows:
                report.violate(None, f"{host.name} YAML mirror does not match the database")
        finally:
            reg.close()


def _open_jobs(host: Host) -> list[str]:
    reg = host.registry()
    try:
        with reg.read() as conn:
            return [f"{row.id} {row.state}" for row in jobs_table.open_jobs(conn)]
    finally:
        reg.close()


def _governor_checks(world: World, sampler: gov.Sampler, report: Report) -> None:
    completed = gov.completed_jobs(world.origin.ws.db_path)
    working = gov.agents_peak([world.origin.ws.root, world.remote.ws.root], completed)
    figures = []
    for host in (world.origin, world.remote):
        slots, unsettled, committed = gov.leaks(host.ws.db_path)
        figures.append(f"{host.name}: {slots} leaked slot(s), {unsettled} leaked reservation(s), {committed} committed")
        if slots or unsettled:
            report.violate(None, f"{host.name}: {slots} slot(s) and {unsettled} reservation(s) leaked")
    if sampler.peak > gov.CAP:
        report.violate(None, f"{sampler.peak} jobs held running slots at once; the cap is {gov.CAP}")
    if working > gov.CAP:
        report.violate(None, f"{working} agents worked on completed jobs at once; the cap is {gov.CAP}")
    report.governor = (
        f"governor: cap {gov.CAP}; peak running {sampler.peak} (registry, {sampler.samples} samples), "
        f"{working} (agents' logs, {len(completed)} completed jobs); " + "; ".join(figures)
    )


def _no_leftovers(world: World, report: Report) -> None:
    try:
        wait_for(lambda: not world.leftovers(), timeout=15, interval=0.2)
    except Timeout:
        report.violate(None, f"processes left behind: {world.leftovers()[:5]}")
