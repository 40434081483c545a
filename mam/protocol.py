"""The node protocol: every operation the node serves, with its fields, declared once.

A client (the `mam` command line, the MCP server, a loop, the demo) sends the node one request frame
`{"v": VERSION, "op": NAME, "args": {...}, "settings": {...}}` and reads frames back until a final one
(docs/node-protocol.md has each operation's fields, answers, progress frames and errors, with an example).
`args` holds the operation's fields, each named, typed and checked here (`check_args`) by both ends:
the client, so a bad value is its usage error (exit 2, one line naming the option), and the node,
which trusts nothing. `settings` holds the caller's own `MAM_*`/`MQTT_*` settings variables (the
environment wins over `.mam.env`, a workspace cap can only be lowered): the one part of the caller's
environment a request carries, explicitly. Nothing else of the caller's process (its environment,
folder, streams) reaches the node: a brief or report file is read by the client and travels as text.

The delegate operation's fields are `DELEGATE` (the request's one declaration: `mam job delegate`'s
options, the MCP tool `job_delegate`'s parameters and mam.jobs.delegate's checks all come from it).

Lean on purpose: the thin client (mam.node.client, mam.node.front) imports this module at the start of
every `mam event` and `mam job delegate`, so it imports nothing (not even `typing`, `re`, `enum` or
`dataclasses`); the exit codes of its errors are looked up in mam.outcomes only when one is raised.
"""

from __future__ import annotations

import math

VERSION = 1
TYPE_CHECKING = False  # not `typing`'s: importing it costs the thin client ~5 ms of its start
if TYPE_CHECKING:
    from typing import Any


class Field:
    """One field of an operation.

    `name`: the field (and the MCP parameter). `kind`: str, bool, int (a count), float (seconds) or
    list (of strings). `flag`: its CLI spelling ("": none). `mcp`: offered by the MCP tool (delegate).
    `default`: the text that says where an unset value's default comes from; `setting`: the settings key it
    names. `least`: an int's smallest value; a float's is 0 with `least=0`, else it must be a positive number
    of seconds (at least a millisecond). `request`: a field of mam.jobs.delegate.DelegateRequest (else an
    input the node turns into one: `dedup`). `id`: the value names a job, session or other thing: it must
    be an id (mam.ids). `choices`: the values allowed. `value`: the value a front end passes for it unset
    (the CLI's default, the MCP parameter's), None: unset. `metavar`: the CLI's name for its value."""

    __slots__ = (
        "name",
        "kind",
        "help",
        "flag",
        "mcp",
        "default",
        "setting",
        "least",
        "required",
        "request",
        "id",
        "choices",
        "value",
        "metavar",
    )

    def __init__(
        self,
        name: str,
        kind: type,
        help: str,
        *,
        flag: str = "",
        mcp: bool = True,
        default: str = "",
        setting: str = "",
        least: int | None = None,
        required: bool = False,
        request: bool = True,
        id: str = "",
        choices: tuple[str, ...] = (),
        value: Any = None,
        metavar: str = "",
    ) -> None:
        self.name, self.kind, self.help, self.flag, self.mcp = name, kind, help, flag, mcp
        self.default, self.setting, self.least, self.required = default, setting, least, required
        self.request, self.id, self.choices, self.value, self.metavar = request, id, choices, value, metavar

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.kind.__name__})"

    @property
    def help_text(self) -> str:
        """The help as the CLI and the MCP tool show it: the text, and where its default comes from."""
        return f"{self.help} (default {self.default})." if self.default else f"{self.help}."

    @property
    def said(self) -> str:
        """How an error names it: its CLI flag, else its name."""
        return self.flag or self.name


