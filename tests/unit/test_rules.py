"""The rules docs/architecture.md states about the code, each checked by reading every file's syntax tree,
each with a probe (a planted violation in a temporary module) showing the check can fail. The package
graph itself (the layers, the upward imports) is tests/unit/test_layers.py's."""

from __future__ import annotations

import ast
import re
from pathlib import Path

MAM = Path(__file__).resolve().parents[2] / "mam"


def rel(path: Path) -> str:
    return str(path.relative_to(MAM))


def all_files() -> list[Path]:
    return sorted(p for p in MAM.rglob("*.py") if "__pycache__" not in p.parts)


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


# -- SQL: only mam/store/ executes it ---------------------------------------------------------------------------

SQL_CALLS = {"execute", "executemany", "executescript"}
# Files outside mam/store/ that run SQL, each with its reason. None of them touches mam's registry.
SQL_ELSEWHERE: dict[str, str] = {
    "agents/codex.py": "reads codex's own state database (its threads) to find a session's conversation",
    "agents/hermes.py": "reads hermes's own session database to find and purge a session's conversation",
    "agents/opencode.py": "reads opencode's own database to find and purge a session's conversation",
    "agents/convo.py": "the adapters' shared purge of a conversation's rows from the agent's own database",
    "usage/readers.py": "reads token usage from an agent CLI's own database",
}


def sql_lines(path: Path) -> list[int]:
    """The lines of a file that call .execute/.executemany/.executescript (on a connection or cursor)."""
    return sorted(
        n.lineno
        for n in ast.walk(tree(path))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in SQL_CALLS
    )


def runs_sql() -> set[str]:
    return {rel(p) for p in all_files() if rel(p).split("/")[0] != "store" and sql_lines(p)}


def test_only_the_store_executes_sql() -> None:
    assert runs_sql() - set(SQL_ELSEWHERE) == set(), "move the SQL into a mam/store/ module"


def test_the_sql_allow_list_holds_only_what_is_still_there() -> None:
    assert set(SQL_ELSEWHERE) - runs_sql() == set()


