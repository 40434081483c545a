"""Routines' pure parts (mam/routines): durations, cron in a zone, due ticks, catch-up, concurrency, the
webhook's signature check, and the idempotency key that now takes ':'."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from mam.errors import UsageError
from mam.jobs.attach import check_key
from mam.routines import decide as rules
from mam.routines.schedule import Cron, Every, due, iso, parse_duration
from mam.routines.webhook import check, signature


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("10m", 600), ("2h", 7200), ("1d", 86400), (" 5m ", 300)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "m", "1.5h", "-1m", "0s", "400d", "10 minutes", "1h30m"])
def test_bad_durations_are_refused(text):
    with pytest.raises(UsageError):
        parse_duration(text)


def test_every_ticks_from_its_anchor_whatever_asks():
    e = Every(2, 100.0)
    assert [e.after(t) for t in (50.0, 100.0, 101.9, 102.0)] == [100.0, 102.0, 102.0, 104.0]


def test_cron_in_a_zone_follows_its_wall_clock():
    c = Cron.parse("*/15 9-17 * * 1-5", "Europe/Paris")
    t = at("2025-12-05T16:50:00")  # a Friday, 17:50 in Paris: the next is Monday 09:00 Paris (08:00 UTC)
    assert iso(c.after(t)) == "2025-12-08T08:00:00Z"
    summer = Cron.parse("0 9 * * *", "Europe/Paris")
    assert iso(summer.after(at("2025-07-01T00:00:00"))) == "2025-07-01T07:00:00Z"


def ticks(c: Cron, start: str, n: int) -> list[str]:
    t, out = at(start), []
    for _ in range(n):
        t = c.after(t)
        out.append(iso(t))
    return out


def test_cron_skips_a_time_the_zone_skips_and_fires_a_repeated_one_once():
    daily = Cron.parse("30 2 * * *", "Europe/Paris")
    # 2026-03-29 02:30 does not exist in Paris; 2026-10-25 02:30 happens twice: fired once.
    assert ticks(daily, "2026-03-28T12:00:00", 2) == ["2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"]
    assert ticks(daily, "2026-10-24T12:00:00", 2) == ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]


def test_cron_day_fields_match_either_when_both_are_restricted():
    c = Cron.parse("0 0 1 * 1", "UTC")  # the 1st of a month, or a Monday
    assert [d[:10] for d in ticks(c, "2025-12-01T00:00:00", 3)] == ["2025-12-08", "2025-12-15", "2025-12-22"]
    assert iso(c.after(at("2025-12-29T00:00:00"))) == "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    "expr",
    [
        "* * * *",
        "60 * * * *",
        "* 24 * * *",
        "* * 0 * *",
        "* * * 13 *",
        "* * * * 8",
        "5-1 * * * *",
        "*/0 * * * *",
        "a * * * *",
    ],
)
def test_bad_cron_is_refused(expr):
    with pytest.raises(UsageError):
        Cron.parse(expr)


def test_a_dst_gap_skips_fixed_times_in_it_and_a_clock_following_schedule_jumps_it():
    """New York springs forward at 2026-03-08 02:00 (EST, UTC-5) to 03:00 (EDT, UTC-4)."""
    fixed = Cron.parse("15 2 * * *", "America/New_York")
    assert ticks(fixed, "2026-03-07T12:00:00", 2) == ["2026-03-09T06:15:00Z", "2026-03-10T06:15:00Z"]
    quarter = Cron.parse("*/30 * * * *", "America/New_York")  # 01:30 EST, then 03:00 EDT: an hour later
    assert ticks(quarter, "2026-03-08T06:20:00", 2) == ["2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z"]


def test_a_dst_fold_fires_a_fixed_time_once_and_a_clock_following_schedule_in_both_hours():
    """New York falls back at 2026-11-01 02:00 (EDT) to 01:00 (EST): 01:xx happens twice."""
    fixed = Cron.parse("30 1 * * *", "America/New_York")
    assert ticks(fixed, "2026-10-31T12:00:00", 2) == ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]
    hourly = Cron.parse("30 * * * *", "America/New_York")  # 01:30 EDT and 01:30 EST, an hour apart
    assert ticks(hourly, "2026-11-01T05:00:00", 3) == [
        "2026-11-01T05:30:00Z",
        "2026-11-01T06:30:00Z",
        "2026-11-01T07:30:00Z",
    ]


def test_day_of_month_with_day_of_week_matches_both_when_one_starts_with_a_star():
    c = Cron.parse("0 12 */2 * 5", "UTC")  # odd days that are Fridays (a field starting with * makes it AND)
    assert [d[:10] for d in ticks(c, "2026-01-01T00:00:00", 3)] == ["2026-01-09", "2026-01-23", "2026-02-13"]
    named = Cron.parse("0 12 13 * fri", "UTC")  # the 13th, or any Friday (names are accepted)
    assert [d[:10] for d in ticks(named, "2026-02-11T00:00:00", 3)] == ["2026-02-13", "2026-02-20", "2026-02-27"]


@pytest.mark.parametrize("expr", ["0 0 L * *", "0 0 LW * *", "0 0 15W * *", "0 0 * * 5L", "0 0 * * 5#2", "0 0 ? * 1"])
def test_cron_extensions_l_w_hash_and_question_mark_are_refused_clearly(expr):
    with pytest.raises(UsageError, match="L, W, # and \\? .* are not supported"):
        Cron.parse(expr)


def test_an_unknown_zone_is_refused():
    with pytest.raises(UsageError, match="time zone"):
        Cron.parse("0 0 * * *", "Mars/Olympus")


def test_due_ticks_keep_the_last_ones_and_count_the_rest():
    d = due(Every(10, 0.0), 10.0, 1000.0, limit=3)
    assert (d.ticks, d.dropped, d.following) == ([980.0, 990.0, 1000.0], 97, 1010.0)
    c = due(Cron.parse("* * * * *"), 60.0, 60.0 * 10 + 5, limit=100)
    assert (len(c.ticks), c.dropped, c.following) == (10, 0, 660.0)


def plan(ticks, now, catch_up, paused=False):
    d = due(Every(10, 0.0), ticks[0], ticks[-1], limit=100)
    return [
        (t.at, t.fire, t.reason) for t in rules.plan_schedule(d, now, period_s=10, catch_up=catch_up, paused=paused)
    ]


def test_on_time_ticks_fire_and_missed_ones_follow_the_catch_up_policy():
    assert plan([10.0], 10.0, "skip") == [(10.0, True, "")]
    # The node was down from 10 to 55: 10..50 were missed (50 is 5 s late: past the grace of a 10 s period).
    missed = [10.0, 20.0, 30.0, 40.0, 50.0]
    assert plan(missed, 55.1, "skip") == [(t, False, "missed") for t in missed]
    assert [t for t, fire, _ in plan(missed, 55.1, "once") if fire] == [50.0]
    assert [t for t, fire, _ in plan(missed, 55.1, "all:2") if fire] == [10.0, 20.0]
    # Back at a tick's time: it fires as usual, the earlier ones were missed.
    assert plan(missed, 50.0, "skip")[-1] == (50.0, True, "")
    assert all(reason == "paused" and not fire for _, fire, reason in plan(missed, 50.0, "all:3", paused=True))


@pytest.mark.parametrize("text", ["all:0", "all:101", "all", "some", "all:x", "once:2"])
def test_bad_catch_up_is_refused(text):
    with pytest.raises(UsageError):
        rules.check_catch_up(text)


def v(**kw):
    base = {"paused": False, "hold": "", "concurrency": "skip", "open_job": "", "newer_pending": False}
    out = rules.verdict(**{**base, **kw})
    return out.action, out.reason


def test_what_a_pending_tick_becomes():
    assert v() == ("fire", "")
    assert v(paused=True, hold="h") == ("skip", "paused")
    assert v(hold="mam pause --all") == ("skip", "hold")
    assert v(open_job="j") == ("skip", "active")
    assert v(concurrency="coalesce", open_job="j") == ("wait", "active")
    assert v(concurrency="coalesce", newer_pending=True) == ("skip", "active")
    assert v(concurrency="queue", open_job="j") == ("fire", "")
    assert v(open_job="j", catching_up=True) == ("wait", "missed")
    assert v(concurrency="coalesce", newer_pending=True, catching_up=True) == ("fire", "")
    assert v(concurrency="queue", open_job="j", catching_up=True) == ("fire", "")


SECRET = "s" * 64


def signed(body: bytes, *, stamp: str = "1000", delivery: str = "d-1", secret: str = SECRET) -> dict[str, str]:
    return {
        "x-mam-timestamp": stamp,
        "x-mam-delivery": delivery,
        "x-mam-signature": signature(secret, stamp, delivery, body),
    }


def test_a_signed_fresh_delivery_passes_with_its_text():
    body = json.dumps({"text": "deploy 1.2 is out"}).encode()
    got = check(SECRET, signed(body), body, now=1100.0)
    assert got.ok and got.text == "deploy 1.2 is out"
    assert check(SECRET, signed(b""), b"", now=1000.0).ok


def test_forged_stale_or_malformed_deliveries_are_refused():
    body = b'{"text": "x"}'
    assert check(SECRET, signed(body, secret="t" * 64), body, now=1000.0).reason == "bad_signature"
    assert check(SECRET, signed(body), b'{"text": "y"}', now=1000.0).reason == "bad_signature"
    headers = signed(body)
    headers["x-mam-delivery"] = "d-2"  # the id is signed: a replay under a new id does not pass
    assert check(SECRET, headers, body, now=1000.0).reason == "bad_signature"
    assert check(SECRET, signed(body), body, now=1000.0 + 301).reason == "stale_timestamp"
    assert check(SECRET, signed(body), body, now=1000.0 - 301).reason == "stale_timestamp"
    assert check(SECRET, {}, body, now=1000.0).reason == "unsigned"
    assert check(SECRET, signed(body, delivery="../x"), body, now=1000.0).reason == "bad_delivery_id"
    assert check(SECRET, signed(b"[1]"), b"[1]", now=1000.0).reason == "not_json"
    esc = json.dumps({"text": "a\x1b[2Jb"}).encode()
    assert check(SECRET, signed(esc), esc, now=1000.0).reason == "bad_text"
    assert check("", signed(body), body, now=1000.0).reason == "no_webhook"


def test_idempotency_keys_take_colons_and_nothing_else_new():
    assert check_key("routine:nightly:2026-12-02T03:00:00Z") == "routine:nightly:2026-12-02T03:00:00Z"
    for bad in (":x", "a b", "a/b", "x" * 129, "a\nb"):
        with pytest.raises(UsageError):
            check_key(bad)
