"""What the MCP server does, as plain blocking calls: each tool is the library call or the node operation
its CLI command makes, and returns the fields that command's `--json` prints.

What the CLI hands the node (mam.node.call: a delegation, `job_fanout`, a job's cancel, pause, resume and
send, the hold, a routine added or run) this server hands it the same way, with typed values: the node
runs its attempts and owns their jobs, and a thread here waits for the answer. When no node may run them
(MAM_NODE=0, or MAM_NO_AUTOSTART=1 with none running) the same operations run in this process, and the
jobs it still drives when the server ends are handed to followers (`close`).

It holds what a long-lived process can keep open between calls: the registry and one MQTT
connection (the board's writes). It opens neither until a call needs it: looking (status, lists,
logs) opens no registry that does not exist yet and starts no broker, server or pane. Async,
progress and the wire are `server.py`'s business.
"""

from __future__ import annotations

import getpass
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mam.bus.connect import open_client
from mam.errors import BrokerError, JobNotFound, MamError, SessionNotFound, UsageError
from mam.governor.status import budget_status, empty_status
from mam.ids import check_job_id, check_name
from mam.jobs.brief import check_brief
from mam.jobs.delegate import DelegateRequest, Outcome, delegate_request
from mam.jobs.follow import hand_over
from mam.jobs.ledger import new_job_id, owned_here
from mam.jobs.queries import list_jobs, status
from mam.jobs.queries import log as job_log
from mam.jobs.watch import JobWatch, recent_events
from mam.loop.approval import approve as approve_loop
from mam.loop.approval import reject as reject_loop
from mam.loop.files import new_loop_id
from mam.loop.options import LOOP
from mam.loop.status import loop_status
from mam.node import call
from mam.node.call import Delivered
from mam.onboarding import onboarder
from mam.outcomes import JobState
from mam.protocol import Invalid
from mam.sessions.create import start_session
from mam.sessions.fork import fork_session
from mam.sessions.remove import remove_session
from mam.sessions.resume import resume_session
from mam.sessions.status import session_status
from mam.sessions.stop import stop_session
from mam.settings import Settings
from mam.store.jobs import JobRow
from mam.store.registry import Registry
from mam.util import pokes
from mam.util.proc import module_argv, spawn_detached
from mam.workspace import Workspace

LOOP_FLAG = {f.name: f.flag for f in LOOP}

log = logging.getLogger(__name__)
PASTE_WAIT_S = 30.0


@dataclass
class Delegation:
    """One `mam job delegate` this process asked for, answered in a background thread; the caller waits
    on its events, each set from what the command answered (in the node, or here)."""

    req: DelegateRequest
    registered: threading.Event = field(default_factory=threading.Event)  # its job is known (made or attached)
    delivered: threading.Event = field(default_factory=threading.Event)  # `--detach` answered: delivered, or ended
    done: threading.Event = field(default_factory=threading.Event)  # the command ended with the job's outcome
    state: str = JobState.PENDING.value  # as the command last answered
    outcome: Outcome | None = None
    error: BaseException | None = None
    thread: threading.Thread | None = None
    attached_to: str = ""  # the job its idempotency key named: this delegation only waits for it

    @property
    def job_id(self) -> str:
        return self.attached_to or self.req.job_id or ""


