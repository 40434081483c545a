"""`mam web` over plain HTTP: who gets in, what a change needs, and that the page's state is the CLI's."""

from __future__ import annotations

import http.client
import json
import os
import socket
import stat
from pathlib import Path

import pytest

from mam.util.poll import Timeout, wait_for
from tests.helpers.brokers import free_port
from tests.helpers.mamcli import mam, mam_json
from tests.web.conftest import WebServer, code_of, job_state, start_web

API_ROUTES = [
    ("GET", "/api/state"),
    ("GET", "/api/events"),
    ("GET", "/api/sessions/busy/screen"),
    ("POST", "/api/job/job-web-nosuch01/cancel"),
    ("POST", "/api/job/job-web-nosuch01/pause"),
    ("POST", "/api/workspace/all/pause"),
    ("POST", "/api/loop/loop-20261202-000000-abcdef/approve"),
    ("POST", "/api/session/busy/allow"),
]
SHELL = ("/", "/login", "/app.js", "/app.css")


def first_events(web: WebServer, headers: dict[str, str], kinds: int = 1) -> str:
    """The event stream's text up to its `kinds`-th event."""
    conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=30)
    try:
        conn.request("GET", "/api/events", headers={"Host": f"127.0.0.1:{web.port}", **headers})
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("content-type", "").startswith("text/event-stream")
        text = ""
        while text.count("\n\n") < kinds:
            text += resp.fp.readline().decode()
        return text
    finally:
        conn.close()


def test_without_a_login_401_and_no_data(web):  # type: ignore[no-untyped-def]
    """The shell is the same for everyone and holds nothing of the workspace; every other route is 401."""
    page = web.log_in()
    for path in SHELL:
        status, _h, body = web.request(path)
        assert status == 200, path
        assert body == web.request(path, headers=page)[2]  # the same bytes, logged in or not
        assert b"busy" not in body and b"gone" not in body and web.token.encode() not in body
    for method, path in API_ROUTES:
        status, _h, body = web.request(path, method=method)
        assert status == 401, path
        assert b"busy" not in body and b"quiet" not in body
    status, _h, body = web.request("/api/state", headers={"Authorization": "Bearer not-the-token-at-all"})
    assert status == 401 and b"busy" not in body
    status, headers, _ = web.request("/login", method="POST", body=json.dumps({"code": "not-a-code"}))
    assert status == 401 and "set-cookie" not in headers
    status, headers, _ = web.request(f"/login?token={web.token}")  # the token is no login link
    assert "set-cookie" not in headers
    status, _h, _ = web.request("/api/state", headers={"Cookie": f"mam_web_{web.port}=forged", "X-Mam-Login": "x"})
    assert status == 401


def test_a_rebinding_host_is_refused(web):  # type: ignore[no-untyped-def]
    bearer = {"Authorization": f"Bearer {web.token}"}
    for host in ("evil.example", f"evil.example:{web.port}", "127.0.0.1:1", ""):
        status, _h, body = web.request("/api/state", headers={**bearer, "Host": host})
        assert status == 421, host
        assert b"busy" not in body
    status, headers, _ = web.request(
        "/login", method="POST", headers={"Host": f"evil.example:{web.port}"}, body=json.dumps({"code": web.code})
    )
    assert status == 421 and "set-cookie" not in headers
    assert web.request("/api/state", headers={**bearer, "Host": f"localhost:{web.port}"})[0] == 200
    web.log_in()  # the code was not used up by the refused request


def test_a_login_link_works_once_and_sets_a_strict_httponly_cookie(web):  # type: ignore[no-untyped-def]
    body = json.dumps({"code": web.code})
    status, headers, answer = web.request("/login", method="POST", headers={"Origin": web.base}, body=body)
    assert status == 200
    attrs = [a.strip() for a in headers["set-cookie"].split(";")]
    assert {"HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"} <= set(attrs)
    secret = json.loads(answer)["secret"]
    assert web.token not in headers["set-cookie"] and web.token not in secret and web.code not in headers["set-cookie"]
    page = {"Cookie": headers["set-cookie"].split(";", 1)[0], "X-Mam-Login": secret}
    status, _h, state = web.request("/api/state", headers=page)
    assert status == 200 and [s["name"] for s in json.loads(state)["sessions"]] == ["busy", "quiet", "gone"]
    # The same link again: refused, no cookie. Another link (mam web asked again) logs in anew.
    status, headers, again = web.request("/login", method="POST", headers={"Origin": web.base}, body=body)
    assert status == 401 and "set-cookie" not in headers and b"used already" in again
    other = web.log_in(web.new_link())
    assert other["Cookie"] != page["Cookie"] and other["X-Mam-Login"] != secret  # random per login
    assert web.request("/api/state", headers=other)[0] == 200
    # A link from another site's page (its Origin) logs nobody in.
    foreign = web.new_link()
    status, headers, _ = web.request(
        "/login", method="POST", headers={"Origin": "http://evil.example"}, body=json.dumps({"code": code_of(foreign)})
    )
    assert status == 401 and "set-cookie" not in headers


