"""`mam event started|progress|heartbeat|completed|error`: the agent side of a job, on a lean path.

Run from the agent's own shell, once per event, so it imports neither click nor paho nor YAML:
the options are parsed here by hand (the same options, help texts, errors and exit codes as the
other `mam` commands, which click parses), the event is signed with the job's token, committed to
the workspace's store (which allocates its seq under the job's lock) and handed on by
mam.jobs.emit: to the waiting wrapper over its wake socket, else published over MQTT (paho is
imported then), else kept on disk with a warning.
Exit codes: 0 recorded (handed to the wrapper, published, or kept on disk with a warning); 1 the job
already ended, or the event is invalid or cannot fit the wire; 2 a malformed job id or usage; 5 no such job.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mam.errors import MamError
from mam.jobs.outcomes import Exit

MAX_REPORT_BYTES = 64 * 1024  # read no more of a report file than an event could ever carry
PROG = "mam event"

GROUP_HELP = """\
Usage: mam event [OPTIONS] COMMAND [ARGS]...

  Agent side: report on the job in your brief (the brief's footer shows the
  exact commands).

  Exit codes: 0 recorded (handed to the wrapper, published, or kept on disk if
  the broker is down); 1 the job already ended or the input is invalid; 2 a
  malformed job id; 5 unknown job.
  A report too big for one signed event (64 KiB) is cut, with a marker line.

Options:
  -h, --help  Show this message and exit.

