"""FleetTable (mam.remote.fleet): presence messages, as runners sign them, folded into one row per node."""

from __future__ import annotations

import json

from mam.bus.envelope import Envelope
from mam.remote.fleet import MAX_LISTED, SILENCE_S, FleetTable, presence

SECRET = "fleet-secret"
T0 = 1_700_000_000_000
SILENCE_MS = int(SILENCE_S * 1000)


def msg(
    kind: str = "online", *, name: str = "gpu-1", life: int = T0, ts: int = T0, by: str = "", **kw: object
) -> bytes:
    fields: dict[str, object] = {
        "host": "box-a",
        "pid": 4242,
        "workspace": "/w/a",
        "sessions": [("d1", "running"), ("d2", "stopped")],
        "jobs": ["job-1"],
    }
    fields.update(kw)
    return presence(kind, name=name, secret=SECRET, since_ms=life, by=by, ts=ts, **fields)  # type: ignore[arg-type]


def row(table: FleetTable, now: int, name: str = "gpu-1") -> dict[str, object]:
    return next(r.as_dict() for r in table.rows(now) if r.name == name)


def test_an_online_node_is_a_row_with_every_field_named():
    t = FleetTable(SECRET)
    assert t.feed(msg(), retained=False, now_ms=T0 + 5)
    r = row(t, T0 + 1000)
    assert r == {
        "name": "gpu-1",
        "host": "box-a",
        "state": "online",
        "since_ms": T0,
        "last_seen_ms": T0 + 5,
        "sessions": [{"name": "d1", "state": "running"}, {"name": "d2", "state": "stopped"}],
        "jobs": ["job-1"],
        "offline_by": None,
        "pid": 4242,
        "workspace": "/w/a",
    }
    json.dumps(r)  # plain JSON, as the node's socket and --json send it


def test_the_body_keeps_the_running_names_an_origin_checks_before_dispatching():
    body = Envelope.decode(msg(sessions=[("d1", "running"), ("d2", "stopped"), ("d3", "starting")])).body
    assert body["sessions"] == ["d1", "d3"]
    assert body["session_states"][1] == {"name": "d2", "state": "stopped"}


def test_a_goodbye_makes_it_offline_since_its_own_time():
    t = FleetTable(SECRET)
    t.feed(msg(), retained=False, now_ms=T0)
    t.feed(msg("offline", by="goodbye", ts=T0 + 3000, jobs=[]), retained=False, now_ms=T0 + 3010)
    r = row(t, T0 + 4000)
    assert (r["state"], r["offline_by"], r["since_ms"], r["jobs"]) == ("offline", "goodbye", T0 + 3000, [])


def test_a_live_will_makes_it_offline_since_it_arrived_and_keeps_what_was_seen_since_it_connected():
    t = FleetTable(SECRET)
    t.feed(msg(jobs=["job-1", "job-2"]), retained=False, now_ms=T0 + 100)
    will = msg("offline", by="will", ts=T0, jobs=[])  # built when the node connected
    t.feed(will, retained=False, now_ms=T0 + 5000)  # within the silence window: it was online until now
    r = row(t, T0 + 5001)
    assert (r["state"], r["offline_by"], r["since_ms"]) == ("offline", "will", T0 + 5000)
    assert r["jobs"] == ["job-1", "job-2"] and r["last_seen_ms"] == T0 + 100


def test_a_node_not_heard_for_the_silence_window_reads_offline_and_online_again_when_heard():
    t = FleetTable(SECRET)
    t.feed(msg(), retained=False, now_ms=T0)
    assert row(t, T0 + SILENCE_MS)["state"] == "online"
    r = row(t, T0 + SILENCE_MS + 1)
    assert (r["state"], r["offline_by"], r["since_ms"]) == ("offline", "silence", T0)
    t.feed(msg(ts=T0 + 30_000), retained=False, now_ms=T0 + 30_000)
    r = row(t, T0 + 30_001)
    assert (r["state"], r["offline_by"], r["since_ms"]) == ("online", None, T0 + 30_000)


def test_a_will_after_silence_keeps_it_offline_since_it_was_last_heard():
    t = FleetTable(SECRET)
    t.feed(msg(), retained=False, now_ms=T0)
    t.feed(msg("offline", by="will"), retained=False, now_ms=T0 + 25_000)
    r = row(t, T0 + 25_001)
    assert (r["state"], r["offline_by"], r["since_ms"]) == ("offline", "will", T0)


def test_a_late_will_of_an_earlier_life_never_hides_the_restarted_node():
    t = FleetTable(SECRET)
    t.feed(msg(life=T0, ts=T0), retained=False, now_ms=T0)
    t.feed(msg(life=T0 + 50_000, ts=T0 + 50_000, pid=4343), retained=False, now_ms=T0 + 50_000)
    t.feed(msg("offline", by="will", life=T0, ts=T0), retained=False, now_ms=T0 + 51_000)  # the old process's
    r = row(t, T0 + 52_000)
    assert (r["state"], r["pid"], r["since_ms"]) == ("online", 4343, T0 + 50_000)