def test_the_cookie_without_its_logins_secret_gets_401_on_every_route(web):  # type: ignore[no-untyped-def]
    """What another local user's server on another port receives from the browser is the cookie: alone, with a
    made-up secret, or with another login's secret, it opens nothing, the event stream included."""
    page = web.log_in()
    other = web.log_in(web.new_link())
    tries = [
        {"Cookie": page["Cookie"]},
        {"Cookie": page["Cookie"], "X-Mam-Login": ""},
        {"Cookie": page["Cookie"], "X-Mam-Login": "0" * 43},
        {"Cookie": page["Cookie"], "X-Mam-Login": other["X-Mam-Login"]},
        {"X-Mam-Login": page["X-Mam-Login"]},
    ]
    for headers in tries:
        for method, path in API_ROUTES:
            status, _h, body = web.request(path, method=method, headers={"Origin": web.base, **headers})
            assert status == 401, (headers.keys(), path, status)
            assert b"busy" not in body
    assert "event: state" in first_events(web, page)  # with its secret, the same cookie reads the stream


@pytest.mark.slow  # about 12-25 s: started among the first, not last (tests/conftest.py)
def test_a_login_expires_and_logout_all_ends_every_one(workspace):  # type: ignore[no-untyped-def]
    server = start_web(env={"MAM_WEB_LOGIN_TTL_S": "3"})
    try:
        first = server.log_in()
        assert server.request("/api/state", headers=first)[0] == 200
        wait_for(lambda: server.request("/api/state", headers=first)[0] == 401, timeout=15, message="the login ended")
    finally:
        server.stop()
    wait_for(lambda: not node_status()["running"], timeout=30, message="the idle node ended")
    server = start_web()
    try:
        logins = [server.log_in(), server.log_in(server.new_link())]
        unused = server.new_link()
        assert all(server.request("/api/state", headers=h)[0] == 200 for h in logins)
        out = mam("web", "--logout-all", check=True).stdout
        assert out.startswith(f"mam web: ended 2 login(s) to {server.base}/"), out
        assert all(server.request("/api/state", headers=h)[0] == 401 for h in logins)
        status, _h, _ = server.request("/login", method="POST", body=json.dumps({"code": code_of(unused)}))
        assert status == 401
        assert server.request("/api/state", headers=server.log_in(server.new_link()))[0] == 200
    finally:
        server.stop()
    assert "serves no page" in mam("web", "--logout-all", check=True).stdout


def test_a_change_needs_the_login_and_the_pages_origin(web, delegate):  # type: ignore[no-untyped-def]
    job = delegate("busy", "job-web-csrf")
    page = web.log_in()
    path = f"/api/job/{job}/cancel"
    origin = {"Origin": web.base}
    refused = [
        ({"Authorization": f"Bearer {web.token}"}, 401),  # a bearer reads, never changes
        ({"Cookie": page["Cookie"]}, 401),  # no secret
        ({"Cookie": page["Cookie"], "X-Mam-Login": "0" * 43}, 401),  # a wrong one
        ({**page, "Origin": "http://evil.example"}, 403),  # from another site
    ]
    for headers, code in refused:
        status, _h, body = web.request(path, method="POST", headers={**origin, **headers})
        assert status == code, (headers.keys(), body)
    assert job_state(job) == "running"
    status, _h, body = web.request(path, method="POST", headers={**origin, **page})
    assert status == 200, body
    result = json.loads(body)["result"]
    assert result["state"] == "cancelled"
    cli = mam_json("job", "status", job)
    assert cli["state"] == "cancelled" and cli["reason"] == result["reason"]
    # Again: it already ended, as `mam job cancel` says (exit 1), with nothing changed.
    status, _h, body = web.request(path, method="POST", headers=page)
    assert status == 409 and json.loads(body)["exit_code"] == mam("job", "cancel", job).returncode == 1
    status, _h, body = web.request("/api/job/job-no-such-0001/cancel", method="POST", headers=page)
    assert status == 404 and json.loads(body)["exit_code"] == 5


def _same_moment(web: WebServer) -> tuple[dict, list, dict]:  # type: ignore[type-arg]
    """/api/state, `mam status --json` and each open job's `mam job status --json`, read again
    until the state did not change around the CLI's reads."""
    for _ in range(20):
        before = web.state()
        sessions = mam_json("status")
        jobs = {j["id"]: mam_json("job", "status", j["id"]) for j in before["jobs"]}
        after = web.state()
        if _comparable(before) == _comparable(after):
            return after, sessions, jobs
    raise AssertionError("the state never held still around the CLI's reads")


