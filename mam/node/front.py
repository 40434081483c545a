"""The command line of the operations every job pays for: `mam event TYPE`, `mam job delegate`, `mam job wait`.

Run by the `mam` script (`run`) before (and instead of) click: each parses its options from their one
declaration (mam.protocol), reads what the caller names (a brief or report file, relative to its folder;
stdin), sends the node one typed request (mam.node.client) and prints the answer as the command's
documented output, with its exit code. No node serves it (MAM_NODE=0, none runs for an event, none could
start): the same request runs in this process (mam.node.local). `--help` and `--version` are click's (the
command line package declares the same commands, for their help). A usage error is one line, `mam: error:
...`, exit 2.

Lean, with mam.node.client (see there): JSON is written by mam.node.wire, and what strips an agent's text of
escape sequences (mam.util.text) is imported only for text that holds one.
"""

from __future__ import annotations

import os
import sys

from mam.node import client
from mam.node.wire import pretty
from mam.protocol import DELEGATE, EVENT_TYPES, OPS, Field, Invalid, check_id_text, request, settings_of
from mam.util.once import first

TYPE_CHECKING = False  # not `typing`'s: importing it costs ~5 ms of every event's start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAX_REPORT_BYTES = 64 * 1024  # read no more of a report file than an event could ever carry
WHERE = {
    "broker": "published",
    "wrapper": "handed to the wrapper",
    "runner": "on disk, for the runner to relay",
    "disk": "on disk only",
}
_EVENT = {f.name: f for f in OPS["event"]}
# Each event's own options (besides --job, --json and --workspace), as flag -> field.
EVENT_OPTIONS = {
    "started": ("nonce", "heartbeat_s"),
    "progress": ("message",),
    "heartbeat": (),
    "completed": ("message", "report", "tokens", "disposition", "waiting_on"),
    "error": ("reason",),
}
GLOBAL_WITH_VALUE = ("--workspace", "-w", "--env-file")


class Usage(Exception):
    """A usage error of the command line (exit 2, one line)."""


def command(argv: list[str]) -> tuple[str, list[str], str | None] | None:
    """('event', rest, workspace) / ('delegate' | 'wait', rest, workspace) for a command served here, after
    global options only; None for anything else (click's: help, version, every other command)."""
    i, ws = 0, None
    while i < len(argv) and argv[i].startswith("-"):
        arg = argv[i]
        if arg in GLOBAL_WITH_VALUE and i + 1 < len(argv):
            if arg == "--env-file":
                return None  # settings from another file: click's, in this process
            ws = argv[i + 1]
            i += 2
        elif arg.startswith("--workspace="):
            ws = arg.split("=", 1)[1]
            i += 1
        else:
            return None
    rest = argv[i:]
    if "--help" in rest or "-h" in rest:
        return None
    if rest[:1] == ["event"] and rest[1:2] and rest[1] in EVENT_TYPES:
        return "event", rest[1:], ws
    if rest[:1] == ["job"] and rest[1:2] in (["delegate"], ["wait"]):
        return rest[1], rest[2:], ws
    return None


def run(argv: list[str], otherwise: Callable[[list[str]], object]) -> None:
    """The `mam` command (mam/bin/mam, `python -m mam`): these commands here, any other `otherwise` (click's).

    Served here, the process holds nothing to clean up, so it skips the interpreter's teardown (about 2 ms of
    CPU, paid by every agent event) once what it printed is out."""
    code = main(argv)
    if code is None:
        otherwise(argv)
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        code = code or 1
    os._exit(code)


def main(argv: list[str]) -> int | None:
    """Run `mam <argv>` if it is one of these commands: its exit code; None: click's."""
    which = command(argv)
    if which is None:
        return None
    kind, rest, ws = which
    try:
        if kind == "event":
            return _event(rest, ws)
        if kind == "delegate":
            return _delegate(rest, ws)
        return _wait(rest, ws)
    except (Usage, Invalid) as e:
        from mam.outcomes import Exit

        _err(f"mam: error: {e}")
        return int(Exit.USAGE)
    except KeyboardInterrupt:
        from mam.outcomes import Exit

        if _Shown.current is not None:
            _Shown.current.stop()  # the live line cleared before the line that says so
        _err("mam: interrupted")
        return int(Exit.INTERRUPTED)


