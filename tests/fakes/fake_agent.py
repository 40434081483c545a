"""A fake agent CLI for mam's tests: `claude`, `codex`, `agy`, `hermes`, `grok`, `opencode` or `gemini`.

The executables in tests/fakes/bin/ run `main(<their name>, argv)`. Each fake takes its real
CLI's launch and resume arguments, fails like it on an unknown resume id, writes its
conversation where and how the real CLI does (fake_stores.py), and runs like an agent TUI:
raw terminal, bracketed paste on, one turn recorded per Enter, graceful exit on the same
keystrokes the adapter sends. Deterministic, no model. Standard library only.

Each fake draws its real CLI's input box the way the adapter finds it on the real screen
(tests/agents/screens/ holds captures of the real ones), shows its paste placeholder, and shows
the real CLI's first-run trust dialog where the real one does: claude in a folder not marked
trusted in `${CLAUDE_CONFIG_DIR:-~}/.claude.json` (Enter there means "No, exit"), codex in an
untrusted git checkout (Enter means "Trust and continue" and drops what was pasted meanwhile).
In a trusted folder the fake claude shows, like the real 2.1.332, "Make auto mode your default
permission mode?" when the user's `${CLAUDE_CONFIG_DIR:-~/.claude}/settings.json` chooses a
`permissions.defaultMode` other than auto and its `--settings` file chooses none.
Like the real codex 0.171, the fake codex first draws its composer without the status line under
it (the early frame) and only then the trust question or the full screen, after
MAM_FAKE_CODEX_EARLY_S seconds (default 0.5); keys typed meanwhile go to what comes next.

A submitted text holding a mam job footer and a line `fake-work: SECONDS` is worked on like an
agent would, in the background: the footer's `started` command runs as a tool command, then
SECONDS of work, then its `completed` command. The fake codex runs tool commands in a sandbox
like the real one (0.171): when a command returns, every process it left behind is killed (it
runs in its own pid namespace with its own /proc where `unshare` works, so it cannot see the
agent either; and its process group and any descendant that escaped it are killed: the fake is
their child subreaper), unless it was launched with --dangerously-bypass-approvals-and-sandbox.

`fake-report: never` or `fake-report: on-reminder` in such a text: the agent ends its turn without
running the completed command (with on-reminder it runs it once mam's reminder arrives).

Lifecycle hooks (fake_hooks.py) as the real ones call them: claude runs its `--settings` file's
hooks (SessionStart at launch, UserPromptSubmit per turn, PreToolUse/PostToolUse around each tool
command, PreToolUse before its permission prompt, Stop at each turn's end, SessionEnd on exit),
codex its `-c notify=[...]` program at each turn's end.

Like the real gemini 0.61.0, the fake gemini on `--resume` in a terminal first draws its input box, then,
after MAM_FAKE_GEMINI_REPLAY_S seconds (default 2.0), writes a transcript header of its own,
clears the screen and replays the conversation under "Resuming session..." with no box, appends
`{"$set": {"sessionId": ...}}` to the resumed transcript and draws its box again; whatever was
typed or pasted before that is lost (logged as `dropped`), as the real one loses it.

With MAM_FAKE_AGENT_HANGS_ON_EXIT set, it ignores SIGHUP and SIGTERM and, once it would exit, hangs
(as an agent stuck on its way out): only SIGKILL ends it, and its child (logged as `child`), deaf alike.

With MAM_FAKE_AGENT_LOG set, it appends one JSON line per event: start (argv, cwd, pid),
early (codex's early frame), dialog, ready, sandbox, turn, tool (argv, rc), sandbox_killed (pids), hook
(its name), usage (what the turn's model message recorded), exit, error.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

try:
    from . import fake_hooks, fake_stores
except ImportError:  # run as a script: tests/fakes is on sys.path
    import fake_hooks
    import fake_stores

PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
KEYS = {
    "\r": "enter",
    "\n": "enter",
    "\x7f": "backspace",
    "\x08": "backspace",
    "\x03": "ctrl-c",
    "\x04": "ctrl-d",
    "\x15": "ctrl-u",
    "\x18": "ctrl-x",
}


class Usage(Exception):
    """A command line the real CLI refuses: the message is printed and the fake exits with `code`."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Cli:
    id_flags: tuple[str, ...] = ()  # name a new conversation
    resume_flags: tuple[str, ...] = ()  # resume a conversation by id
    resume_subcommand: str = ""  # `codex resume <id>`
    value_flags: tuple[str, ...] = ()  # other options that take a value (accepted, ignored)
    exit_commands: tuple[str, ...] = ("/exit", "/quit")
    not_found: str = "Error: conversation {id} not found"
    needs_uuid: str = ""  # message when the id given at launch is not a UUID
    in_use: str = ""  # message when the id given at launch already exists
    exit_hint: str = ""
    leader_quit: bool = False  # ctrl+x q quits (opencode's <leader>q)
    not_found_code: int = 1
    unknown_starts_new: bool = False  # hermes: says "Session not found" and starts a new session under that id
    delete_command: tuple[str, ...] = ()  # the CLI's own delete subcommand, before the id
    writes_at_launch: bool = False  # gemini: the transcript exists from launch, and goes at exit if no turn
    flags: tuple[str, ...] = ()  # options without a value the real CLI accepts (accepted, ignored)