class Service:
    def __init__(self, *, ws: Workspace, settings: Settings, environ: Mapping[str, str]) -> None:
        self.ws, self.settings, self.environ = ws, settings, dict(environ)
        self._lock = threading.Lock()
        self._registry: Registry | None = None
        self._client: Any = None
        self.delegations: dict[str, Delegation] = {}
        self.loops: dict[str, subprocess.Popen[bytes]] = {}

    def node(self, op: str, **args: Any) -> Any:
        """`op` of the node protocol with this server's settings variables: its answer, or the node's error."""
        try:
            return call.value(self.ws.root, op, {k: v for k, v in args.items() if v is not None}, environ=self.environ)
        except Invalid as e:
            raise UsageError(str(e)) from None

    # -- what is opened on demand ---------------------------------------------------------------
    def reader(self) -> Registry | None:
        """The registry if the workspace has one (creates nothing)."""
        with self._lock:
            if self._registry is None:
                self._registry = Registry.open_existing(self.ws)
            return self._registry

    def writer(self) -> Registry:
        with self._lock:
            if self._registry is None:
                self._registry = Registry(self.ws)
            return self._registry

    def _shared_client(self) -> Any:
        """This server's MQTT connection, for the board's writes and to refuse a fan-out when no broker answers
        (starts the embedded broker if none is configured); None if no broker answers."""
        with self._lock:
            if self._client is None:
                try:
                    self._client = open_client(self.settings, self.ws, role="mcp", timeout=30)
                except BrokerError as e:
                    log.warning("no shared MQTT connection: %s", e)
                    return None
            return self._client

    # -- sessions ---------------------------------------------------------------------------------
    def session_create(
        self, *, onboard: bool = False, no_trust: bool = False, **options: Any
    ) -> tuple[dict[str, Any], int]:
        """`mam session create --json`, with the options mam/sessions/options.py offers over MCP."""
        made = start_session(
            ws=self.ws,
            settings=self.settings,
            registry_of=lambda: Registry(self.ws),
            environ=self.environ,
            trust=not no_trust,
            then=onboarder(ws=self.ws, settings=self.settings) if onboard else None,
            **options,
        )
        data = made.row.as_dict()
        if made.onboarding is not None:
            data["onboarding"] = made.onboarding
        return data, made.exit_code

    def session_stop(self, *, name: str, purge_conversation: bool = False) -> dict[str, Any]:

        # The tool's own argument is the confirmation the CLI asks for with --yes.
        row = stop_session(
            check_name(name),
            ws=self.ws,
            settings=self.settings,
            registry=self.writer(),
            purge_conversation=purge_conversation,
            yes=purge_conversation,
        )
        return row.as_dict()

    def session_remove(self, *, name: str, force: bool = False, purge_conversation: bool = False) -> dict[str, Any]:

        # As with session_stop, purge_conversation is itself the confirmation.
        return remove_session(
            check_name(name),
            ws=self.ws,
            settings=self.settings,
            registry=self.writer(),
            environ=self.environ,
            force=force,
            purge_conversation=purge_conversation,
            yes=purge_conversation,
        ).as_dict()

    def session_resume(self, *, name: str) -> dict[str, Any]:

        return resume_session(
            check_name(name), ws=self.ws, settings=self.settings, registry=self.writer(), environ=self.environ
        ).as_dict()

    def session_fork(self, *, source: str, name: str, role: str | None = None, by: str | None = None) -> dict[str, Any]:

        return fork_session(
            source,
            name=name,
            role=role,
            by=by,
            ws=self.ws,
            settings=self.settings,
            registry_of=lambda: Registry(self.ws),
            environ=self.environ,
        ).as_dict()

    def session_status(self, *, name: str | None = None) -> list[dict[str, Any]]:

        rows = session_status(ws=self.ws, settings=self.settings)
        if name is None:
            return rows
        check_name(name)
        rows = [r for r in rows if r["name"] == name]
        if not rows:
            raise SessionNotFound(f"no session {name!r} in this workspace", session=name)
        return rows

    # -- jobs -----------------------------------------------------------------------------------
    def start_delegation(self, *, target: str, brief: str, job_id: str | None = None, **options: Any) -> Delegation:
        """Hand this delegation to the workspace's node (with `detach`: it answers once the brief is delivered)
        and wait for its answer in a thread of this process. `options`: the delegation's other options offered
        over MCP (mam.protocol.DELEGATE), by name, and `detach`."""

        if not job_id:
            check_brief(brief)  # refused here, before a thread or a node request exists
        req = delegate_request(target=target, brief=brief, job_id=job_id or new_job_id(), **options)
        d = Delegation(req)
        args = {k: v for k, v in {"target": target, "brief": brief, "job_id": req.job_id, **options}.items()}

        def registered(job_id: str) -> None:
            if job_id != req.job_id:
                d.attached_to = job_id  # its idempotency key named another call's job
            d.registered.set()

        def run() -> None:
            try:
                got = call.delegation(self.ws.root, args, environ=self.environ, on_job=registered)
                if got.job_id != req.job_id:
                    d.attached_to = got.job_id  # its idempotency key named another call's job
                d.state = got.state
                if isinstance(got, Delivered):
                    d.registered.set()
                    d.delivered.set()  # the job runs on in the node (or in a thread here): not `done`
                    return
                d.outcome = got
            except Invalid as e:
                d.error = UsageError(str(e))
            except BaseException as e:  # handed to the caller, who reports it as the tool's error
                d.error = e
            d.done.set()
            d.registered.set()
            d.delivered.set()

        d.thread = threading.Thread(target=run, name=f"mam-mcp-{d.job_id}", daemon=True)
        with self._lock:
            self.delegations[req.job_id or ""] = d
        d.thread.start()
        return d

    def job_status(self, *, id: str) -> dict[str, Any]:

        return status(self._existing(id), id)

    def job_list(
        self, *, state: str | None = None, session: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:

        if session:
            check_name(session)
        registry = self.reader()
        return [] if registry is None else list_jobs(registry, session=session, state=state, limit=limit)

    def job_log(self, *, id: str, limit: int | None = None) -> list[dict[str, Any]]:

        lines = job_log(self.ws, self._existing(id), id)
        return lines[-limit:] if limit else lines

    def job_cancel(self, *, id: str, no_interrupt: bool = False) -> dict[str, Any]:
        return dict(self.node("cancel", job=check_job_id(id), no_interrupt=no_interrupt))

    def job_pause(self, *, id: str, mode: str = "safe", by: str | None = None) -> dict[str, Any]:
        return dict(self.node("pause", job=check_job_id(id), mode=mode, by=by))

    def job_resume(self, *, id: str, by: str | None = None) -> dict[str, Any]:
        return dict(self.node("resume", job=check_job_id(id), by=by))

    def pause_all(self, *, mode: str = "safe", by: str | None = None) -> dict[str, Any]:
        return dict(self.node("hold", mode=mode, by=by))

    def resume_all(self, *, by: str | None = None) -> dict[str, Any]:
        return dict(self.node("release", by=by))

    def job_send(self, *, id: str, text: str, by: str | None = None) -> dict[str, Any]:
        check_job_id(id)
        check_brief(text, what="the text")  # before a node is asked
        return dict(self.node("send", job=id, text=text, by=by))

    def job_watch(self, id: str) -> Any:

        return JobWatch(self._existing(id), id)

    def events_recent(
        self, *, job: str | None = None, session: str | None = None, since_seq: int = 0, limit: int = 100
    ) -> list[dict[str, Any]]:

        registry = self.reader()
        return (
            []
            if registry is None
            else recent_events(registry, job=job, session=session, since_seq=since_seq, limit=limit)
        )

    def budget_status(self) -> dict[str, Any]:
        registry = self.reader()
        return empty_status(self.settings) if registry is None else budget_status(registry, self.settings)

    def job_fanout(self, *, targets: str, brief: str, aggregate: str = "all") -> dict[str, Any]:
        """`mam job fanout --json`: the node's `fanout` operation (every target's job the node's)."""
        from mam.jobs.fanout import check_targets

        names = check_targets(targets.split(","))
        check_brief(brief)
        self.writer()
        if self._shared_client() is None:
            raise BrokerError("no MQTT broker answers: nothing was delegated")
        job_ids = [new_job_id() for _ in names]
        return dict(self.node("fanout", targets=names, brief=brief, aggregate=aggregate, job_ids=job_ids))

    # -- the board ------------------------------------------------------------------------------
    def _board_reader(self) -> Registry | None:
        """The registry for a board read (looking makes none); refuses a session not allowed the board."""
        from mam.board.store import check_writer

        registry = self.reader()
        if registry is not None:
            check_writer(registry, self.environ.get("MAM_SESSION", ""))
        return registry

    def board_read(self, *, key: str) -> dict[str, Any]:
        from mam.board.store import get

        return get(self._board_reader(), key).as_dict()

    def board_list(self, *, prefix: str = "") -> list[dict[str, Any]]:
        from mam.board.store import list_keys

        return [e.as_dict() for e in list_keys(self._board_reader(), prefix)]

    def board_write(self, *, key: str, value: str | None, if_version: int | None = None) -> dict[str, Any]:

        from mam.board.store import check_writer, write

        writer = self.environ.get("MAM_SESSION", "") or getpass.getuser()
        registry = self.writer()
        check_writer(registry, self.environ.get("MAM_SESSION", ""))
        out = write(
            self.ws, self.settings, registry, key, value, writer=writer, if_version=if_version,
            client=self._shared_client(),
        )  # fmt: skip
        return {**out.as_dict(), "detail": out.detail}

    # -- routines -------------------------------------------------------------------------------
    def routine_add(self, **options: Any) -> dict[str, Any]:
        """`mam routine add ... --json`: the node's `routine_add` (a node is started: it fires routines)."""
        from mam.routines.manage import Spec, checked

        checked(Spec(**options))  # here first: a bad option starts no node
        return dict(self.node("routine_add", **options))

    def routine_run(self, *, name: str, wait_s: float = 30.0) -> dict[str, Any]:
        """`mam routine run NAME --json`: the node decides and fires the tick."""
        from mam.routines.manage import check_routine_name

        return dict(self.node("routine_run", name=check_routine_name(name), wait_s=wait_s))

    def routine_list(self) -> list[dict[str, Any]]:
        from mam.routines.manage import list_routines

        return list_routines(self.reader())

    def routine_log(self, *, name: str, limit: int = 20) -> list[dict[str, Any]]:
        from mam.routines.manage import log as routine_log

        return routine_log(self.reader(), name, limit=limit)

    # -- the org's tasks (mam/org) -------------------------------------------------------------------
    def task_add(
        self,
        *,
        title: str,
        role: str,
        brief: str | None = None,
        blocked_by: list[str] | None = None,
        parent: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """`mam task add ... --json`: the node's `task_add` (a node is started: it wakes tasks)."""
        from mam.org.manage import TaskSpec, checked

        spec = checked(TaskSpec(title, role, brief, tuple(blocked_by or ()), parent, idempotency_key))  # here first
        return dict(
            self.node(
                "task_add",
                title=spec.title,
                role=spec.role,
                brief=spec.brief,
                blocked_by=list(spec.blocked_by) or None,
                parent=spec.parent,
                idempotency_key=spec.idempotency_key,
            )
        )

    def task_done(self, *, task: str) -> dict[str, Any]:
        """`mam task done ID`: the node's `task_done` (the tasks it blocks may run)."""
        from mam.org.manage import check_task_id

        return dict(self.node("task_done", task=check_task_id(task)))

    def task_list(self) -> list[dict[str, Any]]:
        from mam.org.manage import list_tasks

        return list_tasks(self.reader(), self.settings)

    def task_show(self, *, task: str) -> dict[str, Any]:
        from mam.org.manage import show_task

        return show_task(self.reader(), task, self.settings)

    def _existing(self, job_id: str) -> Registry:
        """The registry for a job lookup, as the CLI's read-only job commands find it (creates nothing)."""
        check_job_id(job_id)
        registry = self.reader()
        if registry is None:
            raise JobNotFound(f"no job {job_id!r} in workspace {self.ws.root} (it has no registry)", job_id=job_id)
        return registry

    # -- loops ----------------------------------------------------------------------------------
    def loop_start(self, options: dict[str, Any]) -> tuple[subprocess.Popen[bytes], str, Path]:
        """Start `mam loop` as a detached process under a loop id chosen here; returns (process, id, stderr file)."""

        for key in ("creator", "planner"):
            if options.get(key):
                check_name(options[key], key)
        for name in (options.get("reviewer") or "").split(","):
            if name:
                check_name(name, "reviewer")
        loop_id = new_loop_id()
        argv = module_argv(
            sys.executable,
            "mam",
            "--workspace",
            str(self.ws.root),
            "loop",
            f"--loop-id={loop_id}",
            "--quiet",
        )
        for key, value in options.items():
            if value is None or value is False:
                continue
            flag = LOOP_FLAG[key]  # the option's declared spelling (mam/loop/options.py)
            argv.append(
                flag if value is True else f"{flag}={value}"
            )  # one argv item each: no shell, no option injection
        fd, name = tempfile.mkstemp(prefix="mam-mcp-loop-", suffix=".log")  # its refusal, if it refuses to start
        os.close(fd)
        proc = spawn_detached(argv, log=Path(name), env=self.environ, cwd=self.ws.root)
        self.loops[loop_id] = proc
        return proc, loop_id, Path(name)

    def loop_approve(self, *, id: str, merge: str = "ff") -> dict[str, Any]:

        return approve_loop(self.ws, id, mode=merge, via="mcp", environ=self.environ)

    def loop_reject(self, *, id: str, note: str) -> dict[str, Any]:

        return reject_loop(self.ws, id, note=note, via="mcp")

    def loop_status(self, *, id: str) -> dict[str, Any]:

        proc = self.loops.get(id)
        if proc is not None and proc.poll() is not None:
            del self.loops[id]  # reaped: no zombie left by a loop this server started
        return loop_status(self.ws, id)

    # -- the end ------------------------------------------------------------------------------
    def close(self) -> list[str]:
        """Hand each job this process still drives (run here: no node could run it) to a detached `mam job
        delegate --job-id` (which takes it over without injecting again), so the jobs outlive this server;
        returns their ids. A job the node runs needs nothing: the node drives it to its end."""
        handed = []
        for d in list(self.delegations.values()):
            registry = self.writer()
            row = registry.find_job(d.job_id)
            if row is None or not row.open or not owned_here(row.owner) or d.attached_to:
                continue  # the node's, another call's (attached), or ended
            row = self._past_the_paste(registry, row)  # never leave a paste half typed: let it reach the pane first
            if not row.open:
                continue
            # The same hand-over as an interrupted `mam job delegate`: the brief goes along in a 0600 file,
            # so a job not yet claimed is typed once by the follower, never as an empty brief.
            if hand_over(self.ws, registry, row, d.req, environ=self.environ):
                handed.append(d.job_id)
            else:
                log.warning("job %s could not be handed over", d.job_id)
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except MamError:
                pass
        return handed

    def _past_the_paste(self, registry: Registry, row: JobRow) -> JobRow:
        """The job's row once no paste of its brief is under way (woken by each commit to it; PASTE_WAIT_S at most)."""
        deadline = time.monotonic() + PASTE_WAIT_S
        with pokes.Waiter(self.ws, [pokes.job_key(row.id)]) as waiter:
            while row.state == JobState.DELIVERING.value and time.monotonic() < deadline:
                waiter.wait(deadline - time.monotonic())
                row = registry.job(row.id)
        return row