Commands:
  completed  Finish the job successfully.
  error      End the job as failed, with a reason.
  heartbeat  Send one heartbeat by hand (`started --heartbeat N` does it...
  progress   Report progress (also counts as a sign of life).
  started    Acknowledge the brief (once), optionally starting an...
"""

_WS = "  -w, --workspace DIR  Workspace folder (same as `mam --workspace`).\n"
_JOB = "  --job TEXT           The job id from your brief.  [required]\n"
_JSON = "  --json               Print what was recorded as JSON.\n"
_HELP = "  -h, --help           Show this message and exit.\n"

HELP = {
    "started": "Usage: mam event started [OPTIONS]\n\n"
    "  Acknowledge the brief (once), optionally starting an automatic heartbeat.\n\n"
    "Options:\n" + _WS + _JOB + "  --nonce TEXT         The nonce from your brief (proves you read this brief).\n"
    "                       Without it, mam takes it from the job record and notes\n"
    "                       that in the event.\n"
    "  --heartbeat FLOAT    Start a heartbeat every N seconds until the job ends or\n"
    "                       you exit.\n" + _JSON + _HELP,
    "progress": "Usage: mam event progress [OPTIONS]\n\n"
    "  Report progress (also counts as a sign of life).\n\n"
    "Options:\n" + _WS + _JOB + "  --message TEXT       What you are doing now.  [required]\n" + _JSON + _HELP,
    "heartbeat": "Usage: mam event heartbeat [OPTIONS]\n\n"
    "  Send one heartbeat by hand (`started --heartbeat N` does it automatically).\n\n"
    "Options:\n" + _WS + _JOB + _JSON + _HELP,
    "completed": "Usage: mam event completed [OPTIONS]\n\n"
    "  Finish the job successfully.\n\n"
    "Options:\n"
    "  -w, --workspace DIR     Workspace folder (same as `mam --workspace`).\n"
    "  --job TEXT              The job id from your brief.  [required]\n"
    "  --message TEXT          One-line result.\n"
    "  --report FILE           A report file to attach (its text travels with the\n"
    "                          event).\n"
    "  --tokens INTEGER RANGE  Tokens the job used, where your CLI keeps no usage\n"
    "                          mam can read (mam prefers the CLI's own records).\n"
    "                          [x>=0]\n"
    "  --json                  Print what was recorded as JSON.\n"
    "  -h, --help              Show this message and exit.\n",
    "error": "Usage: mam event error [OPTIONS]\n\n"
    "  End the job as failed, with a reason.\n\n"
    "Options:\n" + _WS + _JOB + "  --reason TEXT        Why you cannot finish the job.  [required]\n" + _JSON + _HELP,
}

# Each command's options in click's order: name -> (takes a value, required).
OPTIONS: dict[str, dict[str, tuple[bool, bool]]] = {
    "started": {"--workspace": (True, False), "--job": (True, True), "--nonce": (True, False)}
    | {"--heartbeat": (True, False), "--json": (False, False)},
    "progress": {"--workspace": (True, False), "--job": (True, True), "--message": (True, True)}
    | {"--json": (False, False)},
    "heartbeat": {"--workspace": (True, False), "--job": (True, True), "--json": (False, False)},
    "completed": {"--workspace": (True, False), "--job": (True, True), "--message": (True, False)}
    | {"--report": (True, False), "--tokens": (True, False), "--json": (False, False)},
    "error": {"--workspace": (True, False), "--job": (True, True), "--reason": (True, True)}
    | {"--json": (False, False)},
}
WHERE = {
    "broker": "published",
    "wrapper": "handed to the wrapper",
    "runner": "on disk, for the runner to relay",
    "disk": "on disk only",
}


class Usage(Exception):
    """A usage error, reported as click reports one (exit 2)."""

    def __init__(self, message: str, command: str = "") -> None:
        super().__init__(message)
        self.command = command


def main(argv: list[str], *, workspace: str | None = None, env_file: str | None = None) -> int:
    """Run `mam event ARGV...`; `workspace`/`env_file`: `mam --workspace/--env-file` given before `event`."""
    try:
        return _main(argv, workspace, env_file)
    except Usage as e:
        name = f"{PROG} {e.command}".rstrip()
        usage = f"Usage: {name} [OPTIONS]" if e.command else f"Usage: {PROG} [OPTIONS] COMMAND [ARGS]..."
        sys.stderr.write(f"{usage}\nTry '{name} --help' for help.\n\nError: {e}\n")
        return Exit.USAGE
    except MamError as e:
        sys.stderr.write(f"mam: error: {e}\n")
        return e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("mam: interrupted\n")
        return Exit.INTERRUPTED
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return Exit.OK
    except OSError as e:
        from mam.util.fs import describe_os_error

        sys.stderr.write(f"mam: error: {describe_os_error(e)}\n")
        return Exit.FAILED


def _main(argv: list[str], workspace: str | None, env_file: str | None) -> int:
    if not argv:
        sys.stderr.write(GROUP_HELP)
        return Exit.USAGE
    command, rest = argv[0], argv[1:]
    if command in ("-h", "--help"):
        sys.stdout.write(GROUP_HELP)
        return Exit.OK
    if command.startswith("-"):
        raise Usage(f"No such option '{command}'.")
    if command not in OPTIONS:
        raise Usage(f"No such command '{command}'.")
    opts = parse(command, rest)
    if opts.get("--help"):
        sys.stdout.write(HELP[command])
        return Exit.OK
    if "--workspace" in opts:
        workspace = opts["--workspace"]
    from mam.ids import check_job_id

    job_id = check_job_id(opts["--job"])
    return RUN[command](_App(workspace, env_file), job_id, opts)


def parse(command: str, args: list[str]) -> dict[str, Any]:
    """Click's option syntax: `--name VALUE`, `--name=VALUE`, `-w DIR`, `-wDIR`, flags; the last one wins."""
    known = OPTIONS[command]
    found: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            if i < len(args):
                raise Usage(f"Got unexpected extra argument ({args[i]})", command)
            break
        name, value = arg, None
        if arg.startswith("--") and "=" in arg:
            name, value = arg.split("=", 1)
        elif arg.startswith("-w") and not arg.startswith("--"):
            name, value = "--workspace", (arg[2:] or None)
        elif not arg.startswith("-"):
            raise Usage(f"Got unexpected extra argument ({arg})", command)
        if name in ("-h", "--help"):
            return {"--help": True}  # eager, as click's: before any other check
        if name not in known:
            raise Usage(_no_such_option(name, known), command)
        takes_value, _required = known[name]
        if not takes_value:
            if value is not None:
                raise Usage(f"Option '{name}' does not take a value.", command)
            found[name] = True
            continue
        if value is None:
            if i >= len(args):
                raise Usage(f"Option '{name}' requires an argument.", command)
            value = args[i]
            i += 1
        found[name] = value
    for name, (_takes, required) in known.items():
        if required and name not in found:
            raise Usage(f"Missing option '{name}'.", command)
    return found


def _no_such_option(name: str, known: dict[str, tuple[bool, bool]]) -> str:
    import difflib

    close = difflib.get_close_matches(name, [*known, "--help"])
    hint = f" Did you mean '{close[0]}'?" if len(close) == 1 else ""
    if len(close) > 1:
        hint = f" (Possible options: {', '.join(sorted(close))})"
    return f"No such option '{name}'.{hint}"


class _App:
    """The workspace, found once (and checked: mam.workspace refuses one another user could write)."""

    def __init__(self, workspace: str | None, env_file: str | None) -> None:
        self.workspace, self.env_file = workspace, env_file
        self._ws: Any = None

    @property
    def ws(self) -> Any:
        if self._ws is None:
            from mam.workspace import find_workspace

            self._ws = find_workspace(self.workspace)
        return self._ws


def _emit(app: _App, job_id: str, type: str, body: dict[str, Any], as_json: bool, fit_field: str | None = None) -> Any:
    from mam.bus.opener import opener
    from mam.jobs.emit import DatabaseStore, Emitter
    from mam.jobs.record import read_record

    ws = app.ws
    record = read_record(ws, job_id)  # JobNotFound (exit 5) before anything is opened or created
    store = DatabaseStore(ws)
    connect = opener(ws, "agent", env_file=Path(app.env_file) if app.env_file else None, warn=True, reconnect=False)
    emitter = Emitter(ws, store, records={job_id: record}, connect=connect)
    try:
        out = emitter.emit(job_id, type, body, fit_field=fit_field)
    finally:
        emitter.close()
        store.close()
    if out.cut:
        sys.stderr.write(
            f"mam: warning: the {fit_field} was cut to fit the 64 KiB event limit (marked where it was cut; "
            f"the whole text stays in {body.get('report_path', 'its file')})\n"
        )
    if out.warning:
        sys.stderr.write(f"mam: warning: {out.warning}\n")
    if as_json:
        shown = {"job": job_id, "seq": out.envelope.seq, "type": type, "published": out.published, "via": out.via}
        sys.stdout.write(json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(f"{type} recorded for {job_id} (seq {out.envelope.seq}, {WHERE[out.via]})\n")
    return out


def _float(command: str, name: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise Usage(f"Invalid value for '{name}': {value!r} is not a valid float.", command) from None


def started(app: _App, job_id: str, opts: dict[str, Any]) -> int:
    heartbeat = _float("started", "--heartbeat", opts["--heartbeat"]) if "--heartbeat" in opts else None
    nonce = opts.get("--nonce")
    if nonce is None:
        from mam.jobs.record import read_record

        nonce = str(read_record(app.ws, job_id).get("nonce", ""))
        body: dict[str, Any] = {"nonce": nonce, "nonce_from": "record"}
    else:
        body = {"nonce": nonce}
    if heartbeat is not None:
        from mam.settings import positive_seconds

        body["heartbeat_ms"] = int(positive_seconds(heartbeat, "--heartbeat") * 1000)
    _emit(app, job_id, "started", body, bool(opts.get("--json")))
    if heartbeat is not None:
        from mam.jobs.heartbeat import fork

        sys.stdout.flush()  # the forked heartbeater must not write this process's buffered output again
        sys.stderr.flush()
        agent_pid = int(os.environ.get("MAM_AGENT_PID") or os.getppid())
        # Fork rather than start a new interpreter: the heartbeater needs little more than this process holds
        # (its store connection was closed by _emit; it holds no thread and no broker connection).
        fork(app.ws, job_id, heartbeat, agent_pid)
    return Exit.OK


def progress(app: _App, job_id: str, opts: dict[str, Any]) -> int:
    _emit(app, job_id, "progress", {"message": opts["--message"][:4000]}, bool(opts.get("--json")))
    return Exit.OK


def heartbeat(app: _App, job_id: str, opts: dict[str, Any]) -> int:
    _emit(app, job_id, "heartbeat", {}, bool(opts.get("--json")))
    return Exit.OK


def completed(app: _App, job_id: str, opts: dict[str, Any]) -> int:
    body: dict[str, Any] = {"message": opts.get("--message", "")[:4000]}
    if "--tokens" in opts:
        raw = opts["--tokens"]
        try:
            tokens = int(raw)
        except ValueError:
            raise Usage(f"Invalid value for '--tokens': {raw!r} is not a valid integer.", "completed") from None
        if tokens < 0:
            raise Usage(f"Invalid value for '--tokens': {tokens} is not in the range x>=0.", "completed")
        body["tokens"] = tokens
    report = opts.get("--report")
    if report:
        path = Path(report)
        if path.is_dir():
            raise Usage(f"Invalid value for '--report': File {report!r} is a directory.", "completed")
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_REPORT_BYTES)
        except OSError as e:
            raise Usage(f"Invalid value for '--report': cannot read {report}: {e.strerror}", "completed") from e
        # What counts is the size of the signed envelope, not of the file: the emitter cuts the
        # report (with a marker) until the encoded event fits the 64 KiB message limit.
        body["report"] = data.decode("utf-8", "replace")
        body["report_path"] = str(path.resolve())
    _emit(app, job_id, "completed", body, bool(opts.get("--json")), fit_field="report" if report else None)
    return Exit.OK


def error(app: _App, job_id: str, opts: dict[str, Any]) -> int:
    _emit(app, job_id, "error", {"reason": opts["--reason"][:4000]}, bool(opts.get("--json")))
    return Exit.OK


RUN: dict[str, Callable[[_App, str, dict[str, Any]], int]] = {
    "started": started,
    "progress": progress,
    "heartbeat": heartbeat,
    "completed": completed,
    "error": error,
}