# -- parsing ------------------------------------------------------------------------------------


def parse(
    rest: list[str], options: dict[str, Field], flags: tuple[str, ...], positional: int = 0
) -> tuple[dict[str, Any], dict[str, Any], list[str], str | None]:
    """(fields by name, own flags by name, positional arguments, --workspace) of `rest`: `options` maps a CLI
    spelling to its field (a bool field is a flag), `flags` are the command's own (valued: `--x=`)."""
    values: dict[str, Any] = {}
    own: dict[str, Any] = {}
    args: list[str] = []
    ws = None
    i = 0
    while i < len(rest):
        arg = rest[i]
        i += 1
        if arg == "--":
            args.extend(rest[i:])
            break
        if not arg.startswith("-") or arg == "-":
            args.append(arg)
            continue
        name, eq, given = arg.partition("=")
        f = options.get(name)
        valued = f is not None and f.kind is not bool or name in ("--workspace", "-w") or f"{name}=" in flags
        if f is None and name not in flags and f"{name}=" not in flags and name not in ("--workspace", "-w"):
            raise Usage(f"no such option: {name}")
        if valued:
            if not eq:
                if i >= len(rest):
                    raise Usage(f"option {name} requires an argument")
                given = rest[i]
                i += 1
        elif eq:
            raise Usage(f"option {name} does not take a value")
        if name in ("--workspace", "-w"):
            ws = given
        elif f is None:
            own[name.lstrip("-")] = given if valued else True
        else:
            values[f.name] = _typed(f, name, given) if valued else True
    if len(args) != positional:
        extra = args[positional:] if len(args) > positional else []
        raise Usage(f"unexpected argument {extra[0]!r}" if extra else "missing argument")
    return values, own, args, ws


def _typed(f: Field, name: str, text: str) -> Any:
    if f.kind is int:
        try:
            return int(text.strip())
        except ValueError:
            raise Usage(f"{name}: {text!r} is not a whole number") from None
    if f.kind is float:
        try:
            return float(text.strip())
        except ValueError:
            raise Usage(f"{name}: {text!r} is not a number") from None
    return text


def _read(path: str, what: str, limit: int = -1) -> str:
    """A file the caller names (its folder's; '-': stdin) as text; Usage if it cannot be read."""
    if path == "-":
        return sys.stdin.read()
    if os.path.isdir(path):
        raise Usage(f"{what} {path!r} is a directory")
    try:
        with open(path, "rb") as f:
            data = f.read(limit)
    except OSError as e:
        raise Usage(f"cannot read {what} {path}: {e.strerror}") from None
    try:
        return data.decode("utf-8") if limit < 0 else data.decode("utf-8", "replace")
    except UnicodeDecodeError as e:
        raise Usage(f"cannot read {what} {path}: {e}") from None


# -- running --------------------------------------------------------------------------------------


def _run(op: str, args: dict[str, Any], ws: str | None, on_frame: Any, on_gone: Any) -> dict[str, Any]:
    """The final frame of `op`: from the workspace's node, else run here."""
    req = request(op, args, settings_of(os.environ))  # Invalid names the option: a usage error here
    if client.flag(os.environ, "MAM_NODE", True):
        root = client.workspace(ws)
        if root is not None:
            try:
                final = client.exchange(root, req, on_frame, signals=True)
            except client.Gone as gone:
                left: dict[str, Any] = on_gone(gone)
                return left
            if final is not None:
                return final
    from mam.node import local

    return local.run(ws, op, req["args"], req["settings"], on_frame)