@dataclass(frozen=True)
class Box:
    """How the real CLI draws its input box: lines above the input line, its prompt mark, lines below."""

    above: tuple[str, ...] = ()
    mark: str = "> "
    below: tuple[str, ...] = ()
    hint: str = ""  # placeholder text an empty box shows after the mark (gemini's ready marker)


RULE = "\u2500" * 60
BOXES = {
    "claude": Box(above=(RULE,), mark="\u276f\u00a0", below=(RULE, "  ? for shortcuts")),
    "codex": Box(mark="\u203a ", below=("  fake-model default \u00b7 {cwd}", "  ? for shortcuts")),
    "opencode": Box(
        above=("  \u2503",), mark="  \u2503  ", below=("  \u2503  Build \u00b7 fake", "  \u2579" + "\u2580" * 58)
    ),
    "grok": Box(
        above=("  \u256d" + "\u2500" * 58 + "\u256e",),
        mark="  \u2502 \u276f ",
        below=("  \u2570" + "\u2500" * 58 + "\u256f",),
    ),
    "hermes": Box(above=(RULE,), mark="\u276f ", below=(RULE,)),
    "gemini": Box(
        above=(RULE, " Shift+Tab to accept edits"),
        mark=" > ",
        hint="  Type your message or @path/to/file",
        below=(" workspace (/directory)          sandbox", " {cwd}          no sandbox"),
    ),
}
# A turn whose text holds this shows the CLI's permission prompt, as a real model asking for a
# command outside the allow rules would (claude's and codex's, from the captured real screens).
PROMPT_TRIGGER = "fake-ask-permission"
PERMISSION_PROMPTS = {
    "claude": " Bash command\n\n touch /somewhere\n\n Do you want to proceed?\n \u276f No\n   Yes\n\n Esc to cancel "
    "\u00b7 Tab to amend\n",
    "codex": "  Would you like to run the following command?\n  $ touch /somewhere\n\u203a 1. Yes, proceed (y)\n"
    "  3. No, and tell Codex what to do differently (esc)\n  Press enter to confirm or esc to cancel\n",
}
# What codex 0.171 shows before it has checked the folder's trust
# (tests/agents/screens/codex-0.171.0/early-before-trust.txt): a composer, no status line.
EARLY_FRAMES = {
    "codex": "  >_ OpenAI Codex (v0.171.0)\n     {cwd}\n\n\u203a Ask Codex to do anything\n\n  ? for shortcuts",
}
TRUST_DIALOGS = {
    "claude": "Accessing workspace:\n\n {cwd}\n\n Quick safety check: Is this a project you created or one you "
    "trust?\n\n"
    " \u276f No, exit\n   Yes, I trust this folder\n\n Enter to confirm \u00b7 Esc to cancel\n",
    "codex": "  Folder access\n  {cwd}\n  Trust this folder? Codex can read, edit, and run files here.\n"
    "\u203a 1. Trust and continue\n  2. Back to Agent Command Center\n  enter continue \u00b7 esc back\n",
}

# Claude 2.1.332's one-time nudge for a user whose own settings choose a mode other than auto
# (tests/agents/screens/claude-2.1.332/auto-default-nudge.txt).
AUTO_DEFAULT_NUDGE = (
    "  Make auto mode your default permission mode?\n\n  Auto mode lets Claude handle permission prompts "
    "automatically.\n\n  \u276f Yes, set auto mode as my default permission mode\n    No, keep manual mode\n"
)


