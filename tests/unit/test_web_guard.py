"""The page's logins and guard (mam/web/auth.py), without a server: a login link works once and not for long,
a login ends after its TTL or with all the others, and no header of any bytes makes a request an error."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mam.util.throttle import Throttle
from mam.web.auth import LINK_TTL_S, Guard, Logins

PORT = 8770
HOST = f"127.0.0.1:{PORT}".encode()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def logins(clock: Clock, ttl_s: float = 3600.0) -> Logins:
    return Logins("the-bearer-token-0123456789", PORT, secure=False, ttl_s=ttl_s, clock=clock)


def test_a_link_works_once_and_only_for_a_short_while() -> None:
    clock = Clock()
    table = logins(clock)
    code = table.code()
    made = table.redeem(code.encode())
    assert made is not None and table.redeem(code.encode()) is None  # once
    late = table.code()
    clock.now += LINK_TTL_S + 1
    assert table.redeem(late.encode()) is None  # short-lived
    assert table.redeem(b"") is None and table.redeem(b"\xe9") is None


def test_logins_are_random_each_and_end_after_their_ttl_or_all_at_once() -> None:
    clock = Clock()
    table = logins(clock, ttl_s=60)
    (c1, s1), (c2, s2) = (
        (table.redeem(table.code().encode()) or ("", "")),
        (table.redeem(table.code().encode()) or ("", "")),
    )
    assert len({c1, c2, s1, s2}) == 4 and all(len(v) >= 40 for v in (c1, c2, s1, s2))
    assert table.find(c1.encode()) is not None and table.find(c1.encode()).secret == s1.encode()  # type: ignore[union-attr]
    clock.now += 61
    assert table.find(c1.encode()) is None
    c3, _s3 = table.redeem(table.code().encode()) or ("", "")
    unused = table.code()
    assert table.end_all() == 1
    assert table.find(c3.encode()) is None and table.redeem(unused.encode()) is None


def test_the_cookie_is_read_as_bytes_whatever_they_are() -> None:
    table = logins(Clock())
    name = f"mam_web_{PORT}".encode()
    assert table.cookie_of(b"a=1; " + name + b"=abc; b=2") == b"abc"
    assert table.cookie_of(name + b'="\\351"') == b"\\351"
    assert table.cookie_of(name + b"=\xe9\xff") == b"\xe9\xff"
    assert table.cookie_of(b"mam_web_1=abc") is None and table.cookie_of(b"") is None


async def _app(_scope: Any, _receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


def request(guard: Guard, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes = b"") -> int:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "headers": headers, "query_string": b""}
    asyncio.run(guard(scope, receive, send))
    return int(sent[0]["status"])


def guard(table: Logins) -> Guard:
    return Guard(_app, table, frozenset({HOST.decode()}), "http")


def test_the_cookie_alone_or_with_another_logins_secret_opens_nothing() -> None:
    table = logins(Clock())
    g = guard(table)
    cookie, secret = table.redeem(table.code().encode()) or ("", "")
    _other_cookie, other_secret = table.redeem(table.code().encode()) or ("", "")
    jar = (b"cookie", f"mam_web_{PORT}={cookie}".encode())
    for path, method in (("/api/state", "GET"), ("/api/events", "GET"), ("/api/job/j/cancel", "POST")):
        assert request(g, method, path, [(b"host", HOST), jar]) == 401
        assert request(g, method, path, [(b"host", HOST), jar, (b"x-mam-login", other_secret.encode())]) == 401
        assert request(g, method, path, [(b"host", HOST), (b"x-mam-login", secret.encode())]) == 401
        assert request(g, method, path, [(b"host", HOST), jar, (b"x-mam-login", secret.encode())]) == 200
    bearer = (b"authorization", b"Bearer the-bearer-token-0123456789")
    assert request(g, "GET", "/api/state", [(b"host", HOST), bearer]) == 200
    assert request(g, "POST", "/api/job/j/cancel", [(b"host", HOST), bearer]) == 401  # a bearer only reads
    login = json.dumps({"code": table.code()}).encode()
    assert request(g, "POST", "/login", [(b"host", HOST), (b"origin", b"http://evil.example")], login) == 401
    assert request(g, "POST", "/login", [(b"host", HOST), (b"origin", b"http://" + HOST)], login) == 200


NAMES = st.sampled_from([b"host", b"cookie", b"x-mam-login", b"authorization", b"origin", b"content-type", b"x-y"])
HEADERS = st.lists(st.tuples(NAMES, st.binary(max_size=80)), max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    headers=HEADERS,
    method=st.sampled_from(["GET", "POST", "HEAD", "PUT"]),
    path=st.sampled_from(["/", "/login", "/api/state", "/api/events", "/api/job/j/cancel", "/x"]),
    body=st.binary(max_size=64),
)
def test_no_header_of_any_bytes_makes_an_error(headers, method, path, body) -> None:  # type: ignore[no-untyped-def]
    table = logins(Clock())
    status = request(guard(table), method, path, [(b"host", HOST), *headers], body)
    assert status in (200, 400, 401, 403, 421)


def test_the_issues_header_is_a_401_and_a_flood_of_refusals_is_one_line(caplog) -> None:  # type: ignore[no-untyped-def]
    table = logins(Clock())
    g = guard(table)
    caplog.set_level(logging.INFO)
    for _ in range(500):
        assert request(g, "GET", "/api/state", [(b"host", HOST), (b"cookie", b'mam_web_8770="\\351"')]) == 401
        assert request(g, "GET", "/api/state", [(b"host", HOST), (b"cookie", f"mam_web_{PORT}=\xe9".encode())]) == 401
    assert len(caplog.records) == 0


def test_the_throttle_lets_one_line_of_a_kind_through_a_minute_and_counts_the_rest() -> None:
    clock = Clock()
    throttle = Throttle(every_s=60, clock=clock)
    logger = logging.getLogger("mam.test.throttle")
    records = [logger.makeRecord(logger.name, logging.WARNING, "f", 1, "refused: %s", ("x",), None) for _ in range(5)]
    assert [throttle.filter(r) for r in records[:4]] == [True, False, False, False]
    clock.now += 61
    assert throttle.filter(records[4]) and "and 3 more like it" in records[4].getMessage()