def _err(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _said(final: dict[str, Any]) -> int:
    """Print a final frame that is not an answer (an error, a job left open) and return its exit code."""
    if "left" in final:
        _err(str(final["left"]))
    elif "error" in final or "lost" in final:
        _err(f"mam: error: {final.get('error') or final.get('lost')}")
    return int(final["exit"])


def still_running(job_id: str) -> str:
    """The line an interrupted client prints on stderr (runnable as printed)."""
    return f"job {job_id} is still running; follow it with: mam job wait {job_id}"


# -- mam event ------------------------------------------------------------------------------------


def _event(rest: list[str], ws: str | None) -> int:
    kind, rest = rest[0], rest[1:]
    names = ("job", *EVENT_OPTIONS[kind])
    options = {(_EVENT[n].flag or "--" + n): _EVENT[n] for n in names if n != "report"}
    options["--job"] = _EVENT["job"]
    values, own, _args, ws2 = parse(rest, options, ("--json", "--report="))
    ws = ws2 or ws
    values["type"] = kind
    if "job" not in values:
        raise Usage("missing option --job")
    check_id_text(values["job"], "job id")
    for needed in ("message", "reason"):
        if kind == ("progress" if needed == "message" else "error") and needed not in values:
            raise Usage(f"missing option --{needed}")
    if "report" in own:
        path = str(own["report"])
        values["report"] = _read(path, "--report", MAX_REPORT_BYTES)
        values["report_path"] = os.path.realpath(path)
    if kind == "started" and "heartbeat_s" in values:
        # The agent's process: the heartbeat stops with it (the agent's shell, or the agent, ran this).
        values["agent_pid"] = int(os.environ.get("MAM_AGENT_PID") or os.getppid())
    warnings: list[str] = []
    final = _run("event", values, ws, lambda m: warnings.append(str(m["warning"])) if "warning" in m else None, _gone)
    for w in warnings:
        if first(w):
            _err(f"mam: warning: {w}")
    if "answer" not in final:
        return _said(final)
    out = final["answer"]
    if out.get("cut"):
        _err(
            "mam: warning: the report was cut to fit the 64 KiB event limit (marked where it was cut; "
            f"the whole text stays in {out.get('report_path') or 'its file'})"
        )
    if out.get("warning"):
        _err(f"mam: warning: {out['warning']}")
    if own.get("json"):
        _json(
            {
                "job": out["job"],
                "seq": out["seq"],
                "type": out["type"],
                "published": out["published"],
                "via": out["via"],
            }
        )
    else:
        _out(f"{out['type']} recorded for {out['job']} (seq {out['seq']}, {WHERE[out['via']]})")
    return int(final["exit"])


def _gone(gone: client.Gone) -> dict[str, Any]:
    return {"error": "interrupted", "exit": 128 + gone.signum}


# -- mam job delegate / wait ----------------------------------------------------------------------


class _Shown:
    """What `mam job delegate` and `mam job wait` print while the job runs: its id first (stderr), then a
    live line on a terminal (or every transition with --follow; nothing with --quiet). Every other line it
    prints clears the live line first (`say`)."""

    current: _Shown | None = None  # the one this command shows: an interrupt clears its line before it says so

    def __init__(self, follow: bool | None, *, announce: bool) -> None:
        self.follow = follow
        self.announce = announce
        self.live: Any = None
        if follow is None and sys.stderr.isatty():
            from mam.node.live import LiveLine

            self.live = LiveLine()
        _Shown.current = self

    @property
    def progress(self) -> bool:
        return bool(self.follow) or self.live is not None

    def frame(self, msg: dict[str, Any]) -> None:
        if "warning" in msg:
            if first(str(msg["warning"])):
                self.say(f"mam: warning: {msg['warning']}")
        elif "progress" in msg:
            body = msg["progress"]
            if self.live is not None:
                self.live.update(body)
            elif self.follow:
                job = body["job"]
                reason = f" {job['reason']}" if job.get("reason") else ""
                extra = f": {body['message']}" if body.get("message") else ""
                self.say(_clean(f"[{job['id']}] {job['state']}{reason} ({body['input'] or 'look'}){extra}"))
        elif msg.get("attached"):
            self.say(f"attached to job {msg['job']} (same idempotency key){': waiting' if msg.get('open') else ''}")
        elif "job" in msg and self.announce:
            self.say(str(msg["job"]))  # first, one line: whatever happens next, the job can be found

    def say(self, text: str) -> None:
        if self.live is not None:
            self.live.print(text)  # the live line cleared before it, drawn again after
        else:
            _err(text)

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()


_CONTROL = frozenset(chr(c) for c in (*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)))