CLIS = {
    "claude": Cli(
        id_flags=("--session-id",),
        resume_flags=("--resume", "-r"),
        value_flags=("--model", "--permission-mode", "--add-dir", "--settings", "--allowedTools", "--allowed-tools"),
        flags=("--dangerously-skip-permissions",),
        not_found="No conversation found with session ID: {id}",
        needs_uuid="Error: Invalid session ID. Must be a valid UUID.",
        in_use="Error: Session ID {id} is already in use.",
        exit_hint="Resume this session with:\nclaude --resume {id}",
    ),
    "codex": Cli(
        resume_subcommand="resume",
        value_flags=(
            "-m",
            "--model",
            "-c",
            "--config",
            "-a",
            "--ask-for-approval",
            "-s",
            "--sandbox",
            "-C",
            "--cd",
            "--add-dir",
        ),
        flags=("--no-daemon", "--dangerously-bypass-approvals-and-sandbox"),
        not_found="ERROR: No saved session found with ID {id}. Run `codex resume` without an ID to choose from "
        "existing sessions.",
        exit_hint="To continue this session, run codex resume {id}",
    ),
    "agy": Cli(
        resume_flags=("--conversation",),
        value_flags=("--model", "--effort", "--add-dir", "--log-file"),
        flags=("--dangerously-skip-permissions",),
    ),
    "hermes": Cli(
        resume_flags=("--resume", "-r"),
        value_flags=("-m", "--model", "--provider", "-t", "--toolsets", "-s", "--skills", "-p", "--profile"),
        flags=("--yolo",),
        exit_commands=("/quit", "/exit"),
        not_found="Session not found: {id}",
    ),
    "grok": Cli(
        id_flags=("-s", "--session-id"),
        resume_flags=("--resume", "-r"),
        value_flags=("-m", "--model", "--allow", "--allowedTools", "--deny"),
        flags=("--always-approve",),
        exit_commands=("/quit",),
        not_found="Error: session {id} not found",
        needs_uuid="Error: --session-id must be a UUID",
        in_use="Error: session {id} already exists",
    ),
    "opencode": Cli(
        resume_flags=("--session", "-s"),
        value_flags=("-m", "--model", "--agent", "--prompt", "--port", "--hostname"),
        flags=("--auto", "--mdns"),
        exit_commands=("/exit", "/quit", "/q"),
        not_found="Error: Session not found: {id}",
        leader_quit=True,
        delete_command=("session", "delete"),
    ),
    "gemini": Cli(
        id_flags=("--session-id",),
        resume_flags=("--resume", "-r"),
        value_flags=(
            "-m",
            "--model",
            "--approval-mode",
            "--policy",
            "--allowed-tools",
            "-w",
            "--worktree",
            "--include-directories",
        ),
        exit_commands=("/quit", "/exit"),
        not_found='Error resuming session: Invalid session identifier "{id}".',
        not_found_code=42,
        flags=("-y", "--yolo", "--skip-trust", "-d", "--debug", "--screen-reader"),
        exit_hint="To resume this session: gemini --resume {id}",
        writes_at_launch=True,
    ),
}
CLIS["codex"] = dataclasses.replace(CLIS["codex"], delete_command=("delete", "--force"))
CLIS["hermes"] = dataclasses.replace(
    CLIS["hermes"],
    not_found="Session not found: {id}\nUse a session ID from a previous CLI run (hermes sessions list).",
    unknown_starts_new=True,
    delete_command=("sessions", "delete", "--yes"),
)


SANDBOX_OFF = "--dangerously-bypass-approvals-and-sandbox"
WORK = re.compile(r"^fake-work:\s*(?P<seconds>[0-9.]+)\s*$", re.M)
# `fake-report: never` (the footer's completed command is never run) or `on-reminder` (run only once
# mam's reminder asks for it): an agent that ends its turn without reporting.
REPORT = re.compile(r"^fake-report:\s*(?P<mode>never|on-reminder)\s*$", re.M)
REMINDER = "is still open: you have not reported on it"
PR_SET_CHILD_SUBREAPER = 36


