"""What the node does for each operation of its protocol (mam.protocol): typed values in, typed values out.

`Service.run(op, args, env, reply)` runs one operation for one client and returns its `Result`: the answer (a
JSON value: a job record, an event's receipt...) and the exit code the client exits with. While it runs,
the operation tells its client what happens through `reply` (the job it drives, the job's progress), and
the client may go away (`reply.gone`: interrupted or killed): the operation runs on, as if nobody listened.
A MamError is the client's to say (`error` frame: its one line and exit code); anything else is an
internal error of the node, logged with its traceback, answered as one line naming the job and the log.

The same object serves the node's clients (mam.node.server: `daemon=True`, its attempts sharing one broker
connection and beating hearts in threads) and runs an operation in the calling process when no node may
(MAM_NODE=0, or no node and none to start: mam.node.local). Either way nothing of the caller's process is
read: the caller's settings variables come in `env`, a file it names comes as its text.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mam.errors import MamError, UsageError
from mam.jobs.delegate import DelegateRequest, RemoteOrigin, delegate, delegate_request
from mam.jobs.model import Input, Job
from mam.jobs.target import parse_target
from mam.outcomes import OPEN_STATES, UNCLAIMED_STATES, Exit
from mam.protocol import Invalid
from mam.settings import Settings, load_settings
from mam.store.registry import Registry
from mam.util import interrupts
from mam.workspace import Workspace

log = logging.getLogger("mam.node")
MAX_TEXT = 4000  # what an event keeps of a message or reason


@dataclass(frozen=True)
class Result:
    """An operation's end: its answer and the exit code its client exits with. `then`: what the node does
    next for it once the client has its answer (a `--detach`ed job followed to its end)."""

    answer: Any
    exit_code: int
    then: Callable[[], None] | None = None


class Left(Exception):
    """An operation run in its caller's process was interrupted (Ctrl-C, SIGTERM, SIGHUP): `line` says what
    became of its job; the caller exits 128 + the signal."""

    def __init__(self, line: str, signum: int) -> None:
        super().__init__(line)
        self.line, self.signum = line, signum


class Reply:
    """An operation's way back to its client: frames while it runs, dropped once the client has gone."""

    def __init__(self, send: Callable[[dict[str, Any]], None], *, client_pid: int | None = None) -> None:
        self._send = send
        self.client_pid = client_pid  # the node's client (its peer's pid): None when run in the caller
        self.gone = threading.Event()

    def frame(self, msg: dict[str, Any]) -> None:
        if self.gone.is_set():
            return
        try:
            self._send(msg)
        except OSError:
            self.gone.set()

    def job(self, job_id: str) -> None:
        """The job this operation drives (registered, taken over, attached to, waited for)."""
        self.frame({"job": job_id})


def snapshot(job: Job, inp: Input | None, waits: str = "") -> dict[str, Any]:
    """A progress frame's body: what the live status line and `--follow` show of one transition. `waits`:
    what a job waiting for its turn waits for, in words (mam.jobs.queries.waits_for)."""
    body = getattr(inp, "body", {}) or {}
    kind = getattr(inp, "type", "")
    return {
        "job": {
            "id": job.id,
            "state": job.state.value,
            "reason": job.reason,
            "queued_for": job.queued_for,
            "waits": waits,
            "waiting": job.waiting,
            "terminal": job.terminal,
            "created_ms": job.created_ms,
            "delivered_ms": job.delivered_ms,
            "started_ms": job.started_ms,
            "last_event_ms": job.last_event_ms,
            "start_deadline_ms": job.start_deadline_ms,
            "heartbeat_ms": job.heartbeat_ms,
            "heartbeat_k": job.heartbeat_k,
            "budget_ms": job.budget_ms,
        },
        "input": "" if inp is None else type(inp).__name__.lower() + (f" {kind}" if kind else ""),
        "type": str(kind),
        "message": str(body.get("message") or body.get("reason") or "")[:200],
    }


def remote_origin(target: str) -> RemoteOrigin | None:
    """The origin side of `remote:` jobs for a remote target (only a remote job pays for importing it)."""
    if not parse_target(target).remote:
        return None
    from mam.remote.origin import ORIGIN

    return ORIGIN


