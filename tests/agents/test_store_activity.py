"""Activity read from a CLI's own store (the adapters' `read_activity`, mam.hooks.store_watch's folding),
on records shaped as the real programs wrote them (grok 0.2.111's events.jsonl, opencode 1.18.33's
`event` rows; tests/real proves them against the real programs)."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

from mam.agents import get_adapter
from mam.agents.base import Noted
from mam.hooks import session_state, store_watch
from mam.hooks.store_watch import WAIT_SETTLE_S, Watch, settle
from mam.settings import load_settings
from mam.store.registry import Registry
from mam.store.sessions import SessionRow, SessionStatus
from mam.workspace import Workspace
from tests.helpers.jobs import register_delivered

GROK_ID = "6c3b2711-c46d-441b-bfc9-effe78345df1"


def grok_events(home: Path, lines: list[dict[str, object]], tail: str = "") -> Path:
    folder = home / ".grok" / "sessions" / "%2Ftmp%2Frepo" / GROK_ID
    folder.mkdir(parents=True)
    path = folder / "events.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + tail, encoding="utf-8")
    return path


def test_grok_events_are_read_once_each_and_a_half_written_line_waits(tmp_path: Path) -> None:
    adapter, env, cursor = get_adapter("grok"), {"HOME": str(tmp_path)}, {}
    ts = "2026-12-06T10:48:18.463Z"
    path = grok_events(
        tmp_path,
        [
            {"ts": ts, "type": "turn_started", "session_id": GROK_ID},
            {"ts": ts, "type": "phase_changed", "phase": "tool_execution"},
            {"ts": ts, "type": "tool_started", "tool_name": "run_terminal_command"},
            {"ts": ts, "type": "permission_requested", "tool_name": "run_terminal_command"},
        ],
        tail='{"ts": "2026-12-06T10:48:19.000Z", "type": "permission_res',
    )
    first = adapter.read_activity(GROK_ID, cwd="/tmp/repo", env=env, cursor=cursor)
    assert [(n.state, n.source, n.tool) for n in first or []] == [
        ("working", "turn_started", ""),
        ("working", "tool_started", "run_terminal_command"),
        ("waiting", "permission_requested", "run_terminal_command"),
    ]
    assert first is not None and first[0].at == 1796554098.463
    with path.open("a", encoding="utf-8") as f:
        f.write('olved", "tool_name": "run_terminal_command"}\n')
        f.write(json.dumps({"ts": ts, "type": "turn_ended", "outcome": "completed"}) + "\n")
    second = adapter.read_activity(GROK_ID, cwd="/tmp/repo", env=env, cursor=cursor)
    assert [(n.state, n.source, n.turn_end) for n in second or []] == [
        ("working", "permission_resolved", False),
        ("idle", "turn_ended", True),
    ]
    assert second is not None and second[1].begun == first[0].at  # the turn began at its turn_started, read before
    assert adapter.read_activity(GROK_ID, cwd="/tmp/repo", env=env, cursor=cursor) == []


def test_grok_without_its_session_folder_yet_reads_nothing(tmp_path: Path) -> None:
    assert get_adapter("grok").read_activity(GROK_ID, cwd="/", env={"HOME": str(tmp_path)}, cursor={}) == []


def opencode_db(data_home: Path, rows: list[tuple[str, str, dict[str, object]]]) -> Path:
    db = data_home / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE event (id TEXT PRIMARY KEY, aggregate_id TEXT, seq INTEGER, type TEXT, data TEXT)")
    for seq, (session, kind, data) in enumerate(rows):
        conn.execute("INSERT INTO event VALUES (?, ?, ?, ?, ?)", (f"evt_{seq}", session, seq, kind, json.dumps(data)))
    conn.commit()
    conn.close()
    return db


def test_opencode_events_give_the_turn_its_tools_and_its_end(tmp_path: Path) -> None:
    sid = "ses_db5064623ffeysr0zLrMkAG5wt"
    user = {"id": "msg_u", "role": "user", "time": {"created": 1796554210241}}
    step = {"id": "msg_a", "role": "assistant", "finish": "tool-calls", "time": {"created": 1, "completed": 2}}
    end = {
        "id": "msg_b", "parentID": "msg_u", "role": "assistant", "finish": "stop",
        "time": {"created": 3, "completed": 1796554240000},
    }  # fmt: skip

    def tool(status: str, **times: int) -> dict[str, object]:
        state = {"status": status, "input": {"command": "touch x"}, "time": times}
        return {"part": {"id": "prt_1", "type": "tool", "tool": "bash", "state": state}}

    opencode_db(
        tmp_path,
        [
            (sid, "message.updated.1", {"info": user}),
            (sid, "message.updated.1", {"info": user}),  # updated again later (its summary): counted once
            (sid, "message.part.updated.1", tool("pending")),
            (sid, "message.part.updated.1", tool("running", start=1796554232003)),
            ("ses_other", "message.updated.1", {"info": {**end, "id": "msg_x"}}),
            (sid, "message.part.updated.1", tool("completed", start=1796554232003, end=1796554233000)),
            (sid, "message.updated.1", {"info": step}),  # a step that asked for tools: not the turn's end
            (sid, "message.updated.1", {"info": end}),
            (sid, "message.updated.1", {"info": end}),
        ],
    )
    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    cursor: dict[str, object] = {}
    got = get_adapter("opencode").read_activity(sid, cwd="/", env=env, cursor=cursor) or []
    assert [(n.state, n.source, n.tool, n.tool_open, n.turn_end) for n in got] == [
        ("working", "user-message", "", False, False),
        ("working", "tool-pending", "bash(touch x)", True, False),
        ("working", "tool-running", "bash(touch x)", True, False),
        ("working", "tool-completed", "bash(touch x)", False, False),
        ("idle", "assistant-finished", "", False, True),
    ]
    assert got[1].at == got[0].at == 1796554210.241  # a pending tool has no time: the record before it counts
    assert got[-1].at == 1796554240.0 and got[-1].begun == 1796554210.241  # the turn its user message began
    assert get_adapter("opencode").read_activity(sid, cwd="/", env=env, cursor=cursor) == []


def noted(state: str, at: float, *, turn_end: bool = False) -> Noted:
    return Noted(at, state, state, turn_end=turn_end)


def test_a_look_applies_every_turn_end_and_the_last_state_only() -> None:
    w = Watch(key=())
    w.pending = [noted("working", 1), noted("idle", 2, turn_end=True), noted("working", 3), noted("idle", 4)]
    assert [(n.state, n.at) for n in settle(w, now=10)] == [("idle", 2), ("idle", 4)]
    assert w.pending == []


def test_a_permission_request_counts_once_it_stays_unanswered() -> None:
    w = Watch(key=())
    w.pending = [noted("working", 1), noted("waiting", 9.5)]
    assert settle(w, now=9.5 + WAIT_SETTLE_S / 2) == []  # answered at once when an allow rule covers it
    assert [n.state for n in w.pending] == ["waiting"]
    w.pending.append(noted("working", 9.6))
    assert [n.state for n in settle(w, now=9.7)] == ["working"]  # it was: no wait shown
    w.pending = [noted("waiting", 20)]
    assert [n.state for n in settle(w, now=20 + WAIT_SETTLE_S)] == ["waiting"]


def test_hermes_messages_give_the_turn_its_tool_calls_and_its_end(tmp_path: Path) -> None:
    home = tmp_path / ".hermes"
    home.mkdir()
    conn = sqlite3.connect(home / "state.db")
    conn.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, role TEXT, content TEXT, "
        "tool_call_id TEXT, tool_calls TEXT, finish_reason TEXT, timestamp REAL)"
    )
    call = [
        {"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "rm -r x"}'}}
    ]
    sid = "20261206_111838_3a716d"
    for session, role, calls, at in [
        (sid, "user", None, 1.0),
        (sid, "assistant", json.dumps(call), 2.0),
        ("20261206_000000_other0", "assistant", None, 2.5),
        (sid, "tool", None, 3.0),
        (sid, "assistant", None, 4.0),
    ]:
        conn.execute(
            "INSERT INTO messages (session_id, role, tool_calls, timestamp) VALUES (?, ?, ?, ?)",
            (session, role, calls, at),
        )
    conn.commit()
    conn.close()
    env, cursor = {"HOME": str(tmp_path), "HERMES_HOME": str(home)}, {}
    got = get_adapter("hermes").read_activity(sid, cwd="/", env=env, cursor=cursor) or []
    assert [(n.at, n.state, n.source, n.tool, n.tool_open, n.turn_end) for n in got] == [
        (1.0, "working", "user-message", "", False, False),
        (2.0, "working", "assistant-tool-calls", "terminal(rm -r x)", True, False),
        (3.0, "working", "tool-result", "", False, False),
        (4.0, "idle", "assistant-final", "", False, True),
    ]
    assert got[-1].begun == 1.0  # the turn the last user message began
    assert get_adapter("hermes").read_activity(sid, cwd="/", env=env, cursor=cursor) == []


def watched_row(name: str, agent: str, conversation: str, env: dict[str, str], launched: float) -> SessionRow:
    """A running session of `agent` in pane %1, as the node's store watcher finds it in the registry."""
    return SessionRow(
        name=name,
        agent=agent,
        role="dev",
        backend="tmux",
        server="none",
        cwd="/tmp/repo",
        status=SessionStatus.RUNNING,
        pane_id="%1",
        conversation_id=conversation,
        agent_env=env,
        launched_at=launched,
    )