def test_the_sql_check_can_fail(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f(conn):\n    with conn:\n        return conn.cursor().execute('SELECT 1')\n")
    assert sql_lines(probe) == [3]


# -- the events table: one module writes it ---------------------------------------------------------------------

EVENT_WRITES = {"add_event", "mark_published"}  # mam/store/jobs.py's functions that write the events table
EVENTS_WRITER = "jobs/emit.py"  # the emitter: new events, a remote job's received ones, a runner's relay mark
WRITES_EVENTS_SQL = re.compile(r"\b(INSERT(\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|UPDATE|DELETE\s+FROM)\s+events\b", re.I)


def sql_writing_events(path: Path) -> set[str]:
    """The functions of a file holding SQL text that writes the events table ("" for module level)."""
    found: set[str] = set()

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else where
            if (
                isinstance(child, ast.Constant)
                and isinstance(child.value, str)
                and WRITES_EVENTS_SQL.search(child.value)
            ):
                found.add(where)
            visit(child, inner)

    visit(tree(path), "")
    return found


def calls_of(path: Path, names: set[str]) -> set[str]:
    """Which of `names` a file calls (as a function or an attribute: `jobs_table.add_event(...)`)."""
    out = set()
    for n in ast.walk(tree(path)):
        if isinstance(n, ast.Call):
            name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            if name in names:
                out.add(name)
    return out


def test_only_the_emitter_writes_the_events_table() -> None:
    sql = {f"{rel(p)}:{fn}" for p in all_files() for fn in sql_writing_events(p)}
    assert sql == {f"store/jobs.py:{fn}" for fn in EVENT_WRITES}
    callers = {rel(p) for p in all_files() if rel(p) != "store/jobs.py" and calls_of(p, EVENT_WRITES)}
    assert callers == {EVENTS_WRITER}


def test_the_events_writer_check_can_fail(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def sneak(conn, jobs_table):\n"
        "    conn.execute('INSERT OR IGNORE INTO events(job_id) VALUES (?)', ('j',))\n"
        "    jobs_table.add_event(conn, job_id='j')\n"
    )
    assert sql_writing_events(probe) == {"sneak"}
    assert calls_of(probe, EVENT_WRITES) == {"add_event"}


# -- the environment: mam/settings.py reads it, and the files named here ----------------------------------------

ENV_NAMES = {"environ", "environb", "getenv", "putenv", "unsetenv"}
# The library below the front ends takes the environment as a parameter (`environ=`); these files read
# this process's own, each for its reason.
FRONT = "a front end: hands its caller's environment to the library, which takes it as a parameter"
PANE_SIDE = "runs in an agent's pane, where the variables mam set at launch are its only input"
ENVIRON_READERS: dict[str, str] = {
    "cli/board.py": FRONT + " (MAM_SESSION: the writing session, set in its pane)",
    "cli/hook.py": FRONT + " (MAM_SESSION, set in the agent's pane)",
    "cli/loop.py": FRONT,
    "cli/mcp.py": FRONT,
    "cli/session.py": FRONT,
    "cli/worktree.py": FRONT,
    "cli/node.py": "`mam node` strips relative PATH entries from its own environment, as an autostarted node",
    "demo/agent.py": PANE_SIDE + " (MAM_DEMO_*: the demo agent's scripted behaviour; its conversation folder)",
    "demo/tour.py": FRONT + " (the demo's panes get the caller's environment, their settings changed)",
    "doctor.py": FRONT + " (which agent CLIs the caller's PATH finds)",
    "hooks/run.py": PANE_SIDE + " (`mam hook`: MAM_WORKSPACE; MAM_HOOK_TRACE, a trace of each call for tests)",
    "jobs/delivery.py": "a session stopped by a pause is resumed with the wrapper's environment, as the CLI would",
    "jobs/heartbeat.py": "the heartbeater process starts with its starter's environment unless handed one",
    "node/call.py": "a library caller's default: its own environment's settings variables go with the request",
    "node/client.py": "the client runs in the caller's process: MAM_NODE, MAM_NO_AUTOSTART; the node it starts",
    "node/front.py": PANE_SIDE
    + " and the lean front end (`mam event`, `mam job delegate`): settings variables, MAM_AGENT_PID, MAM_NODE",
    "node/server.py": "the node's own settings when a request carries none (the `web` operation)",
    "node/service.py": "the node resumes a session stopped by a pause with its own environment",
    "panes/herdr.py": "a herdr server mam starts inherits its environment, minus the enclosing pane's HERDR_*",
    "panes/herdr_config.py": "where herdr keeps its config (XDG_CONFIG_HOME, HERDR_CONFIG_DIR) by default",
    "panes/tmux.py": "where `tmux -L` finds its server: this process's TMUX_TMPDIR",
    "sessions/attach.py": "`mam session attach` runs tmux in the caller's terminal, with its environment",
    "util/launch.py": PANE_SIDE + " (the launcher keeps what the multiplexer told the pane: TMUX_PANE, ...)",
    "util/proc.py": "clean_path's default: this process's PATH without relative entries",
    "util/root.py": "the lean front end's workspace lookup (MAM_WORKSPACE) before settings are imported",
    "workspace.py": "find_workspace's default: this process's MAM_WORKSPACE",
}


def env_lines(path: Path) -> list[int]:
    """The lines of a file that read or change this process's environment (os.environ, os.getenv, ...)."""
    found = []
    for n in ast.walk(tree(path)):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "os":
            if n.attr in ENV_NAMES:
                found.append(n.lineno)
        elif isinstance(n, ast.ImportFrom) and n.module == "os" and {a.name for a in n.names} & ENV_NAMES:
            found.append(n.lineno)
    return sorted(found)


def reads_environ() -> set[str]:
    return {rel(p) for p in all_files() if rel(p) != "settings.py" and env_lines(p)}


def test_only_settings_and_the_named_files_read_the_environment() -> None:
    assert reads_environ() - set(ENVIRON_READERS) == set(), "read it through mam.settings, or take an environ="


def test_the_environ_allow_list_holds_only_what_is_still_there() -> None:
    assert set(ENVIRON_READERS) - reads_environ() == set()


def test_the_environ_check_can_fail(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nfrom os import getenv\nA = os.environ.get('X')\nB = os.getenv('Y')\n")
    assert env_lines(probe) == [2, 3, 4]


# -- one wake channel: no fixed-interval polling loop but the named ones ------------------------------------------

# A wait on something mam writes is woken by its writer's poke (mam/util/pokes.py: a job's row, its events, a
# session's turn, the hold, a free slot). What remains polls something that tells nobody when it changes, each
# named here ("file:function") with its reason. A polling loop: a sleep inside a loop, or a call of
# mam.util.poll.wait_for (the helper that polls with a deadline).
SCREEN = "a pane's screen: tmux and herdr tell nobody when it changes"
PROCESS = "another process's end or start (not a child of ours: no wait() for it)"
POLLING: dict[str, str] = {
    "agents/ready.py:wait_ready": SCREEN + " (the agent's ready screen)",
    "agents/codex_server.py:start_server": "codex's app-server socket appearing after its start (it pokes nobody)",
    "broker/embedded.py:_wait_port": "the embedded broker's TCP port starting to accept",
    "broker/embedded.py:_wait_gone": PROCESS + " (the embedded broker)",
    "node/client.py:stop": PROCESS + " (a node asked to stop: `mam node stop`, the demo's end, an idle node let go)",
    "demo/org.py:until": "the demo's narration of the org's tasks, read as the node's scheduler moves them",
    "hooks/prompt_watch.py:watch": SCREEN + " (a prompt the hooks said is up)",
    "hooks/store_watch.py:serve": "an agent CLI's own store (grok's events.jsonl, opencode.db, hermes' state.db): "
    "the CLI tells nobody when it writes, and has no hook mam can install without the user's files; and "
    + SCREEN
    + " (a prompt holding up a tool call its CLI records no permission request for)",
    "jobs/delivery.py:before_enter": SCREEN
    + " (a paste showing in the input box of a CLI that reads a fast Enter as a "
    "newline: gemini)",
    "jobs/intake.py:attach": "a subscription the broker refused, asked again after SUBSCRIBE_RETRY_S",
    "mcp/server.py:loop_start": PROCESS + " (the `mam loop` the tool started, until it says it has started)",
    "node/client.py:start": "the node's socket appearing after a start (no process to be poked by yet)",
    "notify.py:sender_main": "the back-off between a notification's tries",
    "panes/herdr.py:_start": PROCESS + " (a herdr server answering on its socket)",
    "panes/herdr.py:kill_server": PROCESS + " (a herdr server gone)",
    "panes/tmux.py:create_pane": PROCESS + " (a tmux server exiting as its last session closed)",
    "remote/dispatch.py:find_target": "a runner's presence (retained MQTT) after it said it is offline",
    "sessions/answer.py:_steady": SCREEN,
    "sessions/answer.py:_gone": SCREEN,
    "sessions/answer.py:_select": SCREEN,
    "sessions/create.py:discover": "an agent CLI's conversation file appearing on disk",
    "sessions/stop.py:exit_agent": "the pauses between the keys that make an agent exit (pacing, not a wait)",
    "sessions/stop.py:press": "the pauses a key sequence asks for (pacing, not a wait)",
    "util/flock.py:_try_until": "a file lock with a time limit (flock(2) has none; the holder pokes nobody)",
    "store/db.py:__init__": "the back-off while SQLite reports the registry locked as it opens",
    "usage/readers.py:_settle": "an agent CLI's usage file to stop growing",
    "util/poll.py:wait_for": "the helper itself",
    "util/proc.py:end_processes": PROCESS + " (an agent and its children after its pane closed, then each signal)",
    "web/serve.py:start": "the web server's port starting to accept",
}
SLEEPS = {"sleep"}  # time.sleep, anyio.sleep, asyncio.sleep, or a `sleep` passed in


def polling(path: Path) -> set[str]:
    """The functions of a file that poll: a sleep inside a loop, or a call of mam.util.poll's wait_for."""
    module = tree(path)
    helper = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "mam.util.poll"
        and any(a.name == "wait_for" and a.asname is None for a in n.names)
        for n in ast.walk(module)
    )
    found: set[str] = set()

    def visit(node: ast.AST, fn: str, in_loop: bool) -> None:
        for child in ast.iter_child_nodes(node):
            here, loop = fn, in_loop
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                here, loop = child.name, False
            elif isinstance(child, ast.While | ast.For | ast.AsyncFor):
                loop = True
            elif isinstance(child, ast.Call):
                name = child.func.attr if isinstance(child.func, ast.Attribute) else getattr(child.func, "id", "")
                if (name in SLEEPS and in_loop) or (helper and isinstance(child.func, ast.Name) and name == "wait_for"):
                    found.add(fn)
            visit(child, here, loop)

    visit(module, "", False)
    return found


def polls() -> set[str]:
    return {f"{rel(p)}:{fn}" for p in all_files() for fn in polling(p)}


def test_no_polling_loop_but_the_named_ones() -> None:
    assert polls() - set(POLLING) == set(), "wait on a poke (mam/util/pokes.py), or name it in POLLING"


def test_the_polling_list_holds_only_what_is_still_there() -> None:
    assert set(POLLING) - polls() == set()


def test_the_polling_check_can_fail(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import time\nfrom mam.util.poll import wait_for\n"
        "def spin(look):\n    while not look():\n        time.sleep(0.1)\n"
        "def helped(look):\n    return wait_for(look, timeout=1)\n"
        "def once():\n    time.sleep(1)\n"
    )
    assert polling(probe) == {"spin", "helped"}


# -- start-up: the bends are on the lean path only ---------------------------------------------------------------

# `TYPE_CHECKING = False` in place of typing's spares `import typing` (~5 ms) in the modules `mam event` and
# `mam job delegate` import (agents run `mam event` once per event): the lean front end and its client,
# and what the event's own operation imports when no node serves it (the emitter's wake channel, outcomes).
LEAN_PATH = {
    "node/client.py",
    "node/front.py",
    "node/live.py",
    "node/wire.py",
    "protocol.py",
    "outcomes.py",
    "util/fdwait.py",
    "util/pokefifo.py",
    "util/proc.py",
}


def bends(path: Path) -> bool:
    """Whether a file sets TYPE_CHECKING itself (`TYPE_CHECKING = False`) rather than importing typing's."""
    return any(
        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TYPE_CHECKING" for t in n.targets)
        for n in tree(path).body
    )


def test_start_up_bends_are_only_on_the_lean_path() -> None:
    assert {rel(p) for p in all_files() if bends(p)} == LEAN_PATH


def test_the_start_up_check_can_fail(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import sqlite3\n")
    assert bends(probe)
    probe.write_text("from typing import TYPE_CHECKING\n")
    assert not bends(probe)


# -- no function over 100 lines ------------------------------------------------------------------------------------

LONGEST = 100  # lines of a function, from its `def` to its last line (decorators not counted)


def long_functions(path: Path) -> list[str]:
    return [
        f"{n.name} ({n.end_lineno - n.lineno + 1} lines)"
        for n in ast.walk(tree(path))
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and (n.end_lineno or 0) - n.lineno + 1 > LONGEST
    ]


def test_no_function_is_over_100_lines() -> None:
    assert {rel(p): found for p in all_files() if (found := long_functions(p))} == {}


def test_the_function_length_check_can_fail(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def long():\n" + "    x = 1\n" * LONGEST + "def short():\n    pass\n")
    assert long_functions(probe) == [f"long ({LONGEST + 1} lines)"]


# -- every attempt runs in the node ----------------------------------------------------------------------------

# Who makes a JobAttempt, and who calls `delegate` (the function that makes a local job's attempt and runs it).
ATTEMPT_MAKERS = {
    "jobs/delegate.py": "delegate: a job's attempt, made and run",
    "remote/runner_job.py": "a remote job's attempt on its runner's host, in `mam node --name`",
}
DELEGATE_CALLERS = {"node/service.py"}  # Service.op_delegate: the node's (or, with no node, the caller's Service)


def makes(path: Path, name: str) -> bool:
    """Whether a file calls `name` (a function or class, called by that name)."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name for n in ast.walk(tree(path))
    )


def imports_delegate(path: Path) -> bool:
    return any(
        isinstance(n, ast.ImportFrom)
        and n.module == "mam.jobs.delegate"
        and any(a.name == "delegate" for a in n.names)
        or isinstance(n, ast.ImportFrom)
        and n.module == "mam.jobs"
        and any(a.name == "delegate" for a in n.names)
        or isinstance(n, ast.Import)
        and any(a.name == "mam.jobs.delegate" for a in n.names)
        for n in ast.walk(tree(path))
    )


def test_every_attempt_is_made_by_delegate_or_the_runner_and_delegate_runs_in_the_service() -> None:
    assert {rel(p) for p in all_files() if makes(p, "JobAttempt")} == set(ATTEMPT_MAKERS)
    assert {rel(p) for p in all_files() if imports_delegate(p)} == DELEGATE_CALLERS


def test_the_attempt_check_can_fail(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from mam.jobs.delegate import delegate\nfrom mam.jobs.attempt import JobAttempt\n"
        "def run(req):\n    return JobAttempt(req).run()\n"
    )
    assert makes(probe, "JobAttempt") and imports_delegate(probe)
