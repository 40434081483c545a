"""The AgentAdapter base: what mam must know about an agent CLI, declared in a small subclass.

An adapter knows how to launch the CLI, how its conversation id is known (given at launch,
or discovered afterwards from its on-disk store, matched by cwd and start time), how to
resume it, how to leave it gracefully, and where its conversation files are. It never
starts panes itself: sessions do that with the argv the adapter returns.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from mam.agents import convo
from mam.agents.channel import Outcome
from mam.errors import AgentError, AgentNotInstalled

# A keystroke step: ("text", "/exit") types literal text; ("key", "Enter") presses a named key;
# ("pause", "0.3") waits that many seconds, for a CLI that reads keys close together as one chord.
KeyStep = tuple[str, str]

# --permissions: `ask` passes nothing; `report` lets the agent run `mam event ...` without a prompt
# and nothing more; `full` passes the CLI's own skip-every-approval flag.
PERMISSION_MODES = ("ask", "report", "full")
DEFAULT_PERMISSIONS = "report"
# What `report` allows: the command prefix of every footer line.
REPORT_COMMAND = "mam event"
# What `mam session create --board` adds to that allow rule.
BOARD_COMMAND = "mam board"


@dataclass(frozen=True)
class LaunchContext:
    """What an adapter may use to build a session's own launch options (never the user's config)."""

    session: str
    cwd: str
    state_dir: Path  # <workspace>/.mam/sessions/<name>/: per-session files (settings, config) go here
    env: Mapping[str, str] = field(default_factory=dict)  # the pane's environment
    permissions: str = DEFAULT_PERMISSIONS
    mam_dir: Path | None = None  # the workspace's .mam/, which `mam event` writes to
    trust: bool = True  # False: --no-trust (no trust_args, no trust_folder)
    board: bool = False  # --board: `mam board ...` is allowed beside `mam event ...`

    @property
    def allowed_commands(self) -> tuple[str, ...]:
        """The command prefixes `report` lets the agent run without a prompt."""
        return (REPORT_COMMAND, BOARD_COMMAND) if self.board else (REPORT_COMMAND,)


@dataclass(frozen=True)
class SessionOptions:
    """Options for one launch: argv appended after the CLI's own launch/resume arguments, env added to the pane's,
    and `wrap`: argv put before the CLI's (a mam helper that starts something first, then execs the CLI)."""

    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    wrap: tuple[str, ...] = ()


@dataclass(frozen=True)
class Dialog:
    """Something on screen that waits for a person's answer: a trust question or a permission prompt."""

    kind: str  # "trust" or "prompt"
    marker: str  # the text that gave it away
    title: str = ""  # its first line (under the rule or frame above it), else the marker's line

    @property
    def named(self) -> str:
        """How a person recognises it: its title, or the marker."""
        return self.title or self.marker.strip()


@dataclass(frozen=True)
class PermissionPrompt:
    """A permission prompt laid out exactly as the captured dialog of that CLI and version: the tool
    call it asks about (named as the CLI's hooks name it), its options top to bottom, the selected one."""

    tool: str  # e.g. "Bash(touch x)"
    options: tuple[str, ...]
    selected: int
    allow: int  # the option that lets this one call run (never "don't ask again")
    deny: int  # the option that refuses it


@dataclass(frozen=True)
class Noted:
    """One step of the agent's turn as its CLI recorded it in its own store (read by mam.hooks.store_watch
    for a CLI that calls no hook of mam's): when, what state it puts the agent in, and from which record."""

    at: float  # seconds since the epoch, the CLI's own time of the record
    state: str  # working / waiting / idle
    source: str  # the record's name (grok's `turn_ended`; opencode's, hermes' named by mam: `assistant-final`...)
    tool: str = ""
    message: str = ""
    turn_end: bool = False  # the agent's turn is over
    tool_open: bool = False  # a tool call started and has not finished: a permission prompt may hold it up
    # A turn end: when the turn began (the CLI's record of the user message it answers; 0.0 unknown). A turn
    # begun before a job's brief was handed over is an earlier one's, whenever it ends (mam.hooks.store_watch).
    begun: float = 0.0


_RULE = re.compile(r"^\s*[╭┌]?[─━═]{8,}")
_FRAME = "│┃╭╮╰╯┌┐└┘ \t"