class Sandbox:
    """Tool commands as codex runs them: with `reaps`, nothing a command starts outlives it."""

    def __init__(self, reaps: bool) -> None:
        self.reaps = reaps
        self.prefix: list[str] = []
        if reaps:  # orphaned descendants (a setsid double fork) become this process's children
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            # Like codex's own sandbox where the kernel allows it: a pid namespace with its own /proc,
            # so the command sees no process outside it (not the agent) and all it left dies with it.
            user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
            prefix = ["unshare", *user, "--pid", "--fork", "--mount-proc", "--kill-child"]
            try:
                if subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0:
                    self.prefix = prefix
            except (OSError, subprocess.TimeoutExpired):
                pass
            log("sandbox", pid_namespace=bool(self.prefix))

    def run(self, argv: list[str]) -> int:
        proc = subprocess.Popen(
            [*self.prefix, *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        rc = proc.wait()
        log("tool", argv=argv, rc=rc)
        if self.reaps:
            self.kill_leftovers(proc.pid)
        return rc

    def kill_leftovers(self, group: int) -> None:
        killed = []
        try:
            os.killpg(group, signal.SIGKILL)
            killed.append(-group)
        except ProcessLookupError:
            pass
        for pid in children_of(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                killed.append(pid)
            except (ProcessLookupError, ChildProcessError):
                pass
        if killed:
            log("sandbox_killed", pids=killed)


def children_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def footer_command(text: str, kind: str) -> list[str] | None:
    for line in text.splitlines():
        if line.startswith(f"  mam event {kind} "):
            return shlex.split(line)
    return None


def parse(cli: Cli, args: list[str]) -> tuple[str | None, str | None]:
    """(id to give a new conversation, id to resume) from the command line."""
    new_id = resume_id = None
    if cli.resume_subcommand and args[:1] == [cli.resume_subcommand]:
        if len(args) < 2 or args[1].startswith("-"):
            raise Usage("fake: the interactive session picker is not supported; pass an id")
        resume_id, args = args[1], args[2:]
    i = 0
    while i < len(args):
        flag, _, inline = args[i].partition("=")
        takes_value = flag in cli.id_flags + cli.resume_flags + cli.value_flags
        value = inline if inline else (args[i + 1] if takes_value and i + 1 < len(args) else None)
        if takes_value and value is None:
            raise Usage(f"error: option '{flag}' needs a value")
        if flag.startswith("-") and not takes_value and flag not in cli.flags:
            raise Usage(f"error: unknown option '{flag}'")
        i += 1 if inline or not takes_value else 2
        if flag in cli.id_flags:
            new_id = value
        elif flag in cli.resume_flags:
            resume_id = value
    return new_id, resume_id


def log(event: str, **fields: object) -> None:
    path = os.environ.get("MAM_FAKE_AGENT_LOG")
    if not path:
        return
    line = json.dumps({"event": event, "pid": os.getpid(), "time": time.time(), **fields}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())  # one write: concurrent fakes never interleave
    finally:
        os.close(fd)


def out(text: str) -> None:
    os.write(1, text.replace("\n", "\r\n").encode())


class Keys:
    """Splits terminal input into events: ("char", c), ("paste", text) or ("key", name)."""

    def __init__(self) -> None:
        self.buf = ""
        self.paste: str | None = None

    def feed(self, text: str) -> list[tuple[str, str]]:
        self.buf += text
        events: list[tuple[str, str]] = []
        while self.buf:
            if self.paste is not None:
                end = self.buf.find(PASTE_END)
                if end < 0:
                    # Keep back a tail that may be the start of an end marker split across reads.
                    keep = next(
                        (
                            k
                            for k in range(min(len(PASTE_END) - 1, len(self.buf)), 0, -1)
                            if PASTE_END.startswith(self.buf[-k:])
                        ),
                        0,
                    )
                    cut = len(self.buf) - keep
                    self.paste, self.buf = self.paste + self.buf[:cut], self.buf[cut:]
                    break
                events.append(("paste", self.paste + self.buf[:end]))
                self.paste, self.buf = None, self.buf[end + len(PASTE_END) :]
            elif self.buf.startswith(PASTE_START):
                self.paste, self.buf = "", self.buf[len(PASTE_START) :]
            elif self.buf[0] == "\x1b":
                # ESC [ ... final byte (arrows, focus...), or ESC + one character (alt+key), or ESC alone.
                last = (
                    next((i for i in range(2, len(self.buf)) if "@" <= self.buf[i] <= "~"), None)
                    if self.buf[1:2] == "["
                    else 1
                )
                if last is None:
                    break  # an escape sequence still arriving
                events.append(("key", "escape"))
                self.buf = self.buf[last + 1 :]
            else:
                c, self.buf = self.buf[0], self.buf[1:]
                events.append(("key", KEYS[c]) if c in KEYS else ("char", c) if c >= " " else ("key", "other"))
        return events


class Agent:
    """The interactive session: an input line, turns recorded in the store, graceful exits."""

    def __init__(
        self,
        name: str,
        cli: Cli,
        store: fake_stores.Store,
        cid: str | None,
        resumed: bool,
        started: float,
        dialog: str = "",
    ) -> None:
        self.name, self.cli, self.store, self.cid = name, cli, store, cid
        self.created, self.started, self.resumed = resumed, started, resumed
        self.line, self.last_key, self.pastes, self.turns = "", "", 0, 0
        if cli.writes_at_launch and not resumed:
            self.cid = cid or store.new_id(started)
            store.create(self.cid, started)
            self.created = True
        self.box = BOXES.get(name, Box())
        self.sandbox = Sandbox(name == "codex" and SANDBOX_OFF not in sys.argv)
        self.dialog = dialog  # the dialog's text while it is shown
        self.dialog_kind = "trust" if dialog else ""
        # gemini --resume: True until the conversation is replayed (input is lost meanwhile)
        self.replaying = resumed and name == "gemini" and os.isatty(0)  # its UI, in a terminal only
        self.lock = threading.Lock()  # the replay thread and the key loop both draw
        self.hooks = fake_hooks.Hooks(name, sys.argv[1:], os.getcwd())
        self.report_mode = ""
        self._hook_queue: list[tuple[str, dict[str, object], threading.Event | None]] = []
        self._hook_ready = threading.Condition()
        threading.Thread(target=self._hook_worker, daemon=True).start()

    # -- lifecycle hooks, called in order from one thread (the UI never waits on them, except a tool
    # command on its PreToolUse: claude runs that hook before the tool, which it may block) ----------
    def hook(self, event: str, *, wait: bool = False, **fields: object) -> None:
        if self.name != "claude" or not self.hooks.claude:
            return
        self.hooks.session_id = self.cid or ""
        if self.cid and hasattr(self.store, "path"):
            self.hooks.transcript = str(self.store.path(self.cid))
        done = threading.Event() if wait else None
        with self._hook_ready:
            self._hook_queue.append((event, fields, done))
            self._hook_ready.notify()
        if done is not None:
            done.wait(60)

    def _hook_worker(self) -> None:
        while True:
            with self._hook_ready:
                while not self._hook_queue:
                    self._hook_ready.wait()
                event, fields, done = self._hook_queue.pop(0)
            try:
                self.hooks.fire(event, **fields)
            finally:
                if done is not None:
                    done.set()
            log("hook", agent=self.name, hook=event)

    def turn_end(self, text: str, reply: str) -> None:
        """The turn is over: claude's Stop hook; codex records the response's usage (after its tool
        calls ran, as 0.171 does), closes the turn in its rollout and runs its notify program."""
        self.hook("Stop", stop_hook_active=False, last_assistant_message=reply)
        if self.name == "codex" and self.cid and isinstance(self.store, fake_stores.Codex):
            self.store.token_count(self.cid, reply, time.time())
            self.store.task(self.cid, "task_complete", time.time())
            self.hooks.turn_complete(self.cid, text, reply)

    def tool(self, argv: list[str]) -> int:
        """A tool command as the real CLI runs it, with claude's PreToolUse / PostToolUse around it."""
        command = shlex.join(argv)
        self.hook(
            "PreToolUse", wait=True, tool_name="Bash", tool_input={"command": command}, tool_use_id=uuid.uuid4().hex
        )
        rc = self.sandbox.run(argv)
        self.hook("PostToolUse", tool_name="Bash", tool_input={"command": command}, tool_response={"rc": rc})
        return rc

    def draw_box(self) -> None:
        """The input box, cursor left on its input line right after the prompt mark."""
        cwd = os.getcwd()
        for line in self.box.above:
            out(line + "\n")
        out(self.box.mark + self.box.hint + "".join("\n" + line.format(cwd=cwd) for line in self.box.below))
        if self.box.below:
            out(f"\x1b[{len(self.box.below)}A")
        if self.box.below or self.box.hint:
            out(f"\r\x1b[{len(self.box.mark)}C")

    def clear_box(self) -> None:
        """Erase the box (cursor on its input line) so the transcript continues where it was."""
        up = len(self.box.above)
        out((f"\x1b[{up}A" if up else "") + "\r\x1b[J")

    def show_dialog(self) -> None:
        out(self.dialog.format(cwd=os.getcwd()))
        log("dialog", agent=self.name, kind=self.dialog_kind)

    def answer_dialog(self, kind: str, value: str) -> str | None:
        """Keys while the trust dialog shows: claude's Enter/Esc mean "No, exit"; codex's Enter trusts, Esc leaves.
        A permission prompt takes Enter or Esc as "No" and goes back to the input box."""
        if kind == "paste" or kind == "char":
            log("dropped", agent=self.name, input=kind)
            return None  # dropped, as the real ones drop it
        if self.dialog_kind == "prompt":
            if value in ("enter", "escape"):
                log("prompt_answered", agent=self.name, key=value)
                self.dialog, self.dialog_kind = "", ""
                out("\n")
                self.draw_box()
            return None
        if value in ("enter", "escape", "ctrl-c", "ctrl-d"):
            if self.name == "codex" and value == "enter":
                trust_codex(os.getcwd())
                self.dialog = ""
                out("\x1b[2J\x1b[H")
                self.start_screen()
                return None
            return "trust dialog declined"
        return None

    def early_frame(self) -> None:
        """The frame the real CLI draws before it is ready (codex: before its trust check), held a while."""
        frame = EARLY_FRAMES.get(self.name)
        if not frame:
            return
        out(frame.format(cwd=os.getcwd()))
        log("early", agent=self.name)
        time.sleep(
            float(os.environ.get("MAM_FAKE_CODEX_EARLY_S") or 0.5)
        )  # the real one's delay, not a wait for anything
        out("\x1b[2J\x1b[H")

    def start_screen(self) -> None:
        out(f"{self.name} (fake agent) {'resuming ' + (self.cid or '') if self.resumed else 'new conversation'}\n")
        self.draw_box()
        log("ready", agent=self.name, conversation=self.cid)
        self.hook("SessionStart", source="resume" if self.resumed else "startup", model="fake")
        if self.replaying:
            threading.Thread(target=self.replay, daemon=True).start()

    def replay(self) -> None:
        """gemini --resume: the box drawn first loses what it gets; the replay, then the box again."""
        time.sleep(float(os.environ.get("MAM_FAKE_GEMINI_REPLAY_S") or 2.0))  # the real one's delay
        assert self.cid is not None
        with self.lock:
            resumed = self.store.transcript(self.cid)
            self.store.create(self.cid, time.time())  # its own header: a new file, or the same one within a minute
            if self.line:
                log("dropped", agent=self.name, input="box")
            self.line = ""
            out("\x1b[2J\x1b[H\u280b Resuming session...\n")
        time.sleep(0.3)
        with self.lock:
            fake_stores.append_json(resumed, {"$set": {"sessionId": self.cid}})
            self.replaying = False
            out("\x1b[2J\x1b[H")
            self.start_screen()

    def run(self) -> int:
        if os.environ.get("MAM_FAKE_AGENT_HANGS_ON_EXIT"):
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            deaf = "import signal; [signal.signal(s, signal.SIG_IGN) for s in (1, 15)]; signal.pause()"
            tool = subprocess.Popen([sys.executable, "-c", deaf], stdin=subprocess.DEVNULL)  # a tool it runs
            log("child", agent=self.name, child=tool.pid)
        tty_state = None
        if os.isatty(0):
            import termios
            import tty

            tty_state = termios.tcgetattr(0)
            tty.setraw(0)
        decode = codecs.getincrementaldecoder("utf-8")(errors="replace")
        keys = Keys()
        try:
            out("\x1b[?2004h")  # bracketed paste, as agent TUIs enable it
            self.early_frame()
            if self.dialog:
                self.show_dialog()
            else:
                self.start_screen()
            while True:
                try:
                    data = os.read(0, 65536)
                except OSError:  # EIO: the terminal hung up
                    data = b""
                if not data:
                    return self.leave("eof")
                for kind, value in keys.feed(decode.decode(data)):
                    with self.lock:
                        reason = self.handle(kind, value)
                    if reason:
                        return self.leave(reason)
        finally:
            out("\x1b[?2004l")
            if tty_state is not None:
                import termios

                termios.tcsetattr(0, termios.TCSADRAIN, tty_state)

    def handle(self, kind: str, value: str) -> str | None:
        """Apply one input event; the reason to exit, or None to go on."""
        if self.dialog:
            return self.answer_dialog(kind, value)
        if self.replaying and value == "enter":  # gemini before its replay: what it queued is lost
            log("dropped", agent=self.name, input="enter")
            return None
        previous, self.last_key = self.last_key, value if kind == "key" else ""
        if kind == "char" and previous == "ctrl-x" and self.cli.leader_quit and value == "q":
            return "leader q"
        if kind in ("char", "paste") and not self.line and self.box.hint:
            out("\x1b[K")  # the box's placeholder goes as soon as something is typed
        if kind == "char":
            self.line += value
            out(value)
        elif kind == "paste":
            self.line += value
            self.pastes += 1
            out(self.placeholder(value) if len(value) > 800 or "\n" in value else value)
        elif value == "enter":
            text, self.line = self.line, ""
            if text.strip() in self.cli.exit_commands:
                return text.strip()
            self.clear_box()
            if text.strip():
                self.turn(text)
            out("\n")
            if self.dialog:
                out(self.dialog)
                log("dialog", agent=self.name, kind=self.dialog_kind)
            else:
                self.draw_box()
        elif value == "backspace" and self.line:
            self.line = self.line[:-1]
            out("\b \b")
        elif value == "ctrl-u" or (value == "ctrl-c" and self.line):
            self.line = ""
            out("\r\x1b[2K" + self.box.mark)
        elif value == "ctrl-c":
            if previous == "ctrl-c":
                return "ctrl-c twice"
            self.clear_box()
            out("Press Ctrl-C again to exit\n")
            self.draw_box()
        elif value == "ctrl-d" and not self.line:
            return "ctrl-d"
        return None

    def placeholder(self, text: str) -> str:
        """The real CLIs' placeholders (tests/agents/screens/*/brief-unsubmitted.txt)."""
        lines = text.count("\n") + 1
        if self.name == "claude":
            return f"[Pasted text #{self.pastes} +{lines - 1} lines]"
        if self.name == "codex":
            return f"[Pasted Content {len(text)} chars]"
        if self.name == "gemini":
            return f"[Pasted Text: {lines} lines]"
        if self.name == "opencode":
            return f"[Pasted ~{lines} lines]"
        if self.name == "grok":
            return f"[Pasted: {lines} lines]"
        if self.name == "hermes":
            return f"[Pasted text #{self.pastes}: {lines} lines \u2192 ~/.hermes/pastes/paste_{self.pastes}.txt]"
        return f"[{len(text)} chars pasted]"

    def turn(self, text: str) -> None:
        now = time.time()
        if not self.created:  # like the real CLIs, nothing is written before the first turn
            self.cid = self.cid or self.store.new_id(self.started)
            self.store.create(self.cid, self.started)
            self.created = True
        assert self.cid is not None
        self.turns += 1
        self.hook("UserPromptSubmit", prompt=text)
        reply = f"(fake {self.name}) received {len(text)} characters"
        if isinstance(self.store, fake_stores.Codex):
            self.store.task(self.cid, "task_started", now)
        self.store.add_turn(self.cid, "user", text, now)
        self.store.add_turn(self.cid, "assistant", reply, now)
        log("usage", agent=self.name, conversation=self.cid, at_ms=int(now * 1000), usage=fake_stores.fake_usage(reply))
        log("turn", agent=self.name, conversation=self.cid, text=text)
        out(f"{self.box.mark.strip()} {text}\n{reply}")  # like the real ones, the submitted text stays on screen
        work = WORK.search(text)
        mode = REPORT.search(text)
        if mode:
            self.report_mode = mode["mode"]
        if work and footer_command(text, "started"):
            threading.Thread(target=self.work, args=(text, reply, float(work["seconds"])), daemon=True).start()
        elif REMINDER in text and self.report_mode == "on-reminder":
            threading.Thread(target=self.work, args=(text, reply, 0.0, True), daemon=True).start()
        elif PROMPT_TRIGGER in text and self.name in PERMISSION_PROMPTS:
            # like a model asking for a command no rule allows: the tool call, then the CLI's question
            self.hook("PreToolUse", tool_name="Bash", tool_input={"command": "touch /somewhere"})
            self.dialog, self.dialog_kind = PERMISSION_PROMPTS[self.name], "prompt"
        else:
            self.turn_end(text, reply)

    def work(self, text: str, reply: str, seconds: float, reminded: bool = False) -> None:
        """The footer's started command, `seconds` of work, then its completed command (tool commands),
        then the turn's end (unless `fake-report:` says the agent forgets to report)."""
        for kind in ("started", "completed"):
            argv = footer_command(text, kind)
            if kind == "completed" and self.report_mode and not reminded:
                argv = None  # it forgot
            if argv:
                self.tool(argv)
            if kind == "started":
                time.sleep(seconds)  # the agent's work
        self.turn_end(text, reply)

    def leave(self, reason: str) -> int:
        if os.environ.get("MAM_FAKE_AGENT_HANGS_ON_EXIT"):  # deaf to SIGHUP and SIGTERM, it never gets out
            log("hang", agent=self.name, reason=reason)
            while True:
                signal.pause()
        if self.name == "claude" and self.hooks.claude:
            self.hooks.session_id = self.cid or ""
            self.hooks.fire("SessionEnd", reason="prompt_input_exit")  # waited for, as the real one does
        if self.cli.writes_at_launch and not self.turns and not self.resumed and self.cid:
            self.store.discard(self.cid)  # gemini deletes a session with no turn on the way out
            self.created = False
        if self.created and self.cid:
            self.store.finish(self.cid, time.time())
            if self.cli.exit_hint:
                out("\n" + self.cli.exit_hint.format(id=self.cid))
        out("\n")
        log("exit", agent=self.name, conversation=self.cid, reason=reason)
        return 0


def claude_config(env: Mapping[str, str]) -> Path:
    return Path(env.get("CLAUDE_CONFIG_DIR") or env.get("HOME") or os.path.expanduser("~")) / ".claude.json"


def codex_config(env: Mapping[str, str]) -> Path:
    return Path(env.get("CODEX_HOME") or Path(env.get("HOME") or os.path.expanduser("~")) / ".codex") / "config.toml"


def claude_trusts(cwd: str, env: Mapping[str, str]) -> bool:
    try:
        projects = json.loads(claude_config(env).read_text(encoding="utf-8")).get("projects", {})
    except (OSError, ValueError, AttributeError):
        return False
    folder = Path(cwd)
    return any(
        isinstance(projects.get(str(p)), dict) and projects[str(p)].get("hasTrustDialogAccepted") is True
        for p in (folder, *folder.parents)
    )


def codex_trusts(cwd: str, env: Mapping[str, str]) -> bool:
    """An untrusted git checkout is what makes codex ask; other folders it opens without asking."""
    folder = Path(cwd)
    root = next((p for p in (folder, *folder.parents) if (p / ".git").exists()), None)
    if root is None:
        return True
    try:
        text = codex_config(env).read_text(encoding="utf-8")
    except OSError:
        return False
    try:
        import tomllib
    except ImportError:  # Python 3.10: the table mam and codex write, read line by line
        import re

        for p in {folder, root}:
            table = re.search(r"^\[projects\." + re.escape(json.dumps(str(p))) + r"\]\n((?:[^\[].*\n?)*)", text, re.M)
            if table and re.search(r'^\s*trust_level\s*=\s*"trusted"', table.group(1), re.M):
                return True
        return False
    projects = tomllib.loads(text).get("projects", {})
    return any(projects.get(str(p), {}).get("trust_level") == "trusted" for p in {folder, root})


def trust_codex(cwd: str) -> None:
    """What the real codex writes when its trust dialog is accepted."""
    path = codex_config(os.environ)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(f'\n[projects.{json.dumps(cwd)}]\ntrust_level = "trusted"\n')


def claude_default_mode(path: Path) -> str | None:
    try:
        mode = json.loads(path.read_text(encoding="utf-8")).get("permissions", {}).get("defaultMode")
    except (OSError, ValueError, AttributeError):
        return None
    return mode if isinstance(mode, str) else None


def claude_nudges(argv: list[str], env: Mapping[str, str]) -> bool:
    """The real 2.1.332's rule: the user's settings choose a non-auto mode and no --settings file chooses one."""
    root = Path(env.get("CLAUDE_CONFIG_DIR") or Path(env.get("HOME") or os.path.expanduser("~")) / ".claude")
    mode = claude_default_mode(root / "settings.json")
    flag = claude_default_mode(Path(argv[argv.index("--settings") + 1])) if "--settings" in argv[:-1] else None
    return mode not in (None, "auto") and flag is None


def trust_dialog(name: str, cwd: str, env: Mapping[str, str]) -> str:
    if name == "claude" and not claude_trusts(cwd, env):
        return TRUST_DIALOGS["claude"]
    if name == "codex" and not codex_trusts(cwd, env):
        return TRUST_DIALOGS["codex"]
    return ""


def main(name: str, argv: list[str]) -> int:
    if name == "codex" and argv[:1] == ["app-server"]:  # no app-server here: mam starts the TUI without it
        print("fake codex: no app-server", file=sys.stderr)
        return 1
    started = time.time()
    log("start", agent=name, argv=[name, *argv], cwd=os.getcwd())
    cli = CLIS[name]
    if cli.delete_command and argv[: len(cli.delete_command)] == list(cli.delete_command):
        return delete(name, cli, fake_stores.STORES[name](os.environ, os.getcwd()), argv[len(cli.delete_command) :])
    try:
        new_id, resume_id = parse(cli, argv)
        if new_id is not None and cli.needs_uuid:
            try:
                uuid.UUID(new_id)
            except ValueError:
                raise Usage(cli.needs_uuid, 1) from None
    except Usage as e:
        print(e, file=sys.stderr)
        log("error", agent=name, message=str(e))
        return e.code
    store = fake_stores.STORES[name](os.environ, os.getcwd())
    problem = None
    if resume_id is not None and not store.exists(resume_id):
        problem = cli.not_found.format(id=resume_id)
        if cli.unknown_starts_new:  # like hermes 0.19: a warning, then a new session under that id
            out(problem + "\n")
            log("unknown_resume", agent=name, conversation=resume_id, message=problem)
            return Agent(name, cli, store, resume_id, False, started).run()
    elif new_id is not None and store.exists(new_id):
        problem = cli.in_use.format(id=new_id)
    if problem:
        print(problem, file=sys.stderr)
        log("error", agent=name, message=problem)
        return cli.not_found_code if resume_id is not None else 1
    dialog = trust_dialog(name, os.getcwd(), os.environ)
    if not dialog and name == "claude" and claude_nudges(argv, os.environ):
        agent = Agent(name, cli, store, resume_id or new_id, resume_id is not None, started, dialog=AUTO_DEFAULT_NUDGE)
        agent.dialog_kind = "prompt"
        return agent.run()
    return Agent(name, cli, store, resume_id or new_id, resume_id is not None, started, dialog=dialog).run()


def delete(name: str, cli: Cli, store: fake_stores.Store, args: list[str]) -> int:
    """The CLI's own delete command: removes what the real one removes (fake_stores.Store.delete)."""
    if len(args) != 1:
        print(f"usage: {name} {' '.join(cli.delete_command)} <id>", file=sys.stderr)
        return 2
    log("delete", agent=name, conversation=args[0])
    if not store.exists(args[0]):
        print(f"Session not found: {args[0]}", file=sys.stderr)
        return 0 if name == "hermes" else 1  # hermes 0.19 says so and exits 0
    store.delete(args[0])
    print(f"Deleted session {args[0]}")
    return 0