def test_back_online_after_a_will_of_the_same_life_a_reconnect():
    t = FleetTable(SECRET)
    t.feed(msg(), retained=False, now_ms=T0)
    t.feed(msg("offline", by="will"), retained=False, now_ms=T0 + 5000)
    t.feed(msg(ts=T0 + 9000), retained=False, now_ms=T0 + 9000)
    r = row(t, T0 + 9001)
    assert (r["state"], r["since_ms"], r["last_seen_ms"]) == ("online", T0 + 9000, T0 + 9000)


def test_an_announcement_older_than_the_goodbye_changes_nothing():
    t = FleetTable(SECRET)
    t.feed(msg("offline", by="goodbye", ts=T0 + 5000), retained=False, now_ms=T0 + 5000)
    t.feed(msg(ts=T0 + 4000), retained=True, now_ms=T0 + 6000)
    assert row(t, T0 + 6000)["state"] == "offline"


def test_a_will_read_retained_with_nothing_known_says_offline_since_unknown():
    t = FleetTable(SECRET)
    t.feed(msg("offline", by="will", ts=T0), retained=True, now_ms=T0 + 3_600_000)
    r = row(t, T0 + 3_600_000)
    assert (r["state"], r["offline_by"], r["since_ms"], r["last_seen_ms"]) == ("offline", "will", None, None)


def test_a_retained_online_is_as_old_as_it_says_so_a_stale_one_reads_offline_at_once():
    t = FleetTable(SECRET)
    t.feed(msg(ts=T0), retained=True, now_ms=T0 + 60_000)  # left behind: its will never came
    r = row(t, T0 + 60_000)
    assert (r["state"], r["offline_by"], r["last_seen_ms"]) == ("offline", "silence", T0)
    t2 = FleetTable(SECRET)
    t2.feed(msg(ts=T0 + 5000), retained=True, now_ms=T0)  # a clock ahead of ours: never later than now
    assert row(t2, T0)["last_seen_ms"] == T0


def test_unsigned_foreign_and_malformed_messages_are_not_folded():
    t = FleetTable(SECRET)
    assert not t.feed(presence("online", name="x", secret="other", since_ms=T0, host="h", pid=1, workspace="w",
                               sessions=[], jobs=[]), retained=False)  # fmt: skip
    assert not t.feed(b"", retained=True)
    assert not t.feed(b"{not json", retained=False)
    board = Envelope(kind="board", job="b", seq=0, type="set", sender="x", ts=T0).signed(SECRET).encode()
    assert not t.feed(board, retained=False)
    assert t.rows(T0) == []


def test_a_runner_of_an_older_mam_lists_its_running_sessions_by_name():
    legacy = Envelope(
        kind="presence", job="old", seq=0, type="online", sender="runner", ts=T0,
        body={"runner": "old", "host": "h", "pid": 7, "workspace": "/w", "sessions": ["d1"]},
    ).signed(SECRET).encode()  # fmt: skip
    t = FleetTable(SECRET)
    assert t.feed(legacy, retained=False, now_ms=T0)
    r = row(t, T0, "old")
    assert (r["state"], r["since_ms"], r["sessions"], r["jobs"]) == (
        "online",
        T0,
        [{"name": "d1", "state": "running"}],
        [],
    )


def test_a_presence_lists_at_most_max_listed_sessions_and_jobs_and_fits_a_message():
    many = msg(sessions=[(f"s{i:04d}", "running") for i in range(5000)], jobs=[f"job-{i:020d}" for i in range(5000)])
    body = Envelope.decode(many).body  # decodes: under the 64 KiB cap of an event-sized message
    assert len(body["session_states"]) == len(body["jobs"]) == MAX_LISTED


def test_rows_are_by_name_and_copies():
    t = FleetTable(SECRET)
    for name in ("zeta", "alpha"):
        t.feed(msg(name=name), retained=False, now_ms=T0)
    rows = t.rows(T0)
    assert [r.name for r in rows] == ["alpha", "zeta"]
    rows[0].jobs.append("mutated")
    assert t.rows(T0)[0].jobs == ["job-1"]


def test_a_presence_on_another_nodes_topic_is_not_folded() -> None:
    """Issue 39, item 10: a node's signed presence replayed by a broker user on another node's topic."""

    body = {"runner": "near", "host": "h", "pid": 1, "workspace": "/w", "since": 1, "sessions": []}
    env = Envelope(kind="presence", job="near", seq=0, type="online", sender="runner", ts=5, body=body)
    payload = env.signed("k" * 32).encode()
    table = FleetTable("k" * 32)
    assert not table.feed(payload, retained=True, now_ms=10, topic="mam/runners/ghost/presence")
    assert table.rows(now_ms=10) == []
    assert table.feed(payload, retained=True, now_ms=10, topic="mam/runners/near/presence")
    assert [r.name for r in table.rows(now_ms=10)] == ["near"]
