"""`mam web` over plain HTTP: who gets in, what a change needs, and that the page's state is the CLI's."""

from __future__ import annotations

import http.client
import json
import os
import socket
import stat

import pytest

from mam.util.poll import Timeout, wait_for
from tests.helpers.brokers import free_port
from tests.helpers.mamcli import mam, mam_json
from tests.web.conftest import WebServer, job_state, start_web


def login(web: WebServer) -> tuple[str, str]:
    """(the Cookie header the login link sets, the page's CSRF token)."""
    status, headers, _ = web.request(web.login.split(web.base, 1)[1])
    assert status == 303, status
    cookie = headers["set-cookie"].split(";", 1)[0]
    status, _h, body = web.request("/", headers={"Cookie": cookie})
    assert status == 200
    page = body.decode()
    csrf = page.split('name="mam-csrf" content="', 1)[1].split('"', 1)[0]
    return cookie, csrf


def first_events(web: WebServer, cookie: str, kinds: int = 1) -> str:
    """The event stream's text up to its `kinds`-th event."""
    conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=30)
    try:
        conn.request("GET", "/api/events", headers={"Host": f"127.0.0.1:{web.port}", "Cookie": cookie})
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("content-type", "").startswith("text/event-stream")
        text = ""
        while text.count("\n\n") < kinds:
            text += resp.fp.readline().decode()
        return text
    finally:
        conn.close()


def test_without_the_token_401_and_no_data(web):  # type: ignore[no-untyped-def]
    for path in ("/", "/api/state", "/api/events", "/api/sessions/busy/screen", "/app.js"):
        status, headers, body = web.request(path)
        assert status == 401, path
        assert b"busy" not in body and b"quiet" not in body
    status, _h, body = web.request("/api/state", headers={"Authorization": "Bearer not-the-token-at-all"})
    assert status == 401 and b"busy" not in body
    status, headers, _ = web.request("/login?token=not-the-token-at-all")
    assert status == 401 and "set-cookie" not in headers
    status, _h, _ = web.request("/api/state", headers={"Cookie": f"mam_web_{web.port}=forged"})
    assert status == 401


def test_a_rebinding_host_is_refused(web):  # type: ignore[no-untyped-def]
    bearer = {"Authorization": f"Bearer {web.token}"}
    for host in ("evil.example", f"evil.example:{web.port}", "127.0.0.1:1", ""):
        status, _h, body = web.request("/api/state", headers={**bearer, "Host": host})
        assert status == 421, host
        assert b"busy" not in body
    status, headers, _ = web.request(web.login.split(web.base, 1)[1], headers={"Host": f"evil.example:{web.port}"})
    assert status == 421 and "set-cookie" not in headers
    assert web.request("/api/state", headers={**bearer, "Host": f"localhost:{web.port}"})[0] == 200


def test_the_link_sets_a_strict_httponly_cookie_and_drops_the_token(web):  # type: ignore[no-untyped-def]
    status, headers, _ = web.request(web.login.split(web.base, 1)[1])
    assert status == 303 and headers["location"] == "/"
    attrs = [a.strip() for a in headers["set-cookie"].split(";")]
    assert "HttpOnly" in attrs and "SameSite=Strict" in attrs and "Path=/" in attrs
    assert web.token not in headers["set-cookie"]
    cookie, csrf = login(web)
    status, _h, body = web.request("/api/state", headers={"Cookie": cookie})
    assert status == 200 and [s["name"] for s in json.loads(body)["sessions"]] == ["busy", "quiet", "gone"]
    assert web.token not in body.decode() and web.token not in csrf


def test_a_change_needs_the_cookie_and_the_csrf_token(web, delegate):  # type: ignore[no-untyped-def]
    job = delegate("busy", "job-web-csrf")
    cookie, csrf = login(web)
    path = f"/api/job/{job}/cancel"
    origin = {"Origin": web.base}
    refused = [
        {"Authorization": f"Bearer {web.token}", "X-CSRF-Token": csrf},  # a bearer is not the page's cookie
        {"Cookie": cookie},  # no CSRF token
        {"Cookie": cookie, "X-CSRF-Token": "0" * 64},  # a wrong one
        {"Cookie": cookie, "X-CSRF-Token": csrf, "Origin": "http://evil.example"},  # from another site
    ]
    for headers in refused:
        status, _h, body = web.request(path, method="POST", headers={**origin, **headers})
        assert status == 403, (headers.keys(), body)
    assert job_state(job) == "running"
    status, _h, body = web.request(path, method="POST", headers={**origin, "Cookie": cookie, "X-CSRF-Token": csrf})
    assert status == 200, body
    result = json.loads(body)["result"]
    assert result["state"] == "cancelled"
    cli = mam_json("job", "status", job)
    assert cli["state"] == "cancelled" and cli["reason"] == result["reason"]
    # Again: it already ended, as `mam job cancel` says (exit 1), with nothing changed.
    status, _h, body = web.request(path, method="POST", headers={"Cookie": cookie, "X-CSRF-Token": csrf})
    assert status == 409 and json.loads(body)["exit_code"] == mam("job", "cancel", job).returncode == 1
    page = {"Cookie": cookie, "X-CSRF-Token": csrf}
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
    cookie, csrf = login(web)
    seen = [web.request(p, headers={"Cookie": cookie})[2].decode() for p in ("/", "/app.js", "/app.css", "/api/state")]
    seen.append(first_events(web, cookie, kinds=3))
    stderr = web.stop()
    assert "event: state" in seen[-1]
    for text in [*seen, stderr]:
        assert web.token not in text
    assert web.token not in stderr and "token=" not in stderr


def test_the_recent_screen_is_read_only_text(web):  # type: ignore[no-untyped-def]
    cookie, _csrf = login(web)
    text = wait_for(
        lambda: (
            (r := web.request("/api/sessions/busy/screen", headers={"Cookie": cookie}))[0] == 200
            and "demo agent ready" in json.loads(r[2])["screen"]
            and json.loads(r[2])["screen"]
        ),
        timeout=30,
        message="busy's screen",
    )
    assert not any(ord(c) < 32 and c not in "\n\t" for c in text)
    status, _h, body = web.request("/api/sessions/nobody/screen", headers={"Cookie": cookie})
    assert status == 404 and json.loads(body)["exit_code"] == 5
    status, _h, _ = web.request("/api/sessions/bad%20name;rm/screen", headers={"Cookie": cookie})
    assert status == 400
    assert web.request("/api/sessions/busy/screen", method="POST", headers={"Cookie": cookie})[0] == 403


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
    again = start_web()  # asked again: the same address, the same node
    assert again.login == server.login and node_status()["pid"] == status["pid"]
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
            conn.request("GET", f"/login?token={server.token}", headers={"Host": f"127.0.0.1:{server.port}"})
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 303
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