DELEGATE: tuple[Field, ...] = (
    Field("target", str, "tmux:NAME, herdr:NAME, remote:RUNNER/NAME, or NAME", flag="--target", required=True),
    # The CLI spells it --brief or --brief-file (read by the client); needed unless job_id names a job.
    Field("brief", str, "The brief text", flag="--brief", required=True),
    Field(
        "timeout_s",
        float,
        "Wall-clock budget in seconds",
        flag="--timeout",
        default="MAM_JOB_TIMEOUT_S",
        setting="MAM_JOB_TIMEOUT_S",
    ),
    Field(
        "start_deadline_s",
        float,
        "Seconds to wait for `started`",
        flag="--start-deadline",
        default="MAM_START_DEADLINE_S",
        setting="MAM_START_DEADLINE_S",
    ),
    Field(
        "heartbeat_s",
        float,
        "Heartbeat interval N the agent is asked for",
        flag="--heartbeat",
        default="MAM_HEARTBEAT_S",
        setting="MAM_HEARTBEAT_S",
    ),
    Field(
        "parent_job",
        str,
        "Link this job as a sub-job of that job (a job of this workspace)",
        flag="--parent-job",
        id="parent job id",
    ),
    Field(
        "job_id",
        str,
        "Use this job id; if that job exists and is open, take it over and follow it (a brief already typed is "
        "never typed again; one not typed yet needs the same --brief, and the job's own target)",
        flag="--job-id",
        id="job id",
    ),
    Field(
        "idempotency_key",
        str,
        "If a job with this key exists (MAM_IDEMPOTENCY_TTL_S), attach to it: wait for it, exit with its code. "
        "Only for the same target and brief: else exit 2 naming the key's job",
        flag="--idempotency-key",
    ),
    Field("dedup", bool, "Use sha256(target session, brief) as the idempotency key", flag="--dedup", request=False),
    Field(
        "dispatch_wait_s",
        float,
        "Seconds to wait for the session's earlier jobs and, queued, for a cap",
        flag="--dispatch-wait",
        default="MAM_DISPATCH_WAIT_S",
        setting="MAM_DISPATCH_WAIT_S",
        least=0,
    ),
    Field(
        "max_tokens",
        int,
        "Stop the job (exit 6) once its measured token usage passes N; also caps its reservation",
        flag="--max-tokens",
        least=1,
    ),
    Field(
        "estimate_tokens",
        int,
        "Tokens to reserve against the budgets",
        flag="--estimate-tokens",
        default="the median of the role's last 20 completed jobs, else MAM_DEFAULT_ESTIMATE_TOKENS",
        setting="MAM_DEFAULT_ESTIMATE_TOKENS",
        least=0,
    ),
    # Not offered over MCP: a tool call may not lower the transport's security for a remote dispatch.
    Field(
        "allow_insecure_broker",
        bool,
        "Allow remote: dispatch on a broker with neither TLS nor authentication",
        flag="--allow-insecure-broker",
        mcp=False,
    ),
    # What the job is for, in its record: a loop's jobs (mam.loop.jobs) are delegated with theirs.
    Field(
        "kind",
        str,
        "What the job is for, recorded with it (a loop's jobs: loop-plan, loop-create, loop-review, loop-fix...)",
        flag="--kind",
        mcp=False,
        default="job",
        id="kind",
    ),
    # The MCP tool always returns once the brief is delivered (its `wait` follows the job to its end).
    Field(
        "detach",
        bool,
        "Return once the brief is delivered: print the job id (exit 0); follow it with `mam job wait ID`",
        flag="--detach",
        mcp=False,
    ),
)

# `mam routine add`'s options (the CLI's, the MCP tool routine_add's), as the node's operation takes them.
ROUTINE_ADD: tuple[Field, ...] = (
    Field("name", str, "The routine's name", required=True),
    Field("target", str, "tmux:NAME, herdr:NAME, remote:RUNNER/NAME, or NAME", flag="--target", required=True),
    Field("brief", str, "The brief text", flag="--brief", required=True),
    Field("every", str, "Fire every DURATION: 30s, 10m, 2h, 1d", flag="--every", metavar="DURATION"),
    Field("cron", str, "Fire on a five-field cron expression", flag="--cron", metavar="EXPR"),
    Field("tz", str, "The --cron expression's time zone (IANA name)", flag="--tz", value="UTC", default="UTC"),
    Field(
        "concurrency",
        str,
        "When its last job is open at a tick: skip, coalesce or queue",
        flag="--concurrency",
        value="skip",
        default="skip",
    ),
    Field(
        "catch_up",
        str,
        "For ticks missed while no node ran: skip, once or all:N",
        flag="--catch-up",
        value="skip",
        default="skip",
    ),
    Field("max_tokens", int, "Each job: stop it (exit 6) past N measured tokens", flag="--max-tokens", least=1),
    Field("timeout_s", float, "Each job's wall-clock budget in seconds", flag="--timeout"),
    Field("on_webhook", bool, "Also fire on a signed POST to a loopback URL (printed)", flag="--on-webhook"),
)
_PROGRESS = Field("progress", bool, "Send progress frames (each transition of the job) while it runs", mcp=False)
_JOB = Field("job", str, "The job id", required=True, id="job id")
_BY = Field("by", str, "Who asks, for the audit log (default: user@host)", flag="--by")
_MODE = Field(
    "mode", str, "How to pause: safe, quick or hard", flag="--mode", default="safe", choices=("safe", "quick", "hard")
)
EVENT_TYPES = ("started", "progress", "heartbeat", "completed", "error")
DISPOSITIONS = ("done", "blocked", "review")  # a task's, as its job completes (mam/org)
_TASK = Field("task", str, "The task id", required=True, id="task id")
_ROLE = Field("role", str, "The role's name", required=True, id="role name")

