"""`mam mcp --http`: Streamable HTTP behind a bearer token, driven by the SDK's HTTP client."""

from __future__ import annotations

import json
import os
import ssl
import stat
import subprocess

import anyio
import httpx2
import pytest

from mam.jobs.record import read_audit
from mam.mcp.token import server_token
from mam.settings import load_settings
from mam.util.poll import wait_for
from tests.e2e.test_node import node_pid, owner_pid
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import MAM
from tests.mcp.client import call, http_server, http_session, job_state
from tests.mcp.test_stdio import TOOLS

TOKEN = "test-token-0123456789abcdef"
CREATE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "session_create", "arguments": {"agent": "demo", "role": "dev", "name": "intruder"}},
}
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.parametrize("auth", [None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x"])
def test_without_the_bearer_token_every_request_is_401_and_no_tool_runs(mcp_ws, auth):
    with http_server(mcp_ws.root, TOKEN) as server:
        headers = {**HEADERS, **({"Authorization": auth} if auth else {})}
        for body in ({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}, CREATE):
            r = httpx2.post(server.url, headers=headers, content=json.dumps(body), timeout=30)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            assert TOKEN not in r.text
        r = httpx2.get(server.url, headers=headers, timeout=30)
        assert r.status_code == 401
    assert not (mcp_ws.state / "agent-sessions.db").exists()  # session_create never ran


def test_with_the_token_the_tools_work_and_two_clients_waiting_on_one_job_both_see_it_end(mcp_ws):
    create_demo("w")

    async def main(url: str) -> str:
        async with http_session(url, TOKEN) as a, http_session(url, TOKEN) as b:
            assert {t.name for t in (await a.list_tools()).tools} == TOOLS  # the same list as over stdio
            sent = await call(a, "job_delegate", target="w", brief="demo-sleep: 3", heartbeat_s=2, start_deadline_s=30)
            assert not sent.error, sent.text
            job_id = sent.data["id"]
            results: dict[str, object] = {}

            async def wait(name: str, session) -> None:
                results[name] = await call(session, "job_wait", progress=True, id=job_id, timeout_s=60)

            async def leave_mid_wait() -> None:
                # A third client gives up mid-wait and disconnects; the job goes on, untouched.
                async with http_session(url, TOKEN) as c:
                    with anyio.move_on_after(0.5):
                        await call(c, "job_wait", id=job_id, timeout_s=60)

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait, "a", a)
                tg.start_soon(wait, "b", b)
                tg.start_soon(leave_mid_wait)
            for name in ("a", "b"):
                r = results[name]
                assert not r.error and r.data["state"] == "completed" and r.data["exit_code"] == 0, r
                assert r.progress and r.progress[-1].startswith("completed")
            return job_id

    with http_server(mcp_ws.root, TOKEN) as server:
        job_id = anyio.run(main, server.url)
    audit = read_audit(mcp_ws, job_id)
    assert [line["kind"] for line in audit].count("created") == 1
    # No waiting client took it over: only the node, following its own job once job_delegate had its answer.
    takers = {str(line["owner"]).split(":")[1] for line in audit if line["kind"] in ("taken_over", "followed")}
    assert takers <= {str(node_pid(mcp_ws))} and owner_pid(mcp_ws, job_id) == node_pid(mcp_ws)


def test_the_token_is_generated_once_into_a_0600_file(workspace):
    settings = load_settings(env_file=workspace.env_file)
    token, source = server_token(workspace, settings)
    path = workspace.state / "mcp-token"
    assert source == str(path) and len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert server_token(workspace, settings)[0] == token
    os.chmod(path, 0o644)
    with pytest.raises(Exception, match="readable by you only"):
        server_token(workspace, settings)
    assert (
        server_token(workspace, settings.with_overrides(MAM_MCP_TOKEN="from-env-0123456789"))[0]
        == "from-env-0123456789"
    )


@pytest.mark.parametrize("node", [True, False], ids=["node", "no-node"])
def test_a_stopped_http_server_hands_its_open_jobs_over(mcp_ws, node):
    """Its job runs on in the node that owns it; with no node, the server drove it and hands it over."""
    create_demo("w")

    async def main(url: str) -> str:
        async with http_session(url, TOKEN) as a:
            sent = await call(
                a,
                "job_delegate",
                target="w",
                brief="demo-sleep: 3\ndemo-write: late.txt :: ok",
                heartbeat_s=2,
                start_deadline_s=30,
            )
            assert not sent.error, sent.text
            return sent.data["id"]

    with http_server(mcp_ws.root, TOKEN, env=None if node else {"MAM_NODE": "0"}) as server:
        job_id = anyio.run(main, server.url)
        server.stop()  # SIGTERM while the job runs
        assert server.proc.returncode == 0
        handed = "handed to `mam job delegate --job-id`" in server.log.read_text()
        assert handed is not node
    wait_for(
        lambda: job_state(job_id) == "completed",
        timeout=60,
        message="the job did not complete after the server stopped",
    )
    assert (mcp_ws.root / "late.txt").read_text() == "ok\n"
    if node:
        assert owner_pid(mcp_ws, job_id) == node_pid(mcp_ws)
    else:
        assert node_pid(mcp_ws) == 0
        assert "taken_over" in [line["kind"] for line in read_audit(mcp_ws, job_id)]


def test_a_non_loopback_host_without_tls_is_refused_with_exit_2_and_nothing_listens(mcp_ws):
    """Issue 25, item 13: `mam mcp --http` served plain HTTP on any address after a warning."""
    from tests.mcp.client import free_port, port_accepts

    port = free_port()
    for extra in (["--host", "0.0.0.0"], ["--host", "192.0.2.7"], ["--host", "0.0.0.0", "--tls-cert", "x.pem"]):
        proc = subprocess.run(
            [MAM, "mcp", "--workspace", str(mcp_ws.root), "--http", "--port", str(port), *extra],
            env={**os.environ, "MAM_MCP_TOKEN": TOKEN},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, (extra, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "--tls-" in proc.stderr, proc.stderr
    assert not port_accepts(port)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1:1", "127.0.0.1.nip.io:{port}"])
def test_a_request_whose_host_header_names_another_address_gets_421_and_no_tool_runs(mcp_ws, host):
    """Issue 25, item 13: DNS rebinding: a page of another site whose name resolves to 127.0.0.1."""
    with http_server(mcp_ws.root, TOKEN) as server:
        port = server.url.split(":")[2].split("/")[0]
        headers = {**HEADERS, "Authorization": f"Bearer {TOKEN}", "Host": host.format(port=port)}
        r = httpx2.post(server.url, headers=headers, content=json.dumps(CREATE), timeout=30)
        assert r.status_code == 421, r.text
        for name in ("127.0.0.1", "localhost"):
            good = {**headers, "Host": f"{name}:{port}"}
            body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}
            assert httpx2.post(server.url, headers=good, content=json.dumps(body), timeout=30).status_code == 200
    assert not (mcp_ws.state / "agent-sessions.db").exists()  # session_create never ran


def test_with_tls_it_serves_https_off_loopback(mcp_ws, tmp_path):
    from tests.helpers import secure_broker as sb

    if sb.missing_tools():
        pytest.skip("openssl is not installed")
    pki = sb.make_pki(tmp_path / "pki")
    args = ("--host", "0.0.0.0", "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key))
    with http_server(mcp_ws.root, TOKEN, args=args, scheme="https") as server:
        headers = {**HEADERS, "Authorization": f"Bearer {TOKEN}"}
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}
        r = httpx2.post(
            server.url,
            headers=headers,
            content=json.dumps(body),
            timeout=30,
            verify=ssl.create_default_context(cafile=str(pki.ca)),
        )
        assert r.status_code == 200, r.text
        assert "mam" in r.text
        assert "https://0.0.0.0:" in server.log.read_text()