def test_a_watched_grok_session_gets_its_state_from_records_since_its_launch(tmp_path: Path) -> None:
    """mam.hooks.store_watch.step on a registered grok session: a record from before the launch (a resumed
    conversation's) is skipped, a later one lands in the session's activity file marked `via: store`."""
    ws = Workspace(tmp_path / "ws")
    ws.state.mkdir(parents=True)
    launched = 1796554100.0  # 10:48:20 UTC
    row = watched_row("gk", "grok", GROK_ID, {"HOME": str(tmp_path)}, launched)
    registry = Registry(ws)
    registry.add_session(row)
    registry.close()
    path = grok_events(tmp_path, [{"ts": "2026-12-06T10:48:00.000Z", "type": "turn_ended"}])  # before the launch
    watch, settings = store_watch.Watch(key=(launched, "%1")), load_settings(env_file=ws.env_file)
    store_watch.step(ws, settings, row, get_adapter("grok"), watch)
    assert session_state.read(ws, "gk") == {} and watch.state == ""
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"ts": "2026-12-06T10:48:30.000Z", "type": "turn_started"}) + "\n")
        f.write(json.dumps({"ts": "2026-12-06T10:48:31.000Z", "type": "turn_ended"}) + "\n")
    store_watch.step(ws, settings, row, get_adapter("grok"), watch)
    seen = session_state.read(ws, "gk")
    assert (seen["state"], seen["source"], seen["via"], seen["job"]) == ("idle", "turn_ended", "store", ""), seen
    assert seen.get("turn_end_at") == seen["at"]