# Each operation's fields. The node answers each with one final frame (see the module's doc).
OPS: dict[str, tuple[Field, ...]] = {
    "delegate": (*DELEGATE, _PROGRESS),
    "wait": (
        _JOB,
        Field("timeout_s", float, "Give up after S seconds (exit 124); the job stays open", flag="--timeout", least=0),
        _PROGRESS,
    ),
    "event": (
        _JOB,
        Field("type", str, "The event", required=True, choices=EVENT_TYPES),
        Field("nonce", str, "The nonce from the brief", flag="--nonce"),
        Field("heartbeat_s", float, "Beat every N seconds until the job ends", flag="--heartbeat"),
        Field("message", str, "What the agent says", flag="--message"),
        Field("reason", str, "Why the agent cannot finish the job", flag="--reason"),
        Field("report", str, "A report's text (the client reads the file)"),
        Field("report_path", str, "Where the report was read from (an absolute path)"),
        Field("tokens", int, "Tokens the job used, by the agent's own count", flag="--tokens", least=0),
        Field("agent_pid", int, "The agent's process (the heartbeat stops with it)", least=1),
        Field(
            "disposition",
            str,
            "How the task of a task's job stands: done, blocked (with --waiting-on) or review",
            flag="--disposition",
            default="done",
            choices=DISPOSITIONS,
        ),
        Field("waiting_on", str, "With --disposition blocked: the task it waits on", flag="--waiting-on", id="task id"),
    ),
    "cancel": (
        _JOB,
        Field(
            "no_interrupt",
            bool,
            "Do not interrupt the agent's turn: the job only ends, the agent finishes what it is doing",
            flag="--no-interrupt",
        ),
    ),
    "pause": (_JOB, _MODE, _BY),
    "resume": (_JOB, _BY),
    "hold": (_MODE, _BY),
    "release": (_BY,),
    "send": (_JOB, Field("text", str, "The text to type", flag="--text", required=True), _BY),
    "fanout": (
        Field("targets", list, "The targets", flag="--targets", required=True),
        Field("brief", str, "The brief text", flag="--brief", required=True),
        Field(
            "aggregate",
            str,
            "How to decide",
            flag="--aggregate",
            default="all",
            choices=("all", "first", "vote"),
        ),
        Field("timeout_s", float, "Each job's wall-clock budget in seconds", flag="--timeout"),
        Field("start_deadline_s", float, "Each job's seconds to wait for `started`", flag="--start-deadline"),
        Field("job_ids", list, "The jobs' ids, one per target (the client's: a node that dies runs them again)"),
    ),
    "routine_add": ROUTINE_ADD,
    "routine_resume": (Field("name", str, "The routine's name", required=True),),
    "routine_run": (
        Field("name", str, "The routine's name", required=True),
        Field("wait_s", float, "Seconds to wait for the node's decision", flag="--wait", least=0),
    ),
    "task_add": (
        Field("title", str, "The task's title (one line)", required=True),
        Field("role", str, "The role that does it", flag="--role", required=True, id="role name"),
        Field("brief", str, "What to do (default: the title)", flag="--brief"),
        Field("blocked_by", list, "Tasks that must be done before it runs", flag="--blocked-by"),
        Field("parent", str, "The task it is part of", flag="--parent", id="task id"),
        Field(
            "idempotency_key",
            str,
            "If a task with this key exists, answer with it (the same title, role, brief and blockers only)",
            flag="--idempotency-key",
        ),
    ),
    "task_done": (_TASK,),
    "task_reopen": (_TASK, Field("note", str, "A note for its next run", flag="--note")),
    "task_cancel": (_TASK,),
    "role_reset": (_ROLE,),
    "status": (),
    "stop": (),
    "fleet": (),
    "web": (
        Field("host", str, "The address to listen on", flag="--host", required=True),
        Field("port", int, "The port", flag="--port", required=True, least=0),
        Field("token", str, "The login token", required=True),
        Field("token_source", str, "Where the token came from", required=True),
        Field("tls_cert", str, "A TLS certificate file", flag="--tls-cert"),
        Field("tls_key", str, "Its key file", flag="--tls-key"),
    ),
    "web_stop": (),
    "web_logout": (),
}
# Operations a running node answers at once, whatever it is doing (no job, no settings of the caller's).
CONTROL = frozenset({"status", "stop", "fleet", "web", "web_stop", "web_logout"})
# Operations that make the node start when none runs (routines are fired, and tasks woken, by a node).
STARTS_NODE = frozenset(
    {
        "delegate",
        "wait",
        "fanout",
        "routine_add",
        "routine_resume",
        "routine_run",
        "task_add",
        "task_done",
        "task_reopen",
        "role_reset",
    }
)


