"""OpenAI Codex CLI (`codex`): the id is Codex's own, discovered from its rollout files.

Rollouts: `${CODEX_HOME:-~/.codex}/sessions/YYYY/MM/DD/rollout-<local time>-<id>.jsonl`
(older ones may be `.jsonl.zst`, archived ones flat in `archived_sessions/`). The first line
is a `session_meta` record holding the id, the cwd and the start time. The file appears only
once the first turn has run, so discovery returns None until then.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from pathlib import Path

from mam.agents import codex_server, convo, trust
from mam.agents.base import AgentAdapter, LaunchContext, SessionOptions
from mam.agents.channel import Outcome
from mam.agents.hooks import codex_notify

# What codex 0.171.0's empty composer shows (strings of its binary; the first captured in
# tests/agents/screens/codex-0.171.0/ready.txt).
_PLACEHOLDERS = ("", "Ask Codex to do anything", "Ask a follow-up question")


class CodexAdapter(AgentAdapter):
    name = "codex"
    command = "codex"
    verified_version = "0.171.0"
    install_hint = "npm install -g @openai/codex"
    resume_args = ("resume", "{id}")
    # Verified with 0.171.0: `codex fork [SESSION_ID]` ("Fork a previous interactive session"), with the
    # same options as `codex resume` (--no-daemon among them); the fork's id is discovered like a new one's.
    fork_mode = "native"
    fork_args = ("fork", "{id}")
    delete_args = ("delete", "--force", "{id}")
    # Measured on 0.171.0: mid-turn the composer queues "/exit" instead of running it, so
    # Ctrl-C first (interrupts a turn, clears a typed box; idle it only shows a hint).
    exit_keys = (("key", "C-c"), ("pause", "0.5"), ("text", "/exit"), ("pause", "0.3"), ("key", "Enter"))
    env_keys = ("HOME", "CODEX_HOME")
    paste_placeholders = ("[Pasted Content",)
    # Verified with 0.171.0 (docs/agents.md): without --no-daemon the TUI attaches to a shared
    # `codex app-server` whose environment is not the pane's (a launch with the delivery channel runs
    # its own app-server from the pane instead: `--remote` takes --no-daemon's place, session_options);
    # with the login shell on, the tool shell's /etc/profile resets PATH and `mam` is not found.
    session_args = ("--no-daemon", "-c", "allow_login_shell=false")
    full_args = ("--dangerously-bypass-approvals-and-sandbox",)
    trust_markers = ("Trust this folder?", "Trust and continue")
    prompt_markers = (
        "Would you like to run the following command?",
        "Press enter to confirm or esc to cancel",
        "Would you like to make the following edits?",
        # First start without a login (no auth.json, no provider of the user's own): a sign-in picker.
        "Choose how you want to use Codex.",
    )

    def session_options(self, ctx: LaunchContext) -> SessionOptions:
        """The base options, run on this launch's own app-server: the delivery channel
        (mam.agents.codex_server: the TUI gets `--remote` instead of `--no-daemon`). Not with
        --no-trust: a TUI on an app-server never asks "Trust this folder?" (checked with 0.171.0: it
        starts in an untrusted repository without asking), and --no-trust relies on that question."""
        options = super().session_options(ctx)
        if not codex_server.available() or not ctx.trust:
            return options
        return codex_server.with_channel(options, ctx)

    def deliver_through_channel(
        self, state_dir: Path, text: str, conversation_id: str | None, cwd: str
    ) -> Outcome | None:
        return codex_server.deliver(state_dir, text, conversation_id, cwd)

    def report_options(self, ctx: LaunchContext) -> SessionOptions:
        """Codex has no per-session allow rule (its .rules files load only from CODEX_HOME and the
        project): `mam event` runs inside the workspace-write sandbox, which gets loopback-capable
        network and the workspace's .mam/ as a writable root; approvals stay as the user set them."""
        args = ["-c", "sandbox_workspace_write.network_access=true"]
        if ctx.mam_dir is not None:
            args += ["-c", f"sandbox_workspace_write.writable_roots=[{trust.toml_string(str(ctx.mam_dir))}]"]
        return SessionOptions(args=tuple(args))

    def beyond_reporting(self, permissions: str, mam_dir: Path | None) -> tuple[str, ...]:
        """`report` cannot be narrowed to `mam event` alone (no per-command sandbox rule): the grant
        is the sandbox's, for every command the agent runs in it."""
        if permissions != "report":
            return super().beyond_reporting(permissions, mam_dir)
        folder = str(mam_dir) if mam_dir is not None else "the workspace's .mam/"
        return (
            "every sandboxed command, not only `mam event`, may open network connections",
            f"every sandboxed command may write under {folder} (job records holding job tokens, the registry); "
            "--permissions ask grants neither (codex then asks before `mam event` leaves its sandbox)",
        )

    def hook_options(self, ctx: LaunchContext) -> SessionOptions:
        """`-c notify=[...]`: codex runs `mam hook codex` when a turn completes (its only lifecycle hook)."""
        return SessionOptions(args=codex_notify(ctx))

    def reaps_tool_processes(self, permissions: str) -> bool:
        """Measured on 0.171.0: its sandbox kills every process a tool command leaves behind (a setsid
        double-forked child too) when the command returns; `full` runs without the sandbox."""
        return permissions != "full"

    def input_box(self, screen: str) -> str:
        """From the last line that starts with the prompt mark `›` down to the status line below it
        (the transcript shows earlier messages with the same mark; they are above)."""
        lines = screen.rstrip("\n").splitlines()
        span = _box_span(lines)
        return "\n".join(lines[span[0] : span[1]]) if span else ""

    def input_empty(self, screen: str) -> bool:
        """The box holds no text of the user's: an empty composer shows a placeholder, "Ask Codex to do
        anything" before the first turn and "Ask a follow-up question" after (both in 0.171.0's binary)."""
        box = self.input_box(screen)
        if not box:
            return False
        text = " ".join(box.replace("\u203a", " ").split())
        return text in _PLACEHOLDERS

    def status_line(self, screen: str) -> str:
        """The footer under the input box, `<model> <effort> · <cwd>` (e.g. `gpt-5 default · ~/repo`);
        empty while it is not drawn. Codex 0.171 draws its composer (with only the `? for shortcuts`
        hint below it) about a second before it has checked the folder's trust: that early frame is
        then replaced by the "Trust this folder?" question, or gains this line."""
        lines = screen.rstrip("\n").splitlines()
        span = _box_span(lines)
        if span is None:
            return ""
        below = [line for line in lines[span[1] :] if line.strip()]
        first = below[0] if below else ""
        return first.strip() if " \u00b7 " in first and "for shortcuts" not in first else ""

    def is_ready(self, screen: str) -> bool:
        """The input box with its status line under it, and no dialog (the box alone is not enough:
        see status_line)."""
        return bool(self.status_line(screen)) and self.dialog(screen) is None

    def trust_folder(self, cwd: str, env: Mapping[str, str]) -> Path | None:
        """`[projects."<cwd>"] trust_level = "trusted"` in `${CODEX_HOME:-~/.codex}/config.toml`."""
        return trust.trust_in_toml(self.root(env) / "config.toml", cwd, agent=self.name)

    def root(self, env: Mapping[str, str]) -> Path:
        return convo.env_dir(env, "CODEX_HOME", convo.home(env) / ".codex")

    def discover(self, *, cwd: str, since: float, env: Mapping[str, str]) -> str | None:
        earliest = since - convo.TOLERANCE_S
        found: list[tuple[float, str]] = []
        for path in self._recent_rollouts(since, env):
            if convo.mtime(path) < earliest:
                continue
            head = convo.first_json_line(path) or {}
            meta = head.get("payload")
            if head.get("type") != "session_meta" or not isinstance(meta, dict):
                continue
            if _is_subagent(meta) or not convo.same_dir(str(meta.get("cwd", "")), cwd):
                continue  # a subagent's thread, or another folder's session
            started = convo.iso_epoch(meta.get("timestamp")) or convo.iso_epoch(head.get("timestamp"))
            if started is not None and started >= earliest and meta.get("id"):
                found.append((started, str(meta["id"])))
        return min(found)[1] if found else None

    def _recent_rollouts(self, since: float, env: Mapping[str, str]) -> list[Path]:
        """Rollouts in the day folders from the day before `since` on (folders use local dates)."""
        first_day = date.fromtimestamp(since - 86400)
        paths = []
        for day in sorted((self.root(env) / "sessions").glob("[0-9]*/[0-9]*/[0-9]*")):
            try:
                if datetime.strptime("/".join(day.parts[-3:]), "%Y/%m/%d").date() < first_day:
                    continue
            except ValueError:
                continue
            paths.extend(sorted(day.glob("rollout-*.jsonl")))
        return paths

    def conversation_files(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        convo.check_id(self.name, conversation_id)
        root = self.root(env)
        name = f"rollout-*-{conversation_id}.jsonl*"
        return sorted(root.glob(f"sessions/*/*/*/{name}")) + sorted(root.glob(f"archived_sessions/{name}"))

    def purge_conversation(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """`codex delete --force <id>` (rollout and index row), then what it leaves: the thread's
        subagent threads, its rows in the other SQLite stores, its lines in history.jsonl."""
        root = self.root(env)
        family = self._family(conversation_id, env)
        self.run_delete_command(conversation_id, cwd=cwd, env=env)
        removed = convo.remove([f for i in family for f in self.conversation_files(i, cwd=cwd, env=env)])
        for db in (
            sorted(root.glob("state_*.sqlite"))
            + sorted(root.glob("thread_history_*.sqlite"))
            + sorted(root.glob("logs_*.sqlite"))
        ):
            if convo.delete_rows(db, family, keys=_ROW_KEYS):
                removed.append(db)
        if [i for i in family if convo.drop_json_lines(root / "history.jsonl", "session_id", i)]:
            removed.append(root / "history.jsonl")
        return removed

    def _family(self, conversation_id: str, env: Mapping[str, str]) -> list[str]:
        """The thread and the subagent threads it spawned (from the index's spawn edges)."""
        ids, todo = [convo.check_id(self.name, conversation_id)], [conversation_id]
        for db in sorted(self.root(env).glob("state_*.sqlite")):
            with convo.sqlite_store(db) as conn:
                if conn is None or "parent_thread_id" not in convo.columns(conn, "thread_spawn_edges"):
                    continue
                while todo:
                    rows = conn.execute(
                        "SELECT child_thread_id FROM thread_spawn_edges WHERE parent_thread_id = ?", (todo.pop(),)
                    )
                    children = [str(r[0]) for r in rows if str(r[0]) not in ids]
                    ids += children
                    todo += children
        return ids


def _box_span(lines: list[str]) -> tuple[int, int] | None:
    """The input box's lines, [start, end): the last line starting with `› ` and those under it up
    to a blank line or the status line."""
    starts = [i for i, line in enumerate(lines) if line.startswith("\u203a ")]
    if not starts:
        return None
    end = starts[-1] + 1
    while end < len(lines) and lines[end].strip() and " \u00b7 " not in lines[end]:
        end += 1
    return starts[-1], end


# Columns that name a thread in Codex's SQLite stores (state_5: threads.id and thread_* tables;
# thread_history_1: thread_turns/thread_items...; thread_spawn_edges by its child).
_ROW_KEYS = {"threads": "id", "thread_spawn_edges": "child_thread_id", "*": "thread_id"}


def _is_subagent(meta: dict[str, object]) -> bool:
    """A subagent's thread: `source` is {"subagent": {"thread_spawn": {"parent_thread_id": ...}}}
    (or another subagent kind) where a user's session has "cli"; older rollouts had a top-level
    parent_thread_id."""
    source = meta.get("source")
    return bool(meta.get("parent_thread_id")) or (isinstance(source, dict) and "subagent" in source)


ADAPTER = CodexAdapter()