def test_with_no_session_to_watch_the_registry_is_opened_again_only_once_it_changed(
    tmp_path: Path, monkeypatch, poll
) -> None:
    """An idle node of demo (or Claude, codex) sessions: the watcher's step is a stat of the registry's files,
    and it looks (opening the registry) again only once they changed."""
    ws = Workspace(tmp_path / "ws")
    ws.state.mkdir(parents=True)
    registry = Registry(ws)
    registry.add_session(SessionRow(name="d1", agent="demo", role="dev", backend="tmux", server="none", cwd="/"))
    stamps, looks = [], []
    stamp = store_watch._registry_stamp
    monkeypatch.setattr(store_watch, "IDLE_STEP_S", 0.005)  # nothing is watched: the idle step
    monkeypatch.setattr(store_watch, "_registry_stamp", lambda w: stamps.append(1) or stamp(w))
    monkeypatch.setattr(store_watch, "look", lambda w, s, watches: looks.append(1))
    stop = threading.Event()
    thread = threading.Thread(target=store_watch.serve, args=(ws, load_settings(env_file=ws.env_file), stop))
    thread.start()
    try:
        poll(lambda: len(stamps) >= 40, timeout=20)
        assert len(looks) == 1  # the first step, then none while nothing changed
        registry.add_session(SessionRow(name="d2", agent="demo", role="dev", backend="tmux", server="none", cwd="/"))
        poll(lambda: len(looks) == 2, timeout=20)
        counted = len(stamps)
        poll(lambda: len(stamps) >= counted + 40, timeout=20)
        assert len(looks) == 2
    finally:
        stop.set()
        thread.join(10)
        registry.close()


