"""Google Gemini CLI (`gemini`): mam picks the session UUID and passes it with --session-id.

Checked against @google/gemini-cli 0.61.0. Everything lives under
`${GEMINI_CLI_HOME:-$HOME}/.gemini/`: each project folder has a temp folder
`tmp/<project name>/` (the name is registered in `projects.json`; its `.project_root` holds the
folder's path) with the transcripts `chats/session-<local time>-<first 8 of id>.jsonl` (first
line: sessionId, projectHash = sha256 of the folder's path, startTime, kind), a shared prompt
log `logs.json` (a JSON list of entries keyed by sessionId), and per-session extras
(`chats/<id>/` subagents, `logs/session-<id>.jsonl`, `tool-outputs/session-<id>/`, `<id>/`).
The transcript is written at launch; gemini deletes it again on exit if no turn was recorded.
Resume looks only in the current folder's project.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from mam.agents import convo, trust
from mam.agents.base import AgentAdapter, LaunchContext, SessionOptions
from mam.errors import AgentError

_POLICY = """# Written by mam for session {session}: let the agent report on its job without a prompt.
"""
_RULE = """[[rule]]
toolName = "run_shell_command"
commandPrefix = "{command}"
decision = "allow"
priority = 900
"""


class GeminiAdapter(AgentAdapter):
    name = "gemini"
    command = "gemini"
    verified_version = "0.61.0"
    install_hint = "npm install -g @google/gemini-cli"
    id_at_launch = True
    launch_id_args = ("--session-id", "{id}")
    resume_args = ("--resume", "{id}")
    # No fork option in 0.61.0; its `--session-file FILE` imports a transcript under an id it picks itself
    # and keeps only the user and model messages. mam copies the transcripts under its own id instead
    # (copy_conversation) and resumes the copy: docs/agents.md, "Forking a conversation".
    fork_mode = "copy"
    # Measured on 0.61.0 in a real pane: keys that arrive within ~1 s of each other are taken as
    # one input (a fast "/quit" + Enter only picks the completion; a fast second Ctrl-C is lost),
    # and its exit takes 4-6 s. Ctrl-C first cancels a turn or clears the box; then /quit.
    # Mid-turn the first round may not end it; mam's second round (Escape, then these) does.
    exit_keys = (("key", "C-c"), ("pause", "1.0"), ("text", "/quit"), ("pause", "1.0"), ("key", "Enter"))
    exit_grace_s = 40.0
    env_keys = ("HOME", "GEMINI_CLI_HOME")
    # 0.61.0 runs without its UI (and exits at once in a pane) when CI is set or
    # DEBIAN_FRONTEND=noninteractive: both read in its bundle, CI seen in a real pane.
    noninteractive_env = ("CI", "DEBIAN_FRONTEND")
    paste_placeholders = ("[Pasted Text:",)
    # Read in 0.61.0's bundle (KeypressContext, `bufferFastReturn`): where the terminal has no kitty keyboard
    # protocol (tmux has none), an Enter within FAST_RETURN_TIMEOUT (30 ms) of the key before it is taken as
    # Shift+Enter, a newline. Pressed right after the paste, every brief sat unsubmitted until the nudge
    # (10 s later with a 120 s start deadline): tests/unit/test_enter_gap.py.
    enter_gap_s = 0.1
    ready_marker = "Type your message or @path/to/file"
    # Measured on 0.61.0 at 200x50: in a folder not yet trusted it draws its ready input box and
    # footer for ~0.2 s before the trust dialog replaces them; nothing on that frame tells it apart.
    ready_settle_s = 1.5
    full_args = ("--approval-mode", "yolo")
    trust_markers = ("Do you trust the files in this folder?",)
    prompt_markers = (
        "How would you like to authenticate",  # first run without security.auth.selectedType
        # API-key auth chosen but no GEMINI_API_KEY (nor a stored key): a paste would go into the key field.
        "Enter Gemini API Key",
        "Allow execution of",
        "Apply this change?",
        "Do you want to proceed?",
        "Waiting for user confirmation",
    )

    # -- screen --------------------------------------------------------------------------------
    def input_box(self, screen: str) -> str:
        """The line starting ` > ` (` * ` in YOLO mode: `--permissions full`) below the last `─` rule
        (the submitted brief stays on screen above)."""
        lines = screen.rstrip("\n").splitlines()
        rules = [i for i, line in enumerate(lines) if len(line.strip()) >= 10 and set(line.strip()) == {"\u2500"}]
        if not rules:
            return ""
        return next((line for line in lines[rules[-1] + 1 :] if line.startswith((" > ", " * "))), "")

    def is_ready(self, screen: str) -> bool:
        """Its input box shows (empty: the ready marker; or holding text) and no dialog is in the way
        (while it replays a resumed conversation, "Resuming session..." shows instead of the box)."""
        return bool(self.input_box(screen)) and self.dialog(screen) is None

    def replay_pending(self, conversation_id: str | None, *, env: Mapping[str, str], since: float) -> bool:
        """A gemini resumed at `since` has not loaded its conversation back yet.

        Measured on 0.61.0 (tests/agents/screens/gemini-0.61.0/resume-*.txt): `--resume` draws its
        ready input box first (a paste then goes to its queue), then, once its config is initialized
        (2-3 s later on a loaded machine), writes a transcript header of its own (a new file, or
        appended to the resumed one when both are named for the same minute), clears the screen and
        replays the conversation under "Resuming session..." with no input box (a paste then is
        dropped), appends `{"$set": {"sessionId": ...}}` to the resumed transcript, and draws its box
        again. So: pending while a transcript of that id from before `since` exists (a resume, not a
        fresh launch) and no transcript written since holds that record after its last header from
        since."""
        if not conversation_id:
            return False
        found = self._transcripts(conversation_id, env)
        if not any(_started(head) < since for _path, head in found):
            return False  # nothing to load back: a fresh launch
        return not any(_resumed_since(path, since) for path, _head in found if _mtime(path) >= since)

    def root(self, env: Mapping[str, str]) -> Path:
        base = env.get("GEMINI_CLI_HOME") or str(convo.home(env))
        return Path(base).expanduser() / ".gemini"

    # -- permissions and trust ----------------------------------------------------------------
    def report_options(self, ctx: LaunchContext) -> SessionOptions:
        """A policy file of this session's own that allows `mam event ...` in the shell tool."""
        ctx.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = ctx.state_dir / "gemini-policy.toml"
        rules = "\n".join(_RULE.format(command=c) for c in ctx.allowed_commands)
        convo.write_private(path, _POLICY.format(session=ctx.session) + rules)
        return SessionOptions(args=("--policy", str(path)))

    def trust_folder(self, cwd: str, env: Mapping[str, str]) -> Path | None:
        """Record cwd in trustedFolders.json (what gemini's own "Trust folder" answer writes)."""
        path = self.root(env) / "trustedFolders.json"
        with trust.folder_lock(trust.resolved(path).parent):  # two creates in one HOME never lose each other's folder
            return _trust(path, cwd)

    # -- conversations ------------------------------------------------------------------------
    def _project_dirs(self, env: Mapping[str, str]) -> list[Path]:
        return sorted(p for p in (self.root(env) / "tmp").glob("*") if (p / "chats").is_dir())

    def _transcripts(self, conversation_id: str, env: Mapping[str, str]) -> list[tuple[Path, dict[str, object]]]:
        """Every transcript whose first line names that session id, with that first line."""
        convo.check_id(self.name, conversation_id)
        found = []
        for project in self._project_dirs(env):
            for path in sorted((project / "chats").glob(f"session-*-{conversation_id[:8]}.jsonl")):
                head = convo.first_json_line(path) or {}
                if head.get("sessionId") == conversation_id:
                    found.append((path, head))
        return found

    def conversation_files(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        files: list[Path] = []
        for path, _head in self._transcripts(conversation_id, env):
            project = path.parent.parent
            files += [
                path,
                project / "chats" / conversation_id,
                project / "logs" / f"session-{conversation_id}.jsonl",
                project / "tool-outputs" / f"session-{conversation_id}",
                project / conversation_id,
            ]
        return files

    def conversation_exists(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> bool:
        """True when the cwd's project holds that transcript (gemini resumes from its own folder only)."""
        hashes = {_project_hash(cwd), _project_hash(os.path.realpath(cwd))}
        return any(head.get("projectHash") in hashes for _path, head in self._transcripts(conversation_id, env))

    def copy_conversation(self, source_id: str, new_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """Each transcript of `source_id` in the cwd's project copied beside it under `new_id`: the file
        name's last 8 characters and every `sessionId` (the header's, a `$set`'s) replaced, every other
        line byte for byte; created 0600, never over an existing file. `gemini --resume <new>` then
        loads the copy as it loads the source (its headers keep their start time: a resume, so mam
        waits for the replay as for any resume)."""
        hashes = {_project_hash(cwd), _project_hash(os.path.realpath(cwd))}
        sources = [p for p, head in self._transcripts(source_id, env) if head.get("projectHash") in hashes]
        if not sources:
            raise AgentError(f"gemini: conversation {source_id} not found in {cwd}", conversation_id=source_id)
        convo.check_id(self.name, new_id)
        written: list[Path] = []
        try:
            for path in sources:
                target = path.with_name(path.name[: -len(f"{source_id[:8]}.jsonl")] + f"{new_id[:8]}.jsonl")
                lines = path.read_bytes().splitlines(keepends=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                written.append(target)
                with os.fdopen(fd, "wb") as f:
                    f.writelines(_renamed(line, source_id, new_id) for line in lines)
        except BaseException:
            convo.remove(written)
            raise
        return written

    def purge_conversation(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """The transcript and its extras, then that session's entries of the shared prompt log.

        Not through `gemini --delete-session`: it takes an index as well as an id, and an id it
        does not find whose first characters are digits is read as an index (another session)."""
        logs = sorted((self.root(env) / "tmp").glob("*/logs.json"))
        removed = convo.remove(self.conversation_files(conversation_id, cwd=cwd, env=env))
        for log in logs:
            if _drop_log_entries(log, conversation_id):
                removed.append(log)
        return removed


def _started(head: Mapping[str, object]) -> float:
    """A transcript's startTime (ISO 8601, UTC) as a timestamp; +inf when missing or unreadable."""
    value = head.get("startTime")
    if not isinstance(value, str):
        return math.inf
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return math.inf


def _resumed_since(path: Path, since: float) -> bool:
    """The transcript holds a `$set` of sessionId (what a resume appends) after its last header from `since` on."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    resumed = False
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line still being written
        if not isinstance(record, dict):
            continue
        update = record.get("$set")
        if isinstance(update, dict) and "sessionId" in update:
            resumed = True
        elif "sessionId" in record and "startTime" in record and _started(record) >= since:
            resumed = False  # a header this launch wrote: only a `$set` after it counts
    return resumed


def _renamed(line: bytes, source_id: str, new_id: str) -> bytes:
    """A transcript line with the session id `source_id` (a header's `sessionId`, a `$set`'s) made
    `new_id`, written back as gemini writes it (JSON.stringify: compact); any other line as it is. A
    `{"$set": {"sessionId": ...}}` alone (what each resume of the source appended) is left out: it
    changes nothing, and mam reads the first one after the launch as the end of the fork's replay
    (replay_pending)."""
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict):
        return line
    update = record.get("$set")
    if isinstance(update, dict) and set(update) == {"sessionId"} and len(record) == 1:
        return b""
    target: dict[str, object] = update if isinstance(update, dict) else record
    if target.get("sessionId") != source_id:
        return line
    target["sessionId"] = new_id
    end = line[len(line.rstrip(b"\r\n")) :]
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + end


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return -math.inf


def _trust(path: Path, cwd: str) -> Path | None:
    try:
        folders = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError) as e:
        raise AgentError(f"gemini: cannot read {path}: {e}") from e
    if not isinstance(folders, dict):
        raise AgentError(f"gemini: {path} is not a JSON object; not touching it")
    if folders.get(cwd) == "TRUST_FOLDER":
        return None
    if folders.get(cwd) == "DO_NOT_TRUST":
        raise trust.distrusted("gemini", path, cwd)
    folders[cwd] = "TRUST_FOLDER"
    trust.write_atomically(path, json.dumps(folders, indent=2), mode=0o600)  # 0600, as gemini writes it
    return path


def _project_hash(folder: str) -> str:
    return hashlib.sha256(folder.encode()).hexdigest()


def _drop_log_entries(path: Path, conversation_id: str) -> bool:
    """Rewrite a project's logs.json without that session's entries; True if any went."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as e:
        raise AgentError(f"gemini: cannot read {path}: {e}") from e
    if not isinstance(entries, list):
        return False
    kept = [e for e in entries if not (isinstance(e, dict) and e.get("sessionId") == conversation_id)]
    if len(kept) == len(entries):
        return False
    convo.write_private(path, json.dumps(kept, indent=2), mode=path.stat().st_mode & 0o777)
    return True


ADAPTER = GeminiAdapter()