def dialog_title(lines: Sequence[str], marker: str) -> str:
    """The first line of the dialog holding `marker`: the first text under the last rule or frame top
    above the marker's line (the marker's own line when there is none), frame characters taken off
    and runs of spaces made one."""
    at = next((i for i in range(len(lines) - 1, -1, -1) if marker in lines[i]), None)
    if at is None:
        return ""
    start = next((i + 1 for i in range(at, -1, -1) if _RULE.match(lines[i])), at)
    for line in lines[start : at + 1]:
        text = line.strip(_FRAME)
        if text and not _RULE.match(text):
            return " ".join(text.split())[:160]  # a menu line's padding (grok's "Login with Grok      l") is one space
    return ""


class AgentAdapter:
    name: ClassVar[str] = ""
    command: ClassVar[str] = ""  # the executable, looked up on the pane's PATH
    install_hint: ClassVar[str] = ""  # how a person installs it (said when it is not on PATH)
    id_at_launch: ClassVar[bool] = False  # True: mam chooses the conversation id and passes it at launch
    exit_keys: ClassVar[tuple[KeyStep, ...]] = (("key", "C-d"),)
    # What stops the agent's turn under way and leaves it at its prompt, ready for the next brief (never
    # an exit): a job stopped by its --max-tokens (mam.governor). Escape in most TUIs.
    interrupt_keys: ClassVar[tuple[KeyStep, ...]] = (("key", "Escape"),)
    exit_grace_s: ClassVar[float] = 0.0  # at least this long for a graceful exit (a CLI slow to quit)
    # Environment variables that change where the CLI keeps its conversations; recorded per session.
    env_keys: ClassVar[tuple[str, ...]] = ("HOME",)
    # Variables left out of the pane's environment because they turn the CLI non-interactive.
    noninteractive_env: ClassVar[tuple[str, ...]] = ()
    # Markers real UIs show instead of a long pasted text while it waits in the input box.
    paste_placeholders: ClassVar[tuple[str, ...]] = ()
    # Text the CLI shows once its input box is ready for a paste (None: ready as soon as it runs).
    ready_marker: ClassVar[str | None] = None
    # argv templates; "{id}" is replaced by the conversation id.
    launch_args: ClassVar[tuple[str, ...]] = ()  # extra args of every fresh launch
    launch_id_args: ClassVar[tuple[str, ...]] = ()  # how to pass a chosen id at launch (id_at_launch only)
    resume_args: ClassVar[tuple[str, ...]] = ()  # e.g. ("--resume", "{id}") or ("resume", "{id}")
    # The CLI's own command that deletes a conversation ("{id}" replaced), e.g. ("delete", "--force", "{id}").
    delete_args: ClassVar[tuple[str, ...]] = ()
    # `mam session fork`: "native" launches `fork_args`, the CLI's own fork of a conversation ("{id}" the
    # source's id, "{new}" the fork's when id_at_launch); "copy" copies the conversation under a new id
    # (copy_conversation) and resumes the copy; "" refuses (the CLI has neither, or it is not verified).
    fork_mode: ClassVar[str] = ""
    fork_args: ClassVar[tuple[str, ...]] = ()
    # Options of every launch and resume (e.g. codex's --no-daemon).
    session_args: ClassVar[tuple[str, ...]] = ()
    # --permissions report / full: the CLI's own flags (override report_options for files or env).
    report_args: ClassVar[tuple[str, ...]] = ()
    full_args: ClassVar[tuple[str, ...]] = ()
    # Options that trust the session's cwd for this launch only (a CLI flag, when the CLI has one).
    trust_args: ClassVar[tuple[str, ...]] = ()
    # First-run dialogs and permission prompts, as they show on screen (any one marker is enough).
    trust_markers: ClassVar[tuple[str, ...]] = ()
    prompt_markers: ClassVar[tuple[str, ...]] = ()
    # How long after a paste shows in its input box mam waits before pressing Enter (0: at once): for a CLI
    # that takes an Enter arriving right after other input as a newline, not a submission.
    enter_gap_s: ClassVar[float] = 0.0
    # How many lines at the bottom of the screen hold the input box (when input_box finds no frame).
    input_lines: ClassVar[int] = 12
    # How many lines at the bottom (trailing blank lines aside) a dialog or prompt is looked for in.
    dialog_lines: ClassVar[int] = 40
    # How long the ready screen must hold (no dialog replacing it) before mam takes it as ready:
    # for a CLI that draws its input box first and a startup dialog over it a moment later.
    ready_settle_s: ClassVar[float] = 0.0
    # The CLI version mam's reading of its screen was checked against (the captured screens of
    # tests/agents/screens/<name>-<version>/ and the real-program tests); `mam doctor` names a drift.
    verified_version: ClassVar[str] = ""

    def screen_checks(self) -> tuple[str, ...]:
        """What mam decides from this CLI's screen (what a new version's look can break)."""
        checks = ["ready: its input box", "a brief still in the input box (the Enter that submits it)"]
        if self.paste_placeholders:
            checks.append(f"a long paste shown as {self.paste_placeholders[0].strip()!r}")
        if self.trust_markers:
            checks.append("its folder-trust dialog")
        if self.prompt_markers:
            checks.append("its dialogs and permission prompts (the job's waiting state)")
        return tuple(checks)

    # -- launching ----------------------------------------------------------------------------
    def new_conversation_id(self) -> str | None:
        """A fresh id when the CLI accepts one at launch, else None."""
        return str(uuid.uuid4()) if self.id_at_launch else None

    def fork_id(self) -> str | None:
        """The id of a fork's conversation when mam names it (`mam session fork`): a fresh id where the CLI
        takes one at launch; a "copy" adapter whose CLI names its own conversations says how it would."""
        return self.new_conversation_id()

    def launch_argv(self, conversation_id: str | None) -> list[str]:
        argv = [self.command, *self.launch_args]
        if conversation_id and self.id_at_launch:
            argv += [a.replace("{id}", conversation_id) for a in self.launch_id_args]
        return argv

    def check_installed(self, env: Mapping[str, str]) -> str:
        """The executable the pane will run (found on the pane's PATH), else AgentNotInstalled (exit 2)."""
        found = shutil.which(self.command, path=env.get("PATH", os.defpath))
        if found is None:
            how = f"install it ({self.install_hint})" if self.install_hint else "install it"
            raise AgentNotInstalled(
                f"{self.name}: the program {self.command!r} is not on PATH: {how}, or put it on PATH; "
                "nothing was started",
                program=self.command,
            )
        return found

    def resume_argv(self, conversation_id: str) -> list[str]:
        if not self.resume_args:
            raise AgentError(f"{self.name} has no resume command")
        return [self.command, *(a.replace("{id}", conversation_id) for a in self.resume_args)]

    def fork_argv(self, source_id: str, new_id: str | None, *, cwd: str, env: Mapping[str, str]) -> list[str]:
        """The argv that starts a fork of conversation `source_id` (`new_id`: the fork's id when mam
        chooses it). A "copy" CLI gets the copy made here, then resumes it; `env` locates the store."""
        convo.check_id(self.name, source_id)
        if self.fork_mode == "native":
            if new_id is not None:
                convo.check_id(self.name, new_id)
            return [
                self.command,
                *(a.replace("{id}", source_id).replace("{new}", new_id or "") for a in self.fork_args),
            ]
        if self.fork_mode == "copy" and new_id is not None:
            self.copy_conversation(source_id, convo.check_id(self.name, new_id), cwd=cwd, env=env)
            return self.resume_argv(new_id)
        raise AgentError(f"{self.name} cannot fork a conversation (no native fork, and no copy of its files)")

    def copy_conversation(self, source_id: str, new_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """Copy conversation `source_id` under `new_id` (fork_mode "copy"); return the files written."""
        raise AgentError(f"{self.name} cannot copy a conversation")

    def session_options(self, ctx: LaunchContext) -> SessionOptions:
        """Options of this launch: the adapter's session_args plus what ctx.permissions asks for."""
        perms = self.permission_options(ctx)
        trusted = self.trust_args if ctx.trust else ()
        hooks = self.hook_options(ctx)
        return SessionOptions(
            args=(*self.session_args, *trusted, *perms.args, *hooks.args), env={**perms.env, **hooks.env}
        )

    def hook_options(self, ctx: LaunchContext) -> SessionOptions:
        """What makes the CLI call `mam hook` on its lifecycle events, for this launch only (mam.agents.hooks)."""
        return SessionOptions()

    def permission_options(self, ctx: LaunchContext) -> SessionOptions:
        if ctx.permissions not in PERMISSION_MODES:
            raise AgentError(f"unknown permissions {ctx.permissions!r}: use {', '.join(PERMISSION_MODES)}")
        if ctx.permissions == "full":
            return SessionOptions(args=self.full_args)
        if ctx.permissions == "report":
            return self.report_options(ctx)
        return SessionOptions()

    def report_options(self, ctx: LaunchContext) -> SessionOptions:
        """What lets the agent run `mam event ...` (and with --board `mam board ...`) without a prompt, and
        nothing more."""
        return SessionOptions(args=self.report_args)

    def beyond_reporting(self, permissions: str, mam_dir: Path | None) -> tuple[str, ...]:
        """What a session with these permissions may do without a prompt besides running `mam event`,
        in plain words (`session status --json`: `beyond_reporting`); empty: nothing more."""
        if permissions == "full":
            return ("runs every command and edit without asking (the CLI's skip-every-approval flag)",)
        return ()

    def reaps_tool_processes(self, permissions: str) -> bool:
        """True when the CLI kills whatever a tool command leaves running once that command returns
        (a sandbox), so a heartbeater that `mam event started --heartbeat N` starts dies at once and
        the delegation wrapper, outside the sandbox, must start it again."""
        return False

    @staticmethod
    def with_options(argv: Sequence[str], options: SessionOptions) -> list[str]:
        return [*options.wrap, *argv, *options.args]

    def deliver_through_channel(
        self, state_dir: Path, text: str, conversation_id: str | None, cwd: str
    ) -> Outcome | None:
        """Start a turn holding `text` through the CLI's own server when this launch of the session opened one
        (mam.agents.channel says what each outcome means); None: no channel, the brief is pasted."""
        return None

    # -- first-run dialogs --------------------------------------------------------------------
    def trust_folder(self, cwd: str, env: Mapping[str, str]) -> Path | None:
        """Record `cwd` as trusted where the CLI keeps that per folder.

        Returns the file written (None: nothing to do)."""
        return None

    def dialog(self, screen: str) -> Dialog | None:
        """The dialog or permission prompt the screen shows, if any (never answered by mam)."""
        lines = screen.rstrip().splitlines()[-self.dialog_lines :]
        bottom = "\n".join(lines)
        for kind, markers in (("trust", self.trust_markers), ("prompt", self.prompt_markers)):
            for marker in markers:
                if marker in bottom:
                    return Dialog(kind, marker, dialog_title(lines, marker))
        return None

    # The CLI version whose permission prompt `permission_prompt` reads (captured in tests/agents/screens);
    # "" when mam does not answer this CLI's prompts.
    prompt_version: ClassVar[str] = ""

    def permission_prompt(self, screen: str) -> PermissionPrompt | None:
        """The permission prompt the screen shows, parsed from the captured layout of `prompt_version`;
        None when there is none, or it is laid out otherwise (then no one answers it from mam)."""
        return None

    # -- conversations ------------------------------------------------------------------------
    def home(self, env: Mapping[str, str]) -> Path:
        home = env.get("HOME") or os.path.expanduser("~")
        return Path(home)

    def discover(self, *, cwd: str, since: float, env: Mapping[str, str]) -> str | None:
        """The id of the conversation this CLI started in `cwd` at or after `since` (None if not yet written)."""
        return None

    def conversation_files(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """Every file or folder that belongs to that conversation and nothing else."""
        return []

    def conversation_exists(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> bool:
        return any(p.exists() for p in self.conversation_files(conversation_id, cwd=cwd, env=env))

    def purge_conversation(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """Delete that conversation's files (and nothing else); return what was removed."""

        removed = []
        for path in self.conversation_files(conversation_id, cwd=cwd, env=env):
            if path.is_dir():
                shutil.rmtree(path)
                removed.append(path)
            elif path.exists():
                path.unlink()
                removed.append(path)
        return removed

    # -- activity from the CLI's own records (mam.hooks.store_watch) ------------------------------
    # The record `read_activity` reads, in words (docs, `mam doctor`); "" when mam reads none for this CLI.
    activity_store: ClassVar[str] = ""

    def read_activity(
        self, conversation_id: str, *, cwd: str, env: Mapping[str, str], cursor: dict[str, object]
    ) -> list[Noted] | None:
        """What the CLI recorded of its turns since `cursor` (an empty dict at first; the reader keeps its
        place in it), oldest first; None when mam reads no activity from this CLI's store (it calls
        mam's hooks instead, or has no such record)."""
        return None

    def replay_pending(self, conversation_id: str | None, *, env: Mapping[str, str], since: float) -> bool:
        """True while a CLI launched at `since` has yet to load a resumed conversation back, for a CLI
        whose input box shows (and drops what is pasted) before that. Default: False (its ready screen says all)."""
        return False

    def check_resumable(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> None:
        """Raise AgentError with a clear message when the conversation cannot be resumed."""
        if not conversation_id:
            raise AgentError(f"{self.name}: no conversation id was recorded for this session; it cannot be resumed")
        if not self.conversation_exists(conversation_id, cwd=cwd, env=env):
            raise AgentError(
                f"{self.name}: conversation {conversation_id} not found (its files are gone); "
                "it cannot be resumed: create a new session instead",
                conversation_id=conversation_id,
            )

    # -- input box ----------------------------------------------------------------------------
    def is_ready(self, screen: str) -> bool:
        """The input box accepts a paste: the ready marker shows and no dialog is in the way."""
        return (self.ready_marker is None or self.ready_marker in screen) and self.dialog(screen) is None

    def input_box(self, screen: str) -> str:
        """The text of the CLI's input box on a captured screen ('' if none is found).
        Default: the last `input_lines` lines; adapters whose box has a frame find the frame."""
        return "\n".join(screen.rstrip("\n").splitlines()[-self.input_lines :])

    def input_empty(self, screen: str) -> bool:
        """The input box shows and holds no text of the user's (its own placeholder and prompt glyph aside):
        mam types a reminder only into such a box (mam.jobs.remind)."""
        box = self.input_box(screen)
        if not box.strip():
            return False  # no box found: not knowably empty
        if self.ready_marker:
            box = box.replace(self.ready_marker, "")
        text = "".join(ch for ch in box if ch.isalnum())
        return not text

    def input_pending(self, screen: str, nonce: str) -> bool:
        """Heuristic used only to decide whether to press Enter again (never to decide a job's outcome):
        the brief's nonce or a paste placeholder is still in the input box, and no dialog is shown."""
        if self.dialog(screen) is not None:
            return False
        box = self.input_box(screen)
        return bool(box) and (nonce in box or any(p in box for p in self.paste_placeholders))

    @staticmethod
    def framed_box(screen: str, rule: str = "\u2500", min_width: int = 10) -> str | None:
        """The lines between the last two horizontal rules on the screen (an input box drawn with
        rules above and below), or None when there is no such frame."""
        lines = screen.rstrip("\n").splitlines()
        rules = [i for i, line in enumerate(lines) if len(line.strip()) >= min_width and set(line.strip()) == {rule}]
        if len(rules) < 2:
            return None
        top, bottom = rules[-2], rules[-1]
        return "\n".join(lines[top + 1 : bottom])

    def pane_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The pane's environment for this CLI: `env` less what would make it leave its terminal UI."""
        return {k: v for k, v in env.items() if k not in self.noninteractive_env}

    def agent_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The subset of `env` that locates this CLI's files (stored on the session row); with
        PATH too when the CLI has a delete command, so a purge runs the same program."""
        keys = (*self.env_keys, "PATH") if self.delete_args else self.env_keys
        return {k: env[k] for k in keys if k in env}

    # -- the CLI's own delete command ---------------------------------------------------------
    def run_delete_command(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> bool:
        """Run the CLI's own delete command (`delete_args`) on the PATH recorded for the session.
        True if it ran and exited 0; False if there is none, it is not found, or it failed
        (the adapter then removes the conversation itself)."""
        if (
            not self.delete_args
            or not env.get("PATH")
            or not self.conversation_exists(conversation_id, cwd=cwd, env=env)
        ):
            return False  # nothing to delete: never start the CLI for nothing (it would write its store)
        return convo.run_cli(
            self.command,
            [a.replace("{id}", convo.check_id(self.name, conversation_id)) for a in self.delete_args],
            cwd=cwd,
            env=env,
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
