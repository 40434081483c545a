"""`mam demo`: a self-contained tour in a temporary workspace.

It starts the embedded broker and a private tmux server, creates demo agent sessions, delegates
jobs to them (two at once, one that fails on purpose), runs a short review loop when available,
prints what happened, and removes everything it started. Nothing outside the temporary folder
(and the OS temp dir) is touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mam.broker import embedded
from mam.demo.loop import demo_loop
from mam.demo.org import OrgResult, run_org
from mam.demo.org import summary_lines as org_summary
from mam.errors import MamError
from mam.jobs.ledger import new_job_id
from mam.jobs.result import Outcome, outcome_from_dict
from mam.node import client as node_client
from mam.node.call import answer, call
from mam.node.wire import SOCKET
from mam.outcomes import Exit
from mam.panes.tmux import TmuxBackend
from mam.sessions.create import CreateRequest, create_session
from mam.settings import Settings, load_settings
from mam.store.registry import Registry
from mam.store.sessions import LIVE, SessionStatus
from mam.util.proc import find_program
from mam.workspace import Workspace

Echo = Callable[[str], None]


@dataclass(frozen=True)
class DemoJob:
    session: str
    brief: str
    expect: int
    label: str


@dataclass
class DemoResult:
    jobs: list[tuple[DemoJob, Outcome, float, int]] = field(default_factory=list)  # job, outcome, seconds, events
    loop: dict[str, object] | None = None
    ok: bool = True
    workspace: Path | None = None
    org: OrgResult | None = None  # `mam demo --org`


JOBS = (
    DemoJob(
        "creator",
        "Write a greeting.\ndemo-write: hello.txt :: hello from a demo agent\ndemo-commit: add hello.txt",
        Exit.OK,
        "edit and commit",
    ),
    DemoJob("helper", "Take a while and report progress.\ndemo-sleep: 2", Exit.OK, "slow job with progress"),
    DemoJob("flaky", "This agent is set up to fail.", Exit.FAILED, "agent reports an error"),
)
SESSIONS = (("creator", "developer", "ok"), ("helper", "developer", "ok"), ("flaky", "developer", "error"))


def demo_environ(base: Mapping[str, str], ws: Workspace, tmux_server: str) -> dict[str, str]:
    """The user's environment without any mam/MQTT settings, pointed at the demo's own servers."""
    env = {
        k: v
        for k, v in base.items()
        if not k.startswith(("MQTT_", "MAM_", "HERDR_", "TMUX", "XDG_")) or k == "MAM_NOTIFY"
    }
    # The demo agents keep their conversations under HOME: give them one inside the temporary folder,
    # so the demo writes nothing outside it and the OS temp dir.
    home = ws.root / ".demo-home"
    home.mkdir(mode=0o700, exist_ok=True)
    env.update(
        {
            "MAM_WORKSPACE": str(ws.root),
            "MAM_TMUX_SERVER": tmux_server,
            "MAM_POLL_S": "0.05",
            "MAM_HEARTBEAT_S": "1",
            "HOME": str(home),
        }
    )
    return env


def run_demo(
    *, echo: Echo, keep: bool = False, loop: bool = True, org: bool = False, environ: Mapping[str, str] | None = None
) -> DemoResult:

    root = Path(tempfile.mkdtemp(prefix="mam-demo-"))
    ws = Workspace(root.resolve())
    server = f"mam-demo-{uuid.uuid4().hex[:8]}"
    env = demo_environ(os.environ if environ is None else environ, ws, server)
    settings = load_settings(env_file=None, environ=env)
    result = DemoResult(workspace=ws.root)
    started = time.monotonic()

    def say(text: str) -> None:
        echo(f"[{time.monotonic() - started:6.2f}s] {text}")

    registry = Registry(ws)
    try:
        _git_init(ws.root)
        st = embedded.start(ws, settings)
        say(f"workspace {ws.root}; embedded broker on 127.0.0.1:{st.port}; tmux server {server}")
        if org:  # `--org`: roles and tasks instead of the jobs and the loop (mam/demo/org.py)
            result.org = run_org(ws=ws, settings=settings, registry=registry, environ=env, say=say)
            result.ok = result.org.ok
            return result
        _create_sessions(ws, settings, registry, env, say)
        _run_jobs(ws, settings, env, say, result)
        if loop:
            outcome = _run_loop(ws, settings, registry, env, say)
            result.loop = outcome
            result.ok = result.ok and outcome is not None and outcome.get("exit_code") == Exit.OK
    finally:
        # The node first: its monitor would take the sessions for dead agents once their server goes.
        _answer, gone = node_client.stop(str(ws.run_dir / SOCKET))
        if not gone:
            say(f"the workspace's node did not stop within {node_client.STOP_WAIT_S:.0f} s")
        registry.close()
        TmuxBackend(server, settings=settings, ws=ws).kill_server()
        _end_sessions(ws, say)
        embedded.stop(ws)
        if keep:
            say(f"kept the workspace {ws.root}")
        else:
            shutil.rmtree(ws.root, ignore_errors=True)
        say("cleaned up: tmux server killed, broker stopped" + ("" if keep else ", workspace removed"))
    return result


def _end_sessions(ws: Workspace, say: Callable[[str], None]) -> None:
    """The demo's sessions end with it: recorded terminated by the demo once their server is gone and no node
    watches, so no monitor takes them for agents that died (a `session_terminated` message to MAM_NOTIFY each)
    or adopts their panes while they still live."""
    registry = Registry(ws)
    try:
        for row in registry.sessions():
            if row.status in LIVE:
                registry.update_session(row.name, status=SessionStatus.TERMINATED, note="the demo ended")
    except MamError as e:
        say(f"could not record the sessions' end: {e}")
    finally:
        registry.close()


def _git_init(root: Path) -> None:
    program = find_program("git")  # never a `git` a relative PATH entry finds in the caller's folder
    if program is None:
        raise FileNotFoundError("git is not on PATH: the demo makes a git repository")
    git = [program, "-C", str(root), "-c", "user.name=mam demo", "-c", "user.email=demo@mam.invalid"]
    subprocess.run([program, "init", "-q", str(root)], check=True, capture_output=True)
    subprocess.run([program, "-C", str(root), "config", "user.name", "mam demo"], check=True)
    subprocess.run([program, "-C", str(root), "config", "user.email", "demo@mam.invalid"], check=True)
    (root / "README.md").write_text("A throwaway workspace made by `mam demo`.\n")
    (root / ".gitignore").write_text(".mam/\n.agents/\n.demo-home/\n")
    subprocess.run([*git, "add", "-A"], check=True, capture_output=True)
    subprocess.run([*git, "commit", "-q", "-m", "initial"], check=True, capture_output=True)


def _create_sessions(ws: Workspace, settings: Settings, registry: Registry, env: dict[str, str], say: Echo) -> None:

    for name, role, behaviour in SESSIONS:
        row = create_session(
            CreateRequest(name=name, agent="demo", role=role, cwd=str(ws.root)),
            ws=ws,
            settings=settings,
            registry=registry,
            environ={**env, "MAM_DEMO_BEHAVIOUR": behaviour},
        )
        say(f"session {name}: demo agent ({behaviour}) in pane {row.pane_id}")


def _run_jobs(ws: Workspace, settings: Settings, env: dict[str, str], say: Echo, result: DemoResult) -> None:
    def one(job: DemoJob) -> None:
        events = 0
        t0 = time.monotonic()

        def frame(f: dict[str, Any]) -> None:
            nonlocal events
            if "progress" not in f:
                return
            p = f["progress"]
            j = p["job"]
            if p["input"].startswith("event "):
                events += 1
                say(f"{job.session:<8} {p['type']}{': ' + p['message'] if p['message'] else ''}")
            elif j["terminal"] or p["input"] == "delivered":
                say(f"{job.session:<8} {j['state']}{' (' + j['reason'] + ')' if j['reason'] else ''}")

        args = {
            "target": f"tmux:{job.session}",
            "brief": job.brief,
            "start_deadline_s": 30,
            "heartbeat_s": 1,
            "timeout_s": 120,
            "job_id": new_job_id(),
            "progress": True,
        }
        try:
            out = outcome_from_dict(answer(call(ws.root, "delegate", args, environ=env, on_frame=frame)))
        except MamError as e:
            out = Outcome(str(args["job_id"]), "error", type(e).__name__, e.exit_code, detail=str(e))
        result.jobs.append((job, out, time.monotonic() - t0, events))
        if out.exit_code != job.expect:
            result.ok = False

    threads = [threading.Thread(target=one, args=(job,)) for job in JOBS]
    say(f"delegating {len(threads)} jobs at once (each run by the workspace's node)")
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _run_loop(
    ws: Workspace, settings: Settings, registry: Registry, env: dict[str, str], say: Echo
) -> dict[str, object] | None:
    return demo_loop(ws=ws, settings=settings, registry=registry, environ=env, say=say)


def summary_lines(result: DemoResult) -> list[str]:
    if result.org is not None:
        return org_summary(result.org)
    lines = [
        "",
        f"{'JOB':<22} {'SESSION':<9} {'WHAT':<24} {'STATE':<10} {'REASON':<14} {'EXIT':>4} {'EVENTS':>6} {'TIME':>6}",
    ]
    for job, out, seconds, events in sorted(result.jobs, key=lambda r: JOBS.index(r[0])):
        mark = "" if out.exit_code == job.expect else f"  (expected {job.expect})"
        lines.append(
            f"{out.job_id:<22} {job.session:<9} {job.label:<24} {out.state:<10} {out.reason:<14} {out.exit_code:>4} "
            f"{events:>6} {seconds:>5.1f}s{mark}"
        )
    if result.loop is not None:
        lines.append("")
        lines.append(f"review loop: {result.loop.get('summary', '')} (exit {result.loop.get('exit_code')})")
    lines.append("")
    lines.append(
        "demo " + ("finished: every job ended as expected" if result.ok else "FAILED: see the lines marked 'expected'")
    )
    return lines