def _clean(text: str) -> str:
    """`text` as mam.util.text.for_terminal leaves it (no escape sequence or control character but newline and
    tab); text with none is as it is, without importing `re` for it."""
    if _CONTROL.isdisjoint(text):
        return text
    from mam.util.text import for_terminal

    return for_terminal(text)


def _json(obj: Any) -> None:
    _out(pretty(obj))  # mam.util.text.json_text(obj, indent=2), without importing `json`


def _ended(final: dict[str, Any], as_json: bool, shown: _Shown) -> int:
    """Print a delegation's (or a wait's) end as `mam job delegate` documents it; its exit code."""
    shown.stop()
    if "answer" not in final:
        return _said(final)
    out = final["answer"]
    if set(out) == {"id", "state"}:  # detached (or a wait that gave up): the job runs on
        if as_json:
            _json(out)
        elif final["exit"] == 0:
            _out(str(out["id"]))
        if final["exit"] != 0:
            _err(still_running(str(out["id"])))
        return int(final["exit"])
    if as_json:
        _json(out)
    elif not final["exit"]:  # a job's answer exits 0 only when it completed (mam.outcomes STATE_EXIT)
        _out(_clean(out.get("result") or "(completed)"))
        if out.get("report"):
            _out(_clean(out["report"]))
    else:
        detail = f": {out['detail']}" if out.get("detail") else ""
        _err(_clean(f"job {out['id']}: {out['state']} ({out.get('reason') or '-'}){detail}"))
    return int(final["exit"])


def _left_open(shown: _Shown, job_ids: list[str]) -> Any:
    def gone(g: client.Gone) -> dict[str, Any]:
        shown.stop()
        for job in g.jobs or job_ids:
            _err(still_running(job))
        return {"exit": 128 + g.signum, "answered": True}

    return gone


def delegate_args(rest: list[str]) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """`mam job delegate`'s command line as the `delegate` operation's fields, the command's own flags
    (`brief-file`, `follow`, `quiet`, `json`) and its --workspace."""
    options = {f.flag: f for f in DELEGATE if f.flag}
    values, own, _args, ws = parse(rest, options, ("--brief-file=", "--follow", "--quiet", "--json"))
    return values, own, ws


def _delegate(rest: list[str], ws: str | None) -> int:
    values, own, ws2 = delegate_args(rest)
    ws = ws2 or ws
    if "brief" in values and "brief-file" in own:
        raise Usage("give exactly one of --brief or --brief-file")
    if "brief-file" in own:
        values["brief"] = _read(str(own["brief-file"]), "the brief file")
    if "target" not in values:
        raise Usage("missing option --target")
    if "brief" not in values and "job_id" not in values:
        raise Usage("give exactly one of --brief or --brief-file")
    # A job id of the client's own: if the node dies, the same request in the next node takes its job over.
    values.setdefault("job_id", "job-" + os.urandom(8).hex())
    follow = True if own.get("follow") else False if own.get("quiet") else None
    shown = _Shown(follow, announce=True)
    if shown.progress:
        values["progress"] = True
    final = _run("delegate", values, ws, shown.frame, _left_open(shown, [values["job_id"]]))
    if final.get("answered"):
        return int(final["exit"])
    return _ended(final, bool(own.get("json")), shown)


def _wait(rest: list[str], ws: str | None) -> int:
    options = {f.flag: f for f in OPS["wait"] if f.flag}
    values, own, args, ws2 = parse(rest, options, ("--json",), positional=1)
    ws = ws2 or ws
    values["job"] = args[0]
    shown = _Shown(None, announce=False)
    if shown.progress:
        values["progress"] = True
    final = _run("wait", values, ws, shown.frame, _left_open(shown, [args[0]]))
    if final.get("answered"):
        return int(final["exit"])
    return _ended(final, bool(own.get("json")), shown)