class Service:
    def __init__(self, ws: Workspace, settings: Settings, *, daemon: bool) -> None:
        self.ws = ws
        self.settings = settings  # the node's own (its monitor, routines, runner)
        self.daemon = daemon  # the node process (False: an operation run in its caller's process)
        self.wake_routines: Callable[[], None] = lambda: None  # set by the node that runs the scheduler
        self.wake_org: Callable[[], None] = lambda: None  # set by the node that wakes tasks (mam.org)
        self._settings: dict[tuple[tuple[str, str], ...], tuple[float, Settings]] = {}
        self._lock = threading.Lock()

    # -- the one entry ------------------------------------------------------------------------
    def serve(
        self, op: str, args: dict[str, Any], env: Mapping[str, str], reply: Reply
    ) -> tuple[dict[str, Any], Callable[[], None] | None]:
        """Run `op` for a client: its final frame (`answer` or `error`, with `exit`; `left` when run in an
        interrupted caller) and what comes next. A MamError is the client's to say; anything else is logged
        here with its traceback and told as one line naming the job and the log."""
        try:
            result = self.run(op, args, env, reply)
        except Left as e:
            return {"left": e.line, "exit": 128 + e.signum}, None
        except Invalid as e:
            return {"error": str(e), "exit": e.exit_code}, None
        except MamError as e:
            return {"error": str(e), "exit": e.exit_code, "kind": type(e).__name__}, None
        except Exception:
            job = str(args.get("job") or args.get("job_id") or "")
            log.exception("operation %s failed (job %s)", op, job or "-")
            return {"error": failure_line(op, job), "exit": Exit.FAILED}, None
        return {"answer": result.answer, "exit": result.exit_code}, result.then

    def run(self, op: str, args: dict[str, Any], env: Mapping[str, str], reply: Reply) -> Result:
        """Run `op` (its `args` checked by mam.protocol) for a client whose settings variables are `env`."""
        settings = self.settings_for(env)
        for warning in settings.warnings:
            reply.frame({"warning": warning})
        return self.handlers()[op](dict(args), settings, reply, env)

    def handlers(self) -> dict[str, Callable[[dict[str, Any], Settings, Reply, Mapping[str, str]], Result]]:
        """Each operation of mam.protocol this service runs (the node answers the others itself: CONTROL)."""
        return {
            "delegate": self.op_delegate,
            "wait": self.op_wait,
            "event": self.op_event,
            "cancel": self.op_cancel,
            "pause": self.op_pause,
            "resume": self.op_resume,
            "hold": self.op_hold,
            "release": self.op_release,
            "send": self.op_send,
            "fanout": self.op_fanout,
            "routine_add": self.op_routine_add,
            "routine_resume": self.op_routine_resume,
            "routine_run": self.op_routine_run,
            "task_add": self.op_task_add,
            "task_done": self.op_task_done,
            "task_reopen": self.op_task_reopen,
            "task_cancel": self.op_task_cancel,
            "role_reset": self.op_role_reset,
        }

    def settings_for(self, env: Mapping[str, str]) -> Settings:
        """The settings of a request: `.mam.env`, then the caller's settings variables (never the node's own
        environment: a later caller is not served with the first one's settings). Kept while `.mam.env` is
        unchanged."""
        key = tuple(sorted(env.items()))
        try:
            stamp = os.stat(self.ws.env_file).st_mtime_ns
        except OSError:
            stamp = 0
        with self._lock:
            got = self._settings.get(key)
            if got is not None and got[0] == stamp:
                return got[1]
        settings = load_settings(env_file=self.ws.env_file, environ=env)
        with self._lock:
            if len(self._settings) > 64:
                self._settings.clear()
            self._settings[key] = (stamp, settings)
        return settings

    def broker(self, settings: Settings) -> Any:
        """The node's shared broker connection for `settings` (None in a caller's process: the attempt
        connects by itself)."""
        if not self.daemon:
            return None
        from mam.bus.shared import shared_client  # paho: only a delegation pays for it

        return shared_client(settings, self.ws)

    # -- jobs -----------------------------------------------------------------------------------
    def op_delegate(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        progress = bool(args.pop("progress", False))
        req = delegate_request(brief=args.pop("brief", None), **args)
        registry = Registry(self.ws)
        made: list[str] = []
        attached: list[str] = []

        def registered(job: Job) -> None:
            made.append(job.id)
            reply.job(job.id)  # first: whatever happens next, the client can name the job

        def on_attach(job_id: str, still_open: bool) -> None:
            attached.append(job_id)
            reply.frame({"job": job_id, "attached": True, "open": still_open})

        def update(job: Job, inp: Input | None) -> None:
            reply.frame({"progress": snapshot(job, inp, _waits(registry, job))})

        try:
            with interrupts.raising():  # in a caller's process only (signals reach its main thread)
                out = delegate(
                    req,
                    ws=self.ws,
                    settings=settings,
                    registry=registry,
                    client=self.broker(settings),
                    on_update=update if progress else None,
                    remote=remote_origin(req.target),
                    on_attach=on_attach,
                    on_registered=registered,
                    client_pid=reply.client_pid,
                )
        except KeyboardInterrupt as e:
            from mam.jobs.follow import left_behind, left_open

            with interrupts.ignored():  # a second Ctrl-C or a hang-up must not cut the hand-over in half
                if attached:  # never ours to cancel: it goes on as it was
                    line = left_open(registry, attached[-1])
                else:
                    line = left_behind(self.ws, registry, made[-1] if made else None, req)
            raise Left(line, interrupts.signum_of(e)) from None
        finally:
            registry.close()
        if req.detach and out.state in OPEN_STATES:
            return Result({"id": out.job_id, "state": out.state}, Exit.OK, then=self._follower(out.job_id, env))
        return Result(out.as_dict(), out.exit_code)

    def attempt(self, req: DelegateRequest, settings: Settings | None = None) -> Any:
        """Drive `req` to its end in this thread (a routine's tick, a branch of a fan-out, a take-over): its
        Outcome."""
        settings = settings or self.settings
        registry = Registry(self.ws)  # a connection of its own per thread
        try:
            return delegate(
                req, ws=self.ws, settings=settings, registry=registry, client=self.broker(settings),
                remote=remote_origin(req.target),
            )  # fmt: skip
        finally:
            registry.close()

    def _follower(self, job_id: str, env: Mapping[str, str]) -> Callable[[], None]:
        """Follow `job_id` to its end, as its owner would (a `--detach`ed job: its client has its answer)."""

        def follow() -> None:
            try:
                self.op_wait({"job": job_id}, self.settings_for(env), Reply(lambda _msg: None), env)
            except Exception:
                log.exception("following job %s failed", job_id)

        return follow

    def op_wait(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.jobs.follow import left_open, wait_for, waited_job

        job_id = args["job"]
        registry, _row = waited_job(self.ws, job_id)
        reply.job(job_id)

        def update(job: Job) -> None:
            from mam.jobs.queries import last_event

            # The line `delegate` draws: the last event the job applied, what it waits for.
            reply.frame({"progress": snapshot(job, last_event(registry, job), _waits(registry, job))})

        try:
            with interrupts.raising():
                out = wait_for(
                    self.ws,
                    registry,
                    job_id,
                    timeout_s=args.get("timeout_s"),
                    take_over=lambda req: self.attempt(req, settings),
                    on_look=update if args.get("progress") else None,
                )
        except KeyboardInterrupt as e:
            raise Left(left_open(registry, job_id), interrupts.signum_of(e)) from None
        if out is None:
            return Result({"id": job_id, "state": registry.job(job_id).state}, Exit.STILL_RUNNING)
        return Result(out.as_dict(), out.exit_code)

    def op_cancel(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.jobs.pause import cancel_job
        from mam.jobs.queries import existing_registry

        job_id = args["job"]
        view = cancel_job(
            self.ws, settings, existing_registry(self.ws, job_id), job_id, interrupt=not args.get("no_interrupt")
        )
        return Result(view, Exit.OK)

    def op_pause(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.jobs.pause import pause_job
        from mam.jobs.queries import existing_registry

        job_id = args["job"]
        view = pause_job(
            self.ws, settings, existing_registry(self.ws, job_id), job_id, mode=args.get("mode") or "safe",
            by=args.get("by"),
        )  # fmt: skip
        return Result(view, Exit.OK)

    def op_resume(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.jobs.pause import resume_job
        from mam.jobs.queries import existing_registry

        job_id = args["job"]
        view = resume_job(
            self.ws, settings, existing_registry(self.ws, job_id), job_id, by=args.get("by"), environ=os.environ
        )
        return Result(view, Exit.OK)

    def op_hold(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.jobs.pause import pause_all

        with _registry(self.ws) as registry:
            out = pause_all(self.ws, settings, registry, mode=args.get("mode") or "safe", by=args.get("by"))
        return Result(out, Exit.OK)

    def op_release(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.jobs.pause import resume_all

        with _registry(self.ws) as registry:
            out = resume_all(self.ws, settings, registry, by=args.get("by"), environ=os.environ)
        return Result(out, Exit.OK)

    def op_send(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.jobs.queries import existing_registry
        from mam.jobs.send import send_text

        job_id = args["job"]
        sent = send_text(
            self.ws, settings, job_id, args["text"], by=args.get("by"),
            registry_of=lambda: existing_registry(self.ws, job_id),
        )  # fmt: skip
        return Result(sent, Exit.OK)

    def op_fanout(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.jobs.fanout import fanout

        def one(req: DelegateRequest) -> Any:
            return self.attempt(req, settings)

        with interrupts.raising():  # interrupted in a caller's process: FanoutInterrupted names the open jobs
            out = fanout(
                args["targets"],
                args["brief"],
                aggregate=args.get("aggregate") or "all",
                ws=self.ws,
                timeout_s=args.get("timeout_s"),
                start_deadline_s=args.get("start_deadline_s"),
                job_ids=args.get("job_ids"),
                delegator=one,
                on_jobs=lambda ids: reply.frame({"jobs": ids}),
            )
        return Result(out.as_dict(), out.exit_code)

    # -- what an agent reports ------------------------------------------------------------------
    def op_event(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.bus.opener import opener
        from mam.jobs import heartbeat as heartbeater
        from mam.jobs.emit import DatabaseStore, Emitter
        from mam.jobs.record import read_record

        job_id, kind = args["job"], args["type"]
        record = read_record(self.ws, job_id)  # JobNotFound (exit 5) before anything is opened or created
        body, fit = event_body(kind, args, record)
        if body.get("waiting_on"):
            self._check_wait(job_id, body["waiting_on"])
        store = DatabaseStore(self.ws)
        connect = opener(self.ws, "agent", reconnect=False, environ=env)
        emitter = Emitter(self.ws, store, self.broker(settings), records={job_id: record}, connect=connect)
        try:
            out = emitter.emit(job_id, kind, body, fit_field=fit)
        finally:
            emitter.close()
            store.close()
        answer = {
            "job": job_id,
            "seq": out.envelope.seq,
            "type": kind,
            "published": out.published,
            "via": out.via,
            "warning": out.warning,
            "cut": out.cut,
            "report_path": body.get("report_path", ""),
        }
        if kind == "started" and args.get("heartbeat_s") is not None:
            agent_pid = int(args.get("agent_pid") or 0)
            # In the node: a thread of it; in the agent's own process: a new interpreter (never a fork).
            heartbeater.start(
                self.ws, job_id, float(args["heartbeat_s"]), agent_pid, caller_pid=reply.client_pid or os.getpid(),
                environ=env,
            )  # fmt: skip
        return Result(answer, Exit.OK)

    def _check_wait(self, job_id: str, waiting_on: str) -> None:
        """`--waiting-on TASK` names a task of this workspace (TaskNotFound, exit 5), not the job's own."""
        from mam.org.manage import task_exists, task_of_job

        with _registry(self.ws) as registry:
            if not task_exists(registry, waiting_on):
                from mam.errors import TaskNotFound

                raise TaskNotFound(f"--waiting-on {waiting_on}: no such task (see `mam task list`)", task=waiting_on)
            if task_of_job(registry, job_id) == waiting_on:
                raise UsageError(f"--waiting-on {waiting_on}: that is this job's own task")

    # -- routines (the node fires them: mam.routines) ---------------------------------------------
    def op_routine_add(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.routines.manage import Spec, add_row, checked

        spec = Spec(**{k: v for k, v in args.items() if v is not None})
        row = checked(spec)  # before the registry: a bad option writes nothing
        with _registry(self.ws) as registry:
            out = add_row(registry, row)
        self.wake_routines()
        return Result(out, Exit.OK)

    def op_routine_resume(
        self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]
    ) -> Result:
        from mam.routines.manage import check_routine_name, set_paused

        with _registry(self.ws) as registry:
            out = set_paused(registry, check_routine_name(args["name"]), False)
        self.wake_routines()
        return Result(out, Exit.OK)

    def op_routine_run(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.routines.manage import check_routine_name, request_run, wait_decided, withdraw

        name = check_routine_name(args["name"])
        wait_s = 30.0 if args.get("wait_s") is None else float(args["wait_s"])
        with _registry(self.ws) as registry:
            n = request_run(registry, name)
            self.wake_routines()
            out = wait_decided(registry, n, timeout_s=wait_s)
            if out is not None and out["status"] == "pending" and not out["reason"] and withdraw(registry, n):
                raise MamError(f"no node decided the tick within {wait_s:g} s; nothing fired (start one: `mam node`)")
        return Result(out, Exit.OK)

    # -- the org's tasks (the node wakes them: mam.org) -------------------------------------------
    def op_task_add(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.org.manage import TaskSpec, add_task, checked

        spec = checked(TaskSpec(**{**args, "blocked_by": tuple(args.get("blocked_by") or ())}))
        with _registry(self.ws) as registry:
            out = add_task(registry, spec, settings)
        self.wake_org()
        return Result(out, Exit.OK)

    def op_task_done(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.org.manage import mark_done, show_task

        with _registry(self.ws) as registry:
            mark_done(registry, args["task"])
            out = show_task(registry, args["task"], settings)
        self.wake_org()
        return Result(out, Exit.OK)

    def op_task_reopen(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.org.manage import reopen, show_task

        with _registry(self.ws) as registry:
            reopen(registry, args["task"], note=args.get("note"))
            out = show_task(registry, args["task"], settings)
        self.wake_org()
        return Result(out, Exit.OK)

    def op_task_cancel(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        """The task cancelled first (so its job's end no longer moves it), then the job it runs, if still open."""
        from mam.errors import JobError
        from mam.jobs.pause import cancel_job
        from mam.org.manage import cancel, show_task

        with _registry(self.ws) as registry:
            _row, job = cancel(registry, args["task"])
            if job:
                row = registry.find_job(job)
                if row is not None and row.open:
                    try:
                        cancel_job(self.ws, settings, registry, job)
                    except JobError:
                        pass  # it ended meanwhile
            out = show_task(registry, args["task"], settings)
        self.wake_org()
        return Result(out, Exit.OK)

    def op_role_reset(self, args: dict[str, Any], settings: Settings, reply: Reply, env: Mapping[str, str]) -> Result:
        from mam.org.manage import reset_role

        with _registry(self.ws) as registry:
            out = reset_role(registry, args["role"])
        self.wake_org()
        return Result(out, Exit.OK)


def event_body(kind: str, args: dict[str, Any], record: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The body of an agent's event from its request, and the field that may be cut to fit the wire."""
    body: dict[str, Any] = {}
    fit = None
    if kind == "started":
        if args.get("nonce") is None:
            body = {"nonce": str(record.get("nonce", "")), "nonce_from": "record"}
        else:
            body = {"nonce": args["nonce"]}
        if args.get("heartbeat_s") is not None:
            body["heartbeat_ms"] = int(float(args["heartbeat_s"]) * 1000)
    elif kind == "progress":
        if args.get("message") is None:
            raise UsageError("missing option --message")
        body = {"message": args["message"][:MAX_TEXT]}
    elif kind == "completed":
        body = {"message": (args.get("message") or "")[:MAX_TEXT]}
        body.update(disposition_of(args))
        if args.get("tokens") is not None:
            body["tokens"] = args["tokens"]
        if args.get("report") is not None:
            body["report"] = args["report"]
            body["report_path"] = args.get("report_path") or ""
            fit = "report"
    elif kind == "error":
        if args.get("reason") is None:
            raise UsageError("missing option --reason")
        body = {"reason": args["reason"][:MAX_TEXT]}
    return body, fit


def _waits(registry: Registry, job: Job) -> str:
    """What `job` waits for, in words, while it waits for its turn ('' otherwise: nothing is read)."""
    if job.state.value not in UNCLAIMED_STATES:
        return ""
    from mam.jobs.queries import waits_for

    return waits_for(registry, job)


class _registry:
    """A registry for one operation, closed after it."""

    def __init__(self, ws: Workspace) -> None:
        self.registry = Registry(ws)

    def __enter__(self) -> Registry:
        return self.registry

    def __exit__(self, *exc: object) -> None:
        self.registry.close()


def failure_line(op: str, job_id: str) -> str:
    """What a client is told when an operation broke inside the node (its traceback is in the node's log)."""
    job = f" (job {job_id})" if job_id else ""
    return f"the node failed to {op}{job}: see .mam/run/node.log"


def disposition_of(args: dict[str, Any]) -> dict[str, str]:
    """A `completed` event's disposition fields (a task's job, mam/org): `disposition` when given, and with
    `blocked` the task it waits on (`waiting_on`, required with it and only with it)."""
    disposition, waiting_on = args.get("disposition"), args.get("waiting_on")
    if waiting_on is not None and disposition != "blocked":
        raise UsageError("--waiting-on goes with --disposition blocked")
    if disposition == "blocked" and waiting_on is None:
        raise UsageError("--disposition blocked needs --waiting-on TASK (the task it waits on)")
    out = {"disposition": disposition} if disposition is not None else {}
    if waiting_on is not None:
        out["waiting_on"] = waiting_on
    return out