def _comparable(state: dict) -> tuple:  # type: ignore[type-arg]
    return (
        [(s["name"], s["status"], s["state"], s["job"]) for s in state["sessions"]],
        [(j["id"], j["state"], j["session"]) for j in state["jobs"]],
    )


def test_the_state_equals_mam_status_and_mam_job_status(web, delegate):  # type: ignore[no-untyped-def]
    job = delegate("busy", "job-web-same")
    state, sessions, jobs = _same_moment(web)
    assert [(s["name"], s["agent"], s["role"], s["status"]) for s in state["sessions"]] == [
        (r["name"], r["agent"], r["role"], r["status"]) for r in sessions
    ]
    assert [j["id"] for j in state["jobs"]] == [job]
    for j in state["jobs"]:
        cli = jobs[j["id"]]
        assert (j["state"], j["session"], j["created_ms"]) == (cli["state"], cli["target"], cli["created_ms"])
    by_name = {s["name"]: s for s in state["sessions"]}
    assert by_name["busy"]["job"] == job and by_name["busy"]["state"] == "working"
    assert by_name["quiet"]["state"] == "idle" and by_name["gone"]["state"] == "stopped"


def test_no_secret_in_the_page_the_events_or_the_log(web, delegate):  # type: ignore[no-untyped-def]
    delegate("busy", "job-web-secret")
    page = web.log_in()
    seen = [web.request(p, headers=page)[2].decode() for p in ("/", "/app.js", "/app.css", "/api/state")]
    seen.append(first_events(web, page, kinds=3))
    stderr = web.stop()
    assert "event: state" in seen[-1]
    for text in [*seen, stderr]:
        assert web.token not in text and page["X-Mam-Login"] not in text and web.code not in text
    assert "code=" not in stderr


def test_the_recent_screen_is_read_only_text(web):  # type: ignore[no-untyped-def]
    page = web.log_in()
    text = wait_for(
        lambda: (
            (r := web.request("/api/sessions/busy/screen", headers=page))[0] == 200
            and "demo agent ready" in json.loads(r[2])["screen"]
            and json.loads(r[2])["screen"]
        ),
        timeout=30,
        message="busy's screen",
    )
    assert not any(ord(c) < 32 and c not in "\n\t" for c in text)
    status, _h, body = web.request("/api/sessions/nobody/screen", headers=page)
    assert status == 404 and json.loads(body)["exit_code"] == 5
    status, _h, _ = web.request("/api/sessions/bad%20name;rm/screen", headers=page)
    assert status == 400
    assert web.request("/api/sessions/busy/screen", method="POST", headers=page)[0] == 404  # no such action


def test_the_token_file_is_made_0600_and_the_setting_wins(workspace):  # type: ignore[no-untyped-def]
    server = start_web()
    try:
        path = workspace.state / "web-token"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert server.token == path.read_text().strip()
    finally:
        server.stop()
    given = "a-web-token-of-the-users-own-choosing"
    server = start_web(env={"MAM_WEB_TOKEN": given})
    try:
        assert server.token == given
        assert any("MAM_WEB_TOKEN" in line for line in server.out)
        assert server.request("/api/state", headers={"Authorization": f"Bearer {given}"})[0] == 200
    finally:
        server.stop()