class Invalid(Exception):
    """A request (or one of its fields) that is not what its operation declares: a usage error (exit 2)."""

    @property
    def exit_code(self) -> int:
        from mam.outcomes import Exit

        return int(Exit.USAGE)


def request(op: str, args: dict[str, Any], settings: dict[str, str] | None = None) -> dict[str, Any]:
    """The request frame for `op` with `args` (checked: Invalid names the first wrong field)."""
    return {"v": VERSION, "op": op, "args": check_args(op, args), "settings": dict(settings or {})}


def check_request(frame: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, str]]:
    """(op, args, settings) of a request frame; Invalid for anything not declared here."""
    if frame.get("v") != VERSION:
        raise Invalid(f"protocol version {frame.get('v')!r}: this node speaks version {VERSION}")
    op = frame.get("op")
    if not isinstance(op, str) or op not in OPS:
        raise Invalid(f"unknown operation {op!r}")
    args, settings = frame.get("args", {}), frame.get("settings", {})
    if not isinstance(args, dict):
        raise Invalid("args: an object")
    if not isinstance(settings, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and k.startswith(SETTING_PREFIXES) for k, v in settings.items()
    ):
        raise Invalid("settings: an object of MAM_* / MQTT_* strings")
    return op, check_args(op, args), settings


SETTING_PREFIXES = ("MAM_", "MQTT_", "AGENT_PYTHON_BIN")


def settings_of(environ: Any) -> dict[str, str]:
    """The settings variables of an environment (what a request's `settings` carries)."""
    return {k: v for k, v in environ.items() if k.startswith(SETTING_PREFIXES)}


def check_args(op: str, args: dict[str, Any]) -> dict[str, Any]:
    """`args` with every declared field checked (None: unset); Invalid for an unknown or wrong one."""
    fields = OPS[op]
    known = {f.name for f in fields}
    for name in args:
        if name not in known:
            raise Invalid(f"{op}: unknown field {name!r}")
    out: dict[str, Any] = {}
    for f in fields:
        value = args.get(f.name)
        if value is None or (f.kind is bool and value is False):
            if f.required and not (op == "delegate" and f.name == "brief" and args.get("job_id")):
                raise Invalid(f"missing option {f.said}" if f.flag else f"{op}: missing field {f.name!r}")
            if value is not None:
                out[f.name] = value
            continue
        out[f.name] = check_value(f, value)
    return out


def check_value(f: Field, value: Any) -> Any:
    """`value` if it is what `f` declares; Invalid naming the option otherwise."""
    if f.kind is bool:
        if not isinstance(value, bool):
            raise Invalid(f"{f.said} is a flag (true or false), not {value!r}")
        return value
    if f.kind is str:
        if not isinstance(value, str):
            raise Invalid(f"{f.said} must be text, not {type(value).__name__}")
        if f.choices and value not in f.choices:
            raise Invalid(f"{f.said} must be one of {', '.join(f.choices)} (got {value[:40]!r})")
        if f.id:
            check_id_text(value, f.id, limit=64 if f.id.endswith("name") else 128)
        return value
    if f.kind is int:
        if isinstance(value, bool) or not isinstance(value, int) or value < (f.least or 0):
            unit = " of tokens" if "token" in f.name else ""
            raise Invalid(f"{f.said} must be a whole number{unit}, {f.least or 0} or more")
        return value
    if f.kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Invalid(f"{f.said} must be a number of seconds (got {value!r})")
        value = float(value)
        if f.least is not None:
            if not (math.isfinite(value) and value >= f.least):
                raise Invalid(f"{f.said} must be a finite number of seconds, {f.least} or more (got {value})")
        elif not math.isfinite(value) or value <= 0:
            raise Invalid(f"{f.said} must be a positive, finite number of seconds (got {value})")
        elif int(value * 1000) == 0:
            raise Invalid(f"{f.said} {value} rounds to 0 ms; give at least 0.001 seconds")
        return value
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise Invalid(f"{f.said} must be a list of text")
    return value


_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_REST = _FIRST | frozenset("._-")


def check_id_text(value: str, what: str, *, limit: int = 128) -> str:
    """An id as mam.ids checks it (1-`limit` of [A-Za-z0-9._-], a letter or digit first), without its imports."""
    if value and len(value) <= limit and value[0] in _FIRST and _REST.issuperset(value):
        return value
    shown = value[:80] + "..." if len(value) > 80 else value
    raise Invalid(
        f"invalid {what} {shown!r}: use 1-{limit} letters, digits, '.', '_' or '-', starting with a letter or digit"
    )
