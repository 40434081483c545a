"""The MCP tools of `mam mcp`, on the official SDK's MCPServer, over stdio or Streamable HTTP.

Every tool runs its blocking library call (service.py) in a worker thread, so one call never
holds up another; waits poll the registry from the event loop and can be cancelled at any point
(a client that goes away cancels only its own request, never the job). A result carries the
fields of the CLI's `--json` as structured content and a one-line text summary; a refusal is an
MCP tool error (isError) with the CLI's message and its `exit_code`. Nothing here ends a job.

The tools are the methods of `Tools`, each entered in the table `TOOLS` by `@tool` with its description and,
when its parameters come from a declaration (`session create`'s CREATE, the delegation's OPTIONS, ROUTINE_ADD,
LOOP), that declaration; `build` registers them in the table's order (the README lists them in that order).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from inspect import Parameter, Signature
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from mam import __version__
from mam.errors import MamError
from mam.jobs.request import OPTIONS
from mam.jobs.result import ended_line
from mam.loop.options import LOOP
from mam.mcp.service import Delegation, Service
from mam.onboarding import onboarding_line
from mam.outcomes import TERMINAL, Exit
from mam.protocol import ROUTINE_ADD
from mam.protocol import Field as OptionField
from mam.sessions.options import AGENTS, CREATE

log = logging.getLogger(__name__)
ENDED = {s.value for s in TERMINAL}
HEARTBEAT_EVERY_S = 5.0  # progress notifications for heartbeats, at most this often
LOOP_START_S = 60.0  # how long loop_start waits for the loop process to log its start


class ToolFailed(Exception):
    """A tool's refusal that is not a MamError (its message and exit code are the CLI's)."""

    def __init__(self, message: str, exit_code: int, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.exit_code, self.data = exit_code, data or {}


def ok(data: dict[str, Any], summary: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=summary)], structured_content=data)


def failed(message: str, exit_code: int, data: dict[str, Any] | None = None, *, text: str = "") -> CallToolResult:
    """A tool error whose text is what the CLI prints on stderr: `mam: error: MESSAGE` (or `text`)."""
    body = {**(data or {}), "error": message, "exit_code": exit_code}
    return CallToolResult(
        content=[TextContent(type="text", text=text or f"mam: error: {message}")],
        structured_content=body,
        is_error=True,
    )


def outcome_result(out: dict[str, Any]) -> CallToolResult:
    """A finished delegation, as `mam job delegate --json` prints it; an error when its exit code is not 0,
    whose text is the line `mam job delegate` prints on stderr for it."""
    if out["exit_code"] != Exit.OK:
        line = ended_line(out)
        return failed(line, int(out["exit_code"]), out, text=line)
    line = f"job {out['id']}: {_state(out)}, exit {out['exit_code']}"
    return ok(out, line + (f": {out['result']}" if out.get("result") else ""))


def _state(job: dict[str, Any]) -> str:
    return str(job["state"]) + (f" ({job['reason']})" if job.get("reason") and job["reason"] != job["state"] else "")


def signature(fn: Callable[..., Any], fields: tuple[OptionField, ...], own: tuple[Parameter, ...] = ()) -> None:
    """Give a tool `fn(**options)` the signature the SDK makes the tool's input schema from: the declared
    fields offered over MCP (`mcp`), each with its help as its description and its `value` as its default
    (required ones first), then the tool's own parameters `own` (`ctx`, job_delegate's `wait`)."""
    given, defaulted, at = [], [], Parameter.POSITIONAL_OR_KEYWORD
    for opt in fields:
        if not opt.mcp:
            continue
        kind: Any = opt.kind
        about = Field(description=opt.help_text)
        if opt.required:
            given.append(Parameter(opt.name, at, annotation=Annotated[kind, about]))
        elif kind is bool:
            defaulted.append(Parameter(opt.name, at, default=bool(opt.value), annotation=Annotated[bool, about]))
        elif opt.value is not None:
            defaulted.append(Parameter(opt.name, at, default=opt.value, annotation=Annotated[kind, about]))
        else:
            defaulted.append(Parameter(opt.name, at, default=None, annotation=Annotated[kind | None, about]))
    firsts = [p for p in own if p.default is Parameter.empty]
    params = [*given, *firsts, *defaulted, *(p for p in own if p.default is not Parameter.empty)]
    fn.__signature__ = Signature(params, return_annotation=CallToolResult)  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in params} | {"return": CallToolResult}


CTX = Parameter("ctx", Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)
WAIT = Parameter(
    "wait",
    Parameter.POSITIONAL_OR_KEYWORD,
    default=False,
    annotation=Annotated[bool, Field(description="Wait for the job's end, as job_wait does.")],
)


@dataclass(frozen=True)
class Tool:
    """One MCP tool: its name (a method of Tools), its description, and its parameters' declaration when they
    come from one (else the method's own signature), with the tool's own parameters after them."""

    name: str
    description: str
    fields: tuple[OptionField, ...] | None = None
    own: tuple[Parameter, ...] = ()


TOOLS: list[Tool] = []  # the table of tools, in the order the server lists them (filled by @tool below)


def tool(
    description: str, *, fields: tuple[OptionField, ...] | None = None, own: tuple[Parameter, ...] = ()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Enter a Tools method in TOOLS."""

    def enter(fn: Callable[..., Any]) -> Callable[..., Any]:
        TOOLS.append(Tool(fn.__name__, description, fields, own))
        return fn

    return enter


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn every failure of a tool into a tool error: a MamError keeps its message and exit code."""

    @functools.wraps(fn)
    async def run(*args: Any, **kwargs: Any) -> CallToolResult:
        try:
            return await fn(*args, **kwargs)  # type: ignore[no-any-return]
        except MamError as e:
            return failed(str(e), e.exit_code)
        except ToolFailed as e:
            return failed(str(e), e.exit_code, e.data)
        except Exception as e:  # never a crashed server: the call fails, the server goes on
            log.exception("tool %s failed", fn.__name__)
            return failed(f"{type(e).__name__}: {e}", Exit.FAILED)

    return run


async def progress(ctx: Context | None, count: int, message: str) -> None:
    if ctx is None:
        return
    try:
        await ctx.report_progress(count, None, message)
    except Exception as e:  # a client gone mid-wait: the wait's own cancellation follows
        log.debug("progress not sent: %s", e)


def build(service: Service, *, poll_s: float) -> MCPServer:
    """The MCPServer with every tool of TOOLS registered."""
    server: MCPServer = MCPServer("mam", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    tools = Tools(service, poll_s)
    for t in TOOLS:
        fn = guarded(getattr(tools, t.name))
        if t.fields is not None:
            signature(fn, t.fields, t.own)
        server.add_tool(fn, name=t.name, description=t.description)
    return server


class Tools:
    """The tools, one method each (TOOLS lists them with their descriptions); `build` registers them."""

    def __init__(self, service: Service, poll_s: float) -> None:
        self.service, self.poll_s = service, poll_s

    async def thread(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    async def until(self, event: threading.Event) -> None:
        """Until `event` is set, waited in a worker thread a second at a time (a cancelled call lets go at once)."""
        while not await anyio.to_thread.run_sync(event.wait, 1.0, abandon_on_cancel=True):
            pass

    async def follow(self, job_id: str, timeout_s: float, ctx: Context | None) -> dict[str, Any]:
        """Poll the job until it ends or `timeout_s` passes; one progress notification per event."""
        watch = await self.thread(self.service.job_watch, id=job_id)
        try:
            return await self._follow(watch, job_id, timeout_s, ctx)
        finally:
            watch.close()

    async def _follow(self, watch: Any, job_id: str, timeout_s: float, ctx: Context | None) -> dict[str, Any]:
        deadline = time.monotonic() + max(0.0, timeout_s)
        count, last_beat = 0, 0.0
        while True:
            view, events = await self.thread(watch.poll)
            for e in events:
                if e["type"] == "heartbeat":
                    if time.monotonic() - last_beat < HEARTBEAT_EVERY_S:
                        continue
                    last_beat = time.monotonic()
                count += 1
                await progress(
                    ctx,
                    count,
                    f"{e['type']}" + (f": {e['message']}" if e["message"] else "") + f" (job {job_id}, {e['state']})",
                )
            if view["state"] in ENDED:
                return {**view, "ended": True}
            if time.monotonic() >= deadline:
                return {**view, "ended": False}
            # Woken by the job's next change; at most poll_s, so a job whose wrapper died is still closed by its rules.
            await self.thread(watch.wait, min(self.poll_s, max(0.0, deadline - time.monotonic())))

    async def finish(self, d: Delegation) -> CallToolResult:
        await self.until(d.done)  # its thread sets it whatever happens, from the command's answer
        if d.error is not None:
            raise d.error
        assert d.outcome is not None
        return outcome_result(d.outcome.as_dict())

    # -- sessions ---------------------------------------------------------------------------------
    @tool(
        f"Start AGENT ({AGENTS}) in a new pane as session NAME "
        "(`mam session create`; permissions ask|report|full, default report; board: also allow `mam board`; "
        "no_trust: fail on a trust dialog; "
        "worktree: its own git worktree .mam/worktrees/NAME/ on branch (default mam/NAME) from base (default HEAD)). "
        f"With onboard: wait for the onboarding job (exit_code {Exit.ONBOARD_FAILED} failed, "
        f"{Exit.ONBOARD_LATE} not ended in time).",
        fields=CREATE,
    )
    async def session_create(self, **options: Any) -> CallToolResult:
        data, code = await self.thread(self.service.session_create, **options)
        line = (
            f"session {data['name']}: {data['agent']} ({data['role']}) {data['status']} "
            f"in {data['backend']}:{data['server']} pane {data['pane_id']}"
        )
        if code:
            said = onboarding_line(data.get("onboarding") or {})
            return failed(f"{line}; {said}", code, data, text=f"{said}\n{line}")
        return ok(data, line)

    @tool(
        "Exit a session's agent gracefully, keeping its conversation (`mam session stop`). "
        "purge_conversation also deletes the conversation's files (this argument is the confirmation)."
    )
    async def session_stop(self, name: str, purge_conversation: bool = False) -> CallToolResult:
        data = await self.thread(self.service.session_stop, name=name, purge_conversation=purge_conversation)
        return ok(data, f"session {data['name']}: {data['status']}, conversation {data['conversation_id'] or '-'}")

    @tool(
        "Remove a stopped or terminated session so its name is free (`mam session remove`); its jobs are "
        "kept. A running one is refused (exit_code 5) unless force, which stops it first. Its worktree goes only when "
        "clean (force: anyway); a branch with unmerged commits is always kept. purge_conversation is the confirmation."
    )
    async def session_remove(self, name: str, force: bool = False, purge_conversation: bool = False) -> CallToolResult:
        data = await self.thread(
            self.service.session_remove, name=name, force=force, purge_conversation=purge_conversation
        )
        said = data["worktree"]["message"] if data["worktree"] else ""
        return ok(data, f"session {data['name']}: removed" + (f"; {said}" if said else ""))

    @tool("Relaunch a stopped session's conversation (`mam session resume`).")
    async def session_resume(self, name: str) -> CallToolResult:
        data = await self.thread(self.service.session_resume, name=name)
        return ok(
            data, f"session {data['name']}: resumed conversation {data['conversation_id']} in pane {data['pane_id']}"
        )

    @tool(
        "Start session NAME from a copy of session SOURCE's conversation (`mam session fork`): same "
        "agent, cwd, permissions and backend, role given or SOURCE's, a new conversation id; SOURCE is left as it "
        f"is. claude, codex and demo only (others: exit_code {Exit.USAGE}); no session SOURCE: "
        f"exit_code {Exit.NOT_FOUND}. by: who asks, for the audit log (default user@host)."
    )
    async def session_fork(
        self, source: str, name: str, role: str | None = None, by: str | None = None
    ) -> CallToolResult:
        data = await self.thread(self.service.session_fork, source=source, name=name, role=role, by=by)
        return ok(
            data,
            f"session {data['name']}: forked from {data['forked_from']}, {data['agent']} ({data['role']}) in pane "
            f"{data['pane_id']}, conversation {data['conversation_id'] or '-'}",
        )

    @tool("The rows of `mam session status --json` (all sessions, or one by name). Starts nothing.")
    async def session_status(self, name: str | None = None) -> CallToolResult:
        rows = await self.thread(self.service.session_status, name=name)
        summary = (
            ", ".join(
                f"{r['name']} {r['status']} {r.get('activity', 'unknown')}" + (f" ({r['drift']})" if r["drift"] else "")
                for r in rows
            )
            or "no sessions"
        )
        return ok({"sessions": rows}, summary)

    # -- jobs -----------------------------------------------------------------------------------
    @tool(
        "Delegate a brief to a session (`mam job delegate`): returns {id, state, ...} as soon as the brief "
        f"is in the pane, or the job's outcome if it ended first "
        f"(busy or missing session: exit_code {Exit.NOT_DELIVERED}; refused by a spent token budget: exit_code "
        f"{Exit.BUDGET}). wait: true waits for the end, like job_wait. Times in seconds; max_tokens and "
        "estimate_tokens as --max-tokens and --estimate-tokens (see budget_status). "
        "idempotency_key (or dedup: true, the key from sha256 of target session and brief): if a job with that key "
        "exists (MAM_IDEMPOTENCY_TTL_S), nothing is made or injected; the call attaches to it (attached: true).",
        fields=OPTIONS,
        own=(CTX, WAIT),
    )
    async def job_delegate(self, ctx: Context, wait: bool = False, **request: Any) -> CallToolResult:
        # Handed to the node as `mam job delegate --json`: with --detach it answers once the brief is delivered.
        d = await self.thread(self.service.start_delegation, detach=not wait, **request)
        if wait:
            await self.until(d.registered)  # set once its job is known, or the command ended (whatever happens)
            if not d.done.is_set():
                await self.follow(d.job_id, float("inf"), ctx)  # progress notifications, one per event
            return await self.finish(d)
        await self.until(d.delivered)  # set once the brief is in the pane, or the job ended (whatever happens)
        if d.done.is_set():
            return await self.finish(d)
        view = {**await self.thread(self.service.job_status, id=d.job_id), "attached": bool(d.attached_to)}
        return ok(view, f"job {view['id']}: {view['state']} on {view['session']}")

    @tool(
        "Wait until the job ends or timeout_s passes (then its current state, ended: false; not an error). "
        "Sends a progress notification per event (heartbeats at most every 5 s) when given a progress token."
    )
    async def job_wait(self, id: str, ctx: Context, timeout_s: float = 600.0) -> CallToolResult:
        view = await self.follow(id, timeout_s, ctx)
        return ok(
            view,
            f"job {id}: {_state(view)}"
            + (f", exit {view['exit_code']}" if view["ended"] else f", still open after {timeout_s:g}s"),
        )

    @tool("One job's record and its sub-jobs (`mam job status --json`).")
    async def job_status(self, id: str) -> CallToolResult:
        view = await self.thread(self.service.job_status, id=id)
        return ok(view, f"job {id}: {_state(view)} on {view['session']}")

    @tool("Recent jobs, newest first (`mam job list --json`).")
    async def job_list(self, state: str | None = None, session: str | None = None, limit: int = 50) -> CallToolResult:
        rows = await self.thread(self.service.job_list, state=state, session=session, limit=limit)
        return ok({"jobs": rows}, f"{len(rows)} job(s)")

    @tool("A job's audit log lines (`mam job log --json`), the last `limit` of them.")
    async def job_log(self, id: str, limit: int | None = None) -> CallToolResult:
        lines = await self.thread(self.service.job_log, id=id, limit=limit)
        return ok({"id": id, "lines": lines}, f"job {id}: {len(lines)} audit line(s)")

    @tool(
        "Cancel an open job (`mam job cancel`): its agent's turn is interrupted with the CLI's interrupt keys "
        "(never an exit; no_interrupt: the agent finishes its turn), then the job ends cancelled; exit_code "
        f"{Exit.FAILED} if it already ended, {Exit.NOT_FOUND} if unknown."
    )
    async def job_cancel(self, id: str, no_interrupt: bool = False) -> CallToolResult:
        view = await self.thread(self.service.job_cancel, id=id, no_interrupt=no_interrupt)
        return ok(view, f"job {id}: {view['state']}")

    @tool(
        "Pause an open job (`mam job pause`): mode safe (the agent finishes its turn), quick (its turn "
        "interrupted now) or hard (then its agent stopped, the conversation kept); nothing is typed and no deadline "
        f"runs until job_resume. Pauses only escalate: a lower mode is exit_code {Exit.USAGE}; exit_code "
        f"{Exit.REFUSED} if it ended or is unknown."
    )
    async def job_pause(self, id: str, mode: str = "safe", by: str | None = None) -> CallToolResult:
        view = await self.thread(self.service.job_pause, id=id, mode=mode, by=by)
        return ok(view, f"job {id}: paused ({(view.get('paused') or {}).get('mode', mode)})")

    @tool(
        "Resume a paused job (`mam job resume`): one short resume brief is typed (its agent relaunched "
        f"first after a hard pause); exit_code {Exit.REFUSED} if it is not paused or its agent cannot be reached."
    )
    async def job_resume(self, id: str, by: str | None = None) -> CallToolResult:
        view = await self.thread(self.service.job_resume, id=id, by=by)
        return ok(view, f"job {id}: resumed ({view['state']})")

    @tool(
        "The kill switch (`mam pause --all`): every open job paused in `mode`, and nothing typed anywhere "
        "in the workspace (new delegations wait queued_for hold, routines and loops wait) until resume_all."
    )
    async def pause_all(self, mode: str = "safe", by: str | None = None) -> CallToolResult:
        out = await self.thread(self.service.pause_all, mode=mode, by=by)
        return ok(out, f"workspace held; {len(out['paused'])} job(s) paused")

    @tool("Release the workspace's hold and resume every paused job (`mam resume --all`).")
    async def resume_all(self, by: str | None = None) -> CallToolResult:
        out = await self.thread(self.service.resume_all, by=by)
        return ok(out, f"{'hold released' if out['released'] else 'no hold'}; {len(out['resumed'])} job(s) resumed")

    @tool(
        "Type text into a running job's agent input box, a follow-up while it works (`mam job send`): "
        "pasted once with Enter, only while the box is empty and no dialog shows, and recorded in the job's audit "
        f"log (`sent`: by, bytes, sha256). A bad id or text (checked like a brief) or a remote job: exit_code "
        f"{Exit.USAGE}; unknown, not running, the agent gone, the box not empty or a dialog: exit_code "
        f"{Exit.REFUSED}; nothing typed. by: who asks, for the audit log (default user@host)."
    )
    async def job_send(self, id: str, text: str, by: str | None = None) -> CallToolResult:
        data = await self.thread(self.service.job_send, id=id, text=text, by=by)
        return ok(data, f"job {id}: sent {data['bytes']} bytes to pane {data['pane']}")

    @tool(
        "Accepted events, oldest first: of one job (after since_seq), of a session's recent jobs, or of "
        "the "
        "workspace's; for clients without progress notifications."
    )
    async def events_recent(
        self, job: str | None = None, session: str | None = None, since_seq: int = 0, limit: int = 100
    ) -> CallToolResult:
        events = await self.thread(
            self.service.events_recent, job=job, session=session, since_seq=since_seq, limit=limit
        )
        return ok({"events": events}, f"{len(events)} event(s)")

    @tool(
        "The running-job caps and token budgets (`mam budget --json`): each cap with limit, committed, "
        "reserved, used and remaining; per session and per role; running and queued counts; tokens saved by dedup. "
        "A job a budget refuses or stops ends with exit_code 6."
    )
    async def budget_status(
        self,
    ) -> CallToolResult:
        view = await self.thread(self.service.budget_status)
        return ok(view, f"{view['running']} running, {view['queued']} queued")

    @tool(
        "Delegate the same brief to every target at once (`mam job fanout --json`; targets 'A,B,C'), "
        "each its own job under the caps and budgets, and aggregate: all (every job completed), first (the "
        "first completed; the others cancelled), vote (each completed result's last non-empty line; a "
        "majority of the targets wins; a tie or no majority is named). Returns every job's id, state, result "
        "and vote. exit_code 0 when decided, 1 otherwise."
    )
    async def job_fanout(self, targets: str, brief: str, aggregate: str = "all") -> CallToolResult:
        out = await self.thread(self.service.job_fanout, targets=targets, brief=brief, aggregate=aggregate)
        line = f"fanout {aggregate}: {out['outcome']}" + (f" ({out['winner']})" if out["winner"] else "")
        return ok(out, line) if out["decided"] else failed(line, int(out["exit_code"]), out)

    # -- the board ------------------------------------------------------------------------------
    @tool("Read a board key (`mam board get KEY --json`): {key, value, version, writer, ts}.")
    async def board_read(self, key: str) -> CallToolResult:
        entry = await self.thread(self.service.board_read, key=key)
        return ok(entry, f"{entry['key']} v{entry['version']}")

    @tool(
        "Write a board key (`mam board set`; delete: true is `mam board delete`). if_version makes it a "
        "compare-and-set: a stale version writes nothing (exit_code 5). Published retained and signed to watchers."
    )
    async def board_write(
        self, key: str, value: str = "", if_version: int | None = None, delete: bool = False
    ) -> CallToolResult:
        out = await self.thread(
            self.service.board_write, key=key, value=None if delete else value, if_version=if_version
        )
        return ok(out, f"{out['key']}: {'deleted' if out['deleted'] else 'set'}, version {out['version']}")

    @tool("List the board's keys (`mam board list --json`), optionally under a prefix.")
    async def board_list(self, prefix: str = "") -> CallToolResult:
        entries = await self.thread(self.service.board_list, prefix=prefix)
        return ok({"keys": entries}, f"{len(entries)} keys")

    # -- routines -------------------------------------------------------------------------------
    @tool(
        "Add a routine (`mam routine add NAME --json`): the node delegates brief to target on each tick. "
        "Triggers: every ('30s', '10m', '2h', '1d'), cron (five fields) with tz (default UTC), on_webhook (returns a "
        "loopback url and its secret, shown once). concurrency when its last job is open: skip (default), coalesce, "
        "queue; catch_up for ticks missed while no node ran: skip (default), once, all:N. Starts the node.",
        fields=ROUTINE_ADD,
    )
    async def routine_add(self, **options: Any) -> CallToolResult:
        out = await self.thread(self.service.routine_add, **options)
        return ok(out, f"routine {out['name']}: {out['schedule']}, next tick {out['next_tick'] or '-'}")

    @tool("List the routines (`mam routine list --json`): schedule, state, next tick, last receipt.")
    async def routine_list(
        self,
    ) -> CallToolResult:
        rows = await self.thread(self.service.routine_list)
        return ok({"routines": rows}, f"{len(rows)} routines")

    @tool(
        "A routine's receipts, newest first (`mam routine log NAME --json`): each tick's scheduled and "
        "fired time, job and outcome, or why it was skipped (active, paused, hold, budget, missed)."
    )
    async def routine_log(self, name: str, limit: int = 20) -> CallToolResult:
        rows = await self.thread(self.service.routine_log, name=name, limit=limit)
        return ok({"receipts": rows}, f"{len(rows)} receipts")

    @tool(
        "Fire one tick of a routine now (`mam routine run NAME --json`), decided by the node as any tick: "
        "returns its receipt (its job id, or why it was skipped). exit_code 1: no node decided it within wait_s."
    )
    async def routine_run(self, name: str, wait_s: float = 30.0) -> CallToolResult:
        out = await self.thread(self.service.routine_run, name=name, wait_s=wait_s)
        what = f"job {out['job']}" if out.get("job") else f"{out['status']} ({out['reason']})"
        return ok(out, f"routine {name}: {what}")

    # -- the org's tasks ------------------------------------------------------------------------
    @tool(
        "Add a task for a role (`mam task add TITLE --role ROLE --json`): the node starts it as a job "
        "on the role's session once nothing holds it (blocked_by: task ids that must be done first; parent: the "
        "task it is part of; idempotency_key: a key a task has already answers with that task). Returns the task "
        "(its id in `id`). Starts the node."
    )
    async def task_add(
        self,
        title: str,
        role: str,
        brief: str | None = None,
        blocked_by: list[str] | None = None,
        parent: str | None = None,
        idempotency_key: str | None = None,
    ) -> CallToolResult:
        out = await self.thread(
            self.service.task_add,
            title=title,
            role=role,
            brief=brief,
            blocked_by=blocked_by,
            parent=parent,
            idempotency_key=idempotency_key,
        )
        return ok(out, f"task {out['id']}: {out['state']}")

    @tool(
        "List the tasks as a tree by parent (`mam task list --json`): each with its state (todo, "
        "running, blocked, in_review, done, failed, cancelled), queued_for (what holds a todo one: blockers, busy, "
        "daily_cap, breaker, hold), job, depth."
    )
    async def task_list(
        self,
    ) -> CallToolResult:
        rows = await self.thread(self.service.task_list)
        return ok({"tasks": rows}, f"{len(rows)} tasks")

    @tool(
        "One task (`mam task show ID --json`): state, blocked_by, parent, job and jobs, queued_for, "
        "wait (what a blocked one waits on) and its wakes with their reasons."
    )
    async def task_show(self, task: str) -> CallToolResult:
        out = await self.thread(self.service.task_show, task=task)
        return ok(out, f"task {out['id']}: {out['state']}")

    @tool(
        "Mark a task done (`mam task done ID`): from in_review, or by hand; the tasks it blocks may run. "
        "exit_code 5: no such task, or it is running or cancelled."
    )
    async def task_done(self, task: str) -> CallToolResult:
        out = await self.thread(self.service.task_done, task=task)
        return ok(out, f"task {out['id']}: {out['state']}")

    # -- loops ----------------------------------------------------------------------------------
    @tool(
        "Start a review loop (the options of run_loop.sh / `mam loop`; reviewer is 'A,B') as a detached "
        "`mam loop` process; returns its id at once. Follow it with loop_status. approve: when every reviewer "
        "passes, the loop waits in state needs_approval for loop_approve / loop_reject.",
        fields=LOOP,
    )
    async def loop_start(self, **options: Any) -> CallToolResult:
        proc, loop_id, errors = await self.thread(self.service.loop_start, options=options)
        try:
            deadline = time.monotonic() + LOOP_START_S
            while True:
                started = await self.thread(_logged_start, folder=self.service.ws.state / "loops" / loop_id)
                if started:
                    return ok(
                        {
                            "id": loop_id,
                            "state": "running",
                            "pid": proc.pid,
                            "folder": str(self.service.ws.state / "loops" / loop_id),
                        },
                        f"loop {loop_id}: started (pid {proc.pid})",
                    )
                code = proc.poll()
                if code is not None:
                    raise ToolFailed(_refusal(errors) or f"mam loop exited {code} before it started", code)
                if time.monotonic() >= deadline:
                    raise ToolFailed(
                        f"mam loop (pid {proc.pid}) did not start within {LOOP_START_S:g}s", 1, {"id": loop_id}
                    )
                await anyio.sleep(self.poll_s)
        finally:
            errors.unlink(missing_ok=True)

    @tool(
        "A loop's rounds, each reviewer's verdict, the outcome (running, needs_approval, approved, passed, "
        "not_passed, failed), the approval gate (reviewed identity, decision) and report paths."
    )
    async def loop_status(self, id: str) -> CallToolResult:
        data = await self.thread(self.service.loop_status, id=id)
        return ok(
            data,
            f"loop {id}: {data['state']} after {data['rounds']} round(s)"
            + (f": {data['reason']}" if data["reason"] else ""),
        )

    @tool(
        "Approve a loop waiting in needs_approval (`mam loop approve`): merge its reviewed head into the "
        "base branch (merge: ff, merge or squash) only if the branch still holds the reviewed tree; otherwise "
        "exit_code 5 naming what changed, and the loop reviews again."
    )
    async def loop_approve(self, id: str, merge: str = "ff") -> CallToolResult:
        gate = await self.thread(self.service.loop_approve, id=id, merge=merge)
        return ok(gate, f"loop {id}: approved by {gate['decision']['by']}; {gate['decision']['message']}")

    @tool(
        "Reject a loop waiting in needs_approval (`mam loop reject`): the creator gets the note in a fix "
        "brief and another round runs."
    )
    async def loop_reject(self, id: str, note: str) -> CallToolResult:
        gate = await self.thread(self.service.loop_reject, id=id, note=note)
        return ok(gate, f"loop {id}: rejected by {gate['decision']['by']}")


def _logged_start(folder: Path) -> bool:
    try:
        with open(folder / "loop.jsonl", encoding="utf-8") as f:
            return any('"event": "start"' in line for line in f)
    except FileNotFoundError:
        return False


def _refusal(path: Path) -> str:
    """The one-line message a `mam loop` that refused to start printed."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    errors = [line.removeprefix("mam: error: ") for line in lines if line.startswith("mam: error: ")]
    return errors[-1] if errors else (lines[-1].strip() if lines else "")


INSTRUCTIONS = (
    "mam runs long-lived coding agents in panes and hands them jobs. session_status to look (starts nothing); "
    "job_delegate returns once the brief is delivered; job_wait follows it (progress notifications per event); "
    "a job is decided only by the agent's signed events or a deadline. Errors carry the CLI's exit_code."
)