def test_an_opencode_turn_begun_before_the_jobs_claim_is_not_the_jobs_turn_end(tmp_path: Path) -> None:
    """As a loop's reviewer saw it with the real opencode on a loaded machine: the job ahead ended on its
    `completed` while opencode still wrote that turn's closing reply, the next brief was handed over, and
    opencode wrote the earlier turn's end after the new job's claim. That end is not the new job's (no
    reminder for a turn the job never had); the end of the turn its own brief began is."""
    ws = Workspace(tmp_path / "ws")
    ws.state.mkdir(parents=True)
    registry = Registry(ws)
    ledger = register_delivered(ws, registry, topic_prefix="mam-test")
    claimed = int(ledger.job.claimed_ms or 0)
    sid = "ses_db5064623ffeysr0zLrMkAG5wt"
    before = {"id": "msg_u1", "role": "user", "time": {"created": claimed - 60_000}}  # the earlier job's brief
    late_end = {  # that turn's closing reply: begun before the claim, written after it
        "id": "msg_a1", "parentID": "msg_u1", "role": "assistant", "finish": "stop",
        "time": {"created": claimed - 2_000, "completed": claimed + 3_000},
    }  # fmt: skip
    db = opencode_db(tmp_path, [(sid, "message.updated.1", {"info": before})])
    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    row = watched_row("worker", "opencode", sid, env, (claimed - 120_000) / 1000)
    registry.add_session(row)
    watch, settings = store_watch.Watch(key=(row.launched_at, "%1")), load_settings(env_file=ws.env_file)
    adapter = get_adapter("opencode")

    def write(*infos: dict[str, object]) -> None:
        conn = sqlite3.connect(db)
        seq = conn.execute("SELECT max(seq) FROM event").fetchone()[0]
        for i, info in enumerate(infos, start=seq + 1):
            conn.execute(
                "INSERT INTO event VALUES (?, ?, ?, ?, ?)",
                (f"evt_{i}", sid, i, "message.updated.1", json.dumps({"info": info})),
            )
        conn.commit()
        conn.close()

    store_watch.step(ws, settings, row, adapter, watch)
    write({"id": "msg_u2", "role": "user", "time": {"created": claimed + 400}}, late_end)
    store_watch.step(ws, settings, row, adapter, watch)
    seen = session_state.read(ws, "worker")
    assert (seen["state"], seen["source"], seen["job"]) == ("idle", "assistant-finished", ""), seen
    own_end = {
        "id": "msg_a2", "parentID": "msg_u2", "role": "assistant", "finish": "stop",
        "time": {"created": claimed + 3_100, "completed": claimed + 5_000},
    }  # fmt: skip
    write(own_end)
    store_watch.step(ws, settings, row, adapter, watch)
    seen = session_state.read(ws, "worker")
    assert (seen["state"], seen["source"], seen["job"]) == ("idle", "assistant-finished", ledger.job.id), seen
    registry.close()
