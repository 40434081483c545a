"""Issue 39, items 2, 3 and 9: what an unauthenticated sender gets from a routine's webhook and what it costs the
routine. The node's real endpoint (mam.routines.webhook.Endpoint) on loopback over HTTP, its registry in a temp
workspace; no agent: a fired tick's receipt is written as the scheduler writes it."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import time
from collections.abc import Iterator

import pytest

from mam.routines.manage import Spec, add, log
from mam.routines.webhook import Endpoint, signature
from mam.store import routines as table
from mam.store.registry import Registry
from mam.workspace import Workspace


@pytest.fixture
def hooked(workspace: Workspace) -> Iterator[tuple[Registry, Endpoint, dict]]:  # type: ignore[type-arg]
    registry = Registry(workspace)
    out = add(registry, Spec(name="hook", target="w", brief="on a push", on_webhook=True))
    add(registry, Spec(name="plain", target="w", brief="no hook here", every="1h"))
    endpoint = Endpoint(registry, clock=time.time, on_tick=lambda: None)
    assert endpoint.start()
    try:
        yield registry, endpoint, out
    finally:
        endpoint.stop()
        registry.close()


def post(port: int, path: str, headers: dict[str, str], body: bytes = b"{}") -> tuple[int, dict]:  # type: ignore[type-arg]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def raw_post(port: int, path: str, header_lines: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(
            b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n" + header_lines + b"\r\n{}"
        )
        answer = s.recv(4096)
    return int(answer.split(b" ", 2)[1]) if answer else 0


def test_a_routine_that_does_not_exist_gets_the_same_answer_as_one_that_does(hooked):  # type: ignore[no-untyped-def]
    """Item 9: before its signature checks, a delivery learns nothing, not even whether the routine exists."""
    _registry, endpoint, _out = hooked
    stamp = str(int(time.time()))
    attempts = [
        {},
        {"X-Mam-Timestamp": stamp, "X-Mam-Delivery": "d-1"},
        {"X-Mam-Timestamp": stamp, "X-Mam-Delivery": "d-1", "X-Mam-Signature": "sha256=" + "0" * 64},
        {"X-Mam-Timestamp": stamp, "X-Mam-Delivery": "../x", "X-Mam-Signature": "sha256=00"},
    ]
    for headers in attempts:
        answers = {name: post(endpoint.port, f"/routine/{name}", headers) for name in ("hook", "plain", "nope", "b@d")}
        assert set(map(json.dumps, answers.values())) == {
            json.dumps([401, {"accepted": False, "reason": "unauthorized"}])
        }, answers


def test_a_non_ascii_signature_is_a_401_not_a_traceback(hooked, caplog):  # type: ignore[no-untyped-def]
    """Item 2: `X-Mam-Signature: \\351` made compare_digest raise in the handler (a traceback in the node's log)."""
    _registry, endpoint, _out = hooked
    caplog.set_level(logging.INFO)
    stamp = str(int(time.time())).encode()
    for n in range(200):
        head = b"X-Mam-Timestamp: " + stamp + b"\r\nX-Mam-Delivery: d-%d\r\nX-Mam-Signature: \xe9\xff\r\n" % n
        assert raw_post(endpoint.port, "/routine/hook", head) == 401
        assert raw_post(endpoint.port, "/routine/hook", b"X-Mam-Timestamp: \xe9\r\nX-Mam-Delivery: \xe9\r\n") == 401
    assert "Traceback" not in caplog.text and "failed" not in caplog.text
    assert len([r for r in caplog.records if r.name == "mam.routines.webhook"]) <= 2


def test_a_flood_of_refusals_never_evicts_the_receipt_of_a_tick_that_fired(hooked, caplog):  # type: ignore[no-untyped-def]
    """Item 3: 1,010 unsigned POSTs pushed the fired tick's receipt out of the routine's 1,000 kept receipts."""
    registry, endpoint, out = hooked
    caplog.set_level(logging.INFO)
    now = time.time()
    with registry.write() as conn:
        n = table.add_tick(
            conn, routine="hook", key="routine:hook:hook:0123", trigger="webhook", scheduled=now, now=now
        )
        assert n is not None
        table.set_tick(
            conn, n, status=table.DONE, job_id=f"rt-{n}-hook", outcome="completed", fired_at=now, ended_at=now
        )
    stamp = str(int(now))
    forged = {
        "X-Mam-Timestamp": stamp,
        "X-Mam-Delivery": "d-x",
        "X-Mam-Signature": signature("0" * 64, stamp, "d-x", b"{}"),
    }
    for i in range(1010):
        assert post(endpoint.port, "/routine/hook", {} if i % 2 else forged)[0] == 401
    endpoint.flush(force=True)
    receipts = log(registry, "hook", limit=5000)
    assert [r["job"] for r in receipts if r["job"]] == [f"rt-{n}-hook"]  # the fired tick's receipt is kept
    refused = [r for r in receipts if r["status"] == "refused"]
    assert len(refused) <= 2 and "1009 webhook deliveries refused" in refused[0]["detail"], refused
    lines = [r.getMessage() for r in caplog.records if r.name == "mam.routines.webhook"]
    assert len(lines) <= 2 and any("1009" in line for line in lines), lines
    assert out["secret"] not in caplog.text


def test_refused_receipts_are_pruned_apart_from_the_ticks(workspace):  # type: ignore[no-untyped-def]
    registry = Registry(workspace)
    try:
        add(registry, Spec(name="hook", target="w", brief="on a push", on_webhook=True))
        with registry.write() as conn:
            fired = table.add_tick(conn, routine="hook", key="k-fired", trigger="webhook", scheduled=1.0, now=1.0)
            table.set_tick(conn, fired or 0, status=table.DONE, job_id="rt-1-hook")
            for i in range(table.KEEP_REFUSED + table.KEEP_TICKS + 5):
                table.add_tick(
                    conn, routine="hook", key=f"k-{i}", trigger="webhook", scheduled=2.0, now=2.0, status=table.REFUSED
                )
            rows = table.ticks(conn, "hook", limit=10_000)
        assert len([r for r in rows if r.status == table.REFUSED]) == table.KEEP_REFUSED
        assert [r.job_id for r in rows if r.job_id] == ["rt-1-hook"]
    finally:
        registry.close()


def test_closed_from_another_thread_the_port_is_free_at_once_and_stays_closed(hooked):  # type: ignore[no-untyped-def]
    """The ending node closes the port from its own thread, whatever the routines thread is doing (a routine's
    job may run in it); the routines thread's next step starts nothing again."""
    import threading

    _registry, endpoint, _out = hooked
    port = endpoint.port
    closer = threading.Thread(target=endpoint.close)
    closer.start()
    closer.join(30)
    assert not closer.is_alive()
    with socket.socket() as taker:
        taker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taker.bind(("127.0.0.1", port))  # free the moment close() returns
    endpoint._next_try = 0.0  # a retry would be due now
    endpoint.keep_serving()
    assert endpoint.server is None