def test_bad_addresses_exit_2_and_write_nothing(workspace):  # type: ignore[no-untyped-def]
    cases = [
        (["--host", "192.0.2.1"], "needs TLS"),
        (["--host", "0.0.0.0"], "not a wildcard"),
        (["--host", "::"], "not a wildcard"),
        (["--host", "0"], "not a wildcard"),  # issue 39, item 8: these listened on every interface
        (["--host", "::ffff:0.0.0.0"], "not a wildcard"),
        (["--host", "0x0"], "not a wildcard"),
        (["--tls-cert", "/etc/hostname"], "go together"),
    ]
    for args, says in cases:
        proc = mam("web", *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert says in proc.stderr and proc.stderr.count("\n") == 1
    assert not (workspace.state / "web-token").exists()
    assert not workspace.state.exists() or os.listdir(workspace.state) == []


def test_in_the_foreground_ctrl_c_ends_it(workspace):  # type: ignore[no-untyped-def]
    server = start_web("--foreground")
    assert server.request("/api/state", headers={"Authorization": f"Bearer {server.token}"})[0] == 200
    assert mam("node", "status").returncode == 5  # no node was started for it
    server.stop()  # SIGINT, then a kill (-9) only if it has not ended 20 s later
    assert server.proc.returncode in (0, 130), server.proc.returncode


def node_status() -> dict:  # type: ignore[type-arg]
    return json.loads(mam("node", "status", "--json").stdout)  # type: ignore[no-any-return]


@pytest.mark.slow  # about 12-25 s: started among the first, not last (tests/conftest.py)
def test_the_node_serves_it_until_mam_web_stop_and_says_where(workspace):  # type: ignore[no-untyped-def]
    """`mam web` returns once the node serves; the node (started on demand, no tmux server, no job)
    stays while it serves, names the address in its status, and ends on its own once it stops."""
    server = start_web()
    status = node_status()
    assert status["running"] and status["autostarted"] and status["web"]["url"] == f"{server.base}/"
    assert server.token not in json.dumps(status)
    assert any(f"pid {status['pid']}" in line for line in server.out)
    # An idle autostarted node ends within its 2 s check; serving the page, it stays.
    with pytest.raises(Timeout):
        wait_for(lambda: not node_status()["running"], timeout=8, interval=0.5, message="the node ended")
    assert server.request("/api/state", headers={"Authorization": f"Bearer {server.token}"})[0] == 200
    again = start_web()  # asked again: the same address, the same node, a new link
    assert again.base == server.base and again.login != server.login and node_status()["pid"] == status["pid"]
    other = mam("web", "--port", str(free_port()))
    assert other.returncode == 2 and "serves the page at" in other.stderr and "mam web --stop" in other.stderr
    server.stop()
    wait_for(lambda: not node_status()["running"], timeout=30, message="the idle node ended")
    with pytest.raises(ConnectionError):
        server.request("/api/state")
    assert mam("web", "--stop").stdout.startswith("mam web: the workspace's node serves no page")


def test_a_port_in_use_exits_2_from_the_node(workspace):  # type: ignore[no-untyped-def]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        proc = mam("web", "--port", str(taken.getsockname()[1]))
    assert proc.returncode == 2 and "cannot serve on" in proc.stderr, proc.stderr
    assert node_status().get("web") is None


def test_tls_serves_https_and_marks_the_cookie_secure(workspace, tmp_path):  # type: ignore[no-untyped-def]
    import ssl

    from tests.helpers.secure_broker import make_pki

    pki = make_pki(tmp_path / "pki")
    server = start_web("--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key))
    try:
        assert server.base.startswith("https://127.0.0.1:")
        context = ssl.create_default_context(cafile=str(pki.ca))
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=30, context=context)
        try:
            conn.request(
                "POST", "/login", body=json.dumps({"code": server.code}), headers={"Host": f"127.0.0.1:{server.port}"}
            )
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200
            attrs = [a.strip() for a in resp.getheader("set-cookie", "").split(";")]
            assert "Secure" in attrs and "HttpOnly" in attrs and "SameSite=Strict" in attrs
        finally:
            conn.close()
        plain = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:  # no clear-text answer on the TLS port
            plain.request("GET", "/api/state", headers={"Authorization": f"Bearer {server.token}"})
            assert plain.getresponse().status != 200
        except (http.client.HTTPException, OSError):
            pass
        finally:
            plain.close()
    finally:
        server.stop()


def raw_status(port: int, head: bytes) -> int:
    """The status of a request sent as these very bytes (0: the connection was closed without an answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head)
        answer = b""
        while b"\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                return 0
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def test_any_header_value_gets_a_4xx_and_no_traceback_in_the_log(web):  # type: ignore[no-untyped-def]
    """Issue 39, item 2: `Cookie: mam_web_P="\\351"` made each request a 500 with a 1.1 KB traceback in the
    node's log. Now any bytes in any header: a 4xx, and no more than a throttled line."""
    host = f"Host: 127.0.0.1:{web.port}\r\n".encode()
    values = [
        f'mam_web_{web.port}="\\351"'.encode(),
        f"mam_web_{web.port}=".encode() + bytes(range(0x80, 0x100)),
        b"\xe9\xff",
        b"a\x01\x7fb",
        b"x" * 4000,
    ]
    heads = [
        b"GET /api/state HTTP/1.1\r\n" + host + b"Cookie: " + v + b"\r\nX-Mam-Login: " + v + b"\r\n"
        b"Authorization: Bearer " + v + b"\r\nConnection: close\r\n\r\n"
        for v in values
    ]
    heads.append(
        b"POST /login HTTP/1.1\r\n"
        + host
        + b'Origin: \xe9\r\nContent-Length: 12\r\nConnection: close\r\n\r\n{"code":"\xe9"}'
    )
    before = len(node_log_bytes())
    for _ in range(125):
        for head in heads:
            assert raw_status(web.port, head) in (400, 401, 403), head[:60]
    grown = node_log_bytes()[before:]
    assert len(grown) < 600 and b"Traceback" not in grown, grown[:600]


def node_log_bytes() -> bytes:
    path = Path(os.environ["MAM_WORKSPACE"]) / ".mam" / "run" / "node.log"
    return path.read_bytes() if path.exists() else b""
