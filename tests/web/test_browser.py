"""`mam web` in a real browser: Debian's Chromium, headless, driven by Playwright (never `playwright install`).

Skipped, with the reason, only when /usr/bin/chromium is missing (.ci/run installs it; Playwright is in the
test extra).
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright import sync_api as playwright_api  # the test extra (never `playwright install`: the system's Chromium)

from mam.hooks import session_state
from mam.hooks.translate import Activity
from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.helpers.brokers import free_port, mosquitto_bin, mosquitto_required, start_mosquitto
from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import mam, mam_json
from tests.web.conftest import WebServer, job_state, start_web
from tests.web.test_http import API_ROUTES

ARGS = [
    *CHROMIUM_ARGS,
    # A rebinding attacker's name that resolves to this machine, as DNS rebinding makes it.
    "--host-resolver-rules=MAP evil.example 127.0.0.1",
]

if shutil.which(CHROMIUM) is None:
    pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium; .ci/run does it)", allow_module_level=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser, web):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    try:
        yield pg
    finally:
        context.close()


def open_page(page: Any, web: WebServer, link: str | None = None) -> None:
    page.goto(link or web.new_link())
    page.wait_for_selector("#sessions tbody tr[data-session]")
    assert page.url == f"{web.base}/", page.url  # the code left the address bar


def dom_sessions(page: Any) -> list[tuple[str, str, str]]:
    return [
        tuple(row)
        for row in page.eval_on_selector_all(
            "#sessions tbody tr",
            "rows => rows.map(r => [r.dataset.session, r.dataset.state, r.querySelector('td.job').textContent])",
        )
    ]


def dom_jobs(page: Any) -> list[tuple[str, str]]:
    return [
        tuple(row)
        for row in page.eval_on_selector_all(
            "#jobs tbody tr", "rows => rows.map(r => [r.dataset.job, r.dataset.state])"
        )
    ]


def test_the_page_shows_sessions_and_a_jobs_progress_live(page, web, delegate):  # type: ignore[no-untyped-def]
    open_page(page, web)
    wait_for(lambda: [s for s, *_ in dom_sessions(page)] == ["busy", "quiet", "gone"], timeout=30, message="3 rows")
    page.evaluate("window.__same_page = true")  # gone if the page reloaded
    job = delegate("busy", "job-web-live")
    row = f"#jobs tr[data-job='{job}']"
    page.wait_for_selector(f"{row}[data-state='running']")
    first = page.wait_for_function(
        f'() => {{ const m = document.querySelector("{row} td.message"); '
        "return m && m.textContent.startsWith('working (') && m.textContent; }"
    ).json_value()
    later = page.wait_for_function(
        f'() => {{ const m = document.querySelector("{row} td.message"); '
        "return m && m.textContent.startsWith('working (') "
        f"&& m.textContent !== {json.dumps(first)} && m.textContent; }}"
    ).json_value()
    assert later != first
    assert page.is_visible(f"{row} .bar[data-bar='wall']") and page.is_visible(f"{row} .bar[data-bar='liveness']")
    assert ("busy", "working", job) in dom_sessions(page)
    assert page.evaluate("window.__same_page") is True
    assert page.locator("#lines li").count() > 0  # mam tail's lines


def test_the_dom_and_the_state_equal_mam_status_and_mam_job_status(page, web, delegate):  # type: ignore[no-untyped-def]
    job = delegate("busy", "job-web-dom")
    open_page(page, web)
    page.wait_for_selector(f"#jobs tr[data-job='{job}'][data-state='running']")
    for _ in range(20):  # read again until nothing moved around the CLI's reads: the same moment
        state, dom = web.state(), (dom_sessions(page), dom_jobs(page))
        sessions = mam_json("status")
        jobs = {j: mam_json("job", "status", j)["state"] for j, _ in dom[1]}
        if (dom_sessions(page), dom_jobs(page)) == dom and _dom_of(web.state()) == _dom_of(state):
            break
    else:
        raise AssertionError("the page never held still")
    assert dom == _dom_of(state)
    assert [s for s, *_ in dom[0]] == [r["name"] for r in sessions]
    assert {r["name"]: r["status"] for r in sessions} == {s["name"]: s["status"] for s in state["sessions"]}
    assert dom[1] == [(job, "running")] and jobs == {job: "running"}


def _dom_of(state: dict[str, Any]) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    return (
        [(s["name"], s["state"], s["job"] or "-") for s in state["sessions"]],
        [(j["id"], j["state"]) for j in state["jobs"]],
    )


def dismissed_click(page: Any, selector: str) -> tuple[list[str], list[str]]:
    """Click `selector` and dismiss the question it asks: (the questions asked, the POSTs sent since, which
    go on being recorded)."""
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    questions: list[str] = []

    def dismiss(dialog: Any) -> None:
        questions.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click(selector)
    wait_for(lambda: questions, timeout=10, message="the question")
    return questions, posts


def test_cancel_from_the_page_after_a_confirmation(page, web, delegate):  # type: ignore[no-untyped-def]
    job = delegate("busy", "job-web-cancel")
    open_page(page, web)
    button = f"#jobs tr[data-job='{job}'] button[data-action='cancel']"
    page.wait_for_selector(button)
    questions, posts = dismissed_click(page, button)
    assert job in questions[0] and posts == [] and job_state(job) == "running"

    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_response(lambda r: r.url.endswith(f"/api/job/{job}/cancel")) as answer:
        page.click(button)
    assert answer.value.status == 200
    assert job_state(job) == "cancelled"
    page.wait_for_selector(f"#jobs tr[data-job='{job}']", state="detached")
    assert mam_json("job", "status", job)["reason"] == answer.value.json()["result"]["reason"]


def accepted_click(page: Any, selector: str, path: str) -> Any:
    page.wait_for_selector(selector)
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_response(lambda r: r.url.endswith(path)) as answer:
        page.click(selector)
    assert answer.value.status == 200, answer.value.text()
    return answer.value.json()["result"]


def test_pause_and_resume_a_job_and_the_workspace_from_the_page(page, web, delegate):  # type: ignore[no-untyped-def]
    job = delegate("busy", "job-web-pause")
    open_page(page, web)
    row = f"#jobs tr[data-job='{job}']"
    paused = accepted_click(page, f"{row} button[data-action='pause']", f"/api/job/{job}/pause")
    assert paused["state"] == "paused" and paused["paused"]["mode"] == "safe"
    assert paused["paused"]["by"].endswith("via web")
    assert mam_json("job", "status", job)["paused"] == paused["paused"]
    page.wait_for_selector(f"{row}[data-state='paused']")
    resumed = accepted_click(page, f"{row} button[data-action='resume']", f"/api/job/{job}/resume")
    assert resumed["state"] in ("delivered", "running") and resumed["paused"] is None
    page.wait_for_selector(f"{row} button[data-action='pause']")
    held = accepted_click(page, "#hold button[data-action='pause']", "/api/workspace/all/pause")
    assert job in held["paused"] and mam_json("job", "status", job)["state"] == "paused"
    page.wait_for_selector("#hold button[data-action='resume']")
    assert "HELD" in page.text_content("#head")
    released = accepted_click(page, "#hold button[data-action='resume']", "/api/workspace/all/resume")
    assert released["released"] is True and job in released["resumed"]
    page.wait_for_selector("#hold button[data-action='pause']")


def test_a_sessions_screen_opens_read_only(page, web):  # type: ignore[no-untyped-def]
    open_page(page, web)
    page.click("#sessions tr[data-session='busy'] button[data-action='screen']")
    page.wait_for_function("() => document.querySelector('#screen-text').textContent.includes('demo agent ready')")
    assert page.is_visible("#screen") and page.locator("#screen textarea, #screen input").count() == 0


def test_without_a_login_no_data_and_a_rebinding_host_refused(browser, web):  # type: ignore[no-untyped-def]
    context = browser.new_context()
    try:
        pg = context.new_page()
        pg.goto(f"{web.base}/")  # the shell, without a login: it says so, and shows nothing
        pg.wait_for_selector("#offline", state="visible")
        assert "no login" in pg.inner_text("#offline") and pg.locator("#sessions tbody tr").count() == 0
        pg.goto(f"{web.base}/login#code=not-a-code-at-all")
        pg.wait_for_selector("#offline", state="visible")
        assert "refused" in pg.inner_text("#offline") and context.cookies() == []
        # The rebinding page: its own name, resolving here. Even the login link is refused.
        response = pg.goto(f"http://evil.example:{web.port}/login#code={web.code}")
        assert response.status == 421 and context.cookies() == []
        response = pg.goto(f"http://evil.example:{web.port}/api/state")
        assert response.status == 421 and "busy" not in pg.content()
    finally:
        context.close()


class CookieCatcher:
    """Another local user's server on another port of the same host: it records what browsers send it."""

    def __init__(self) -> None:
        self.cookies: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                outer.cookies.append(self.headers.get("Cookie", ""))
                data = b"<html><body>another user's page</body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_args: Any) -> None:
                """Quiet: no line per request on the test's stderr."""

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_cookie_another_port_receives_opens_nothing_and_a_link_works_once(browser, web):  # type: ignore[no-untyped-def]
    """Guarantee 21: the browser, logged in, sends the page's cookie to every port of the host; replayed
    without the page's per-login secret (kept in sessionStorage, which the other port cannot read) it gets
    401 on every route, the event stream included, while the page goes on updating and acting."""
    catcher = CookieCatcher()
    context = browser.new_context()
    try:
        pg = context.new_page()
        pg.set_default_timeout(30_000)
        link = web.new_link()
        open_page(pg, web, link)
        secret = pg.evaluate("sessionStorage.getItem('mam-login')")
        assert secret and pg.evaluate("document.cookie") == ""  # HttpOnly: no script reads the cookie
        other = context.new_page()
        other.goto(f"http://127.0.0.1:{catcher.port}/")
        stolen = next(c for c in catcher.cookies if f"mam_web_{web.port}=" in c)  # the browser sent it there
        assert other.evaluate("sessionStorage.getItem('mam-login')") is None  # but not the secret
        for method, path in API_ROUTES:
            status, _h, body = web.request(path, method=method, headers={"Cookie": stolen, "Origin": web.base})
            assert status == 401 and b"busy" not in body, (path, status)
        # The page itself still works: live, and its actions.
        pg.evaluate("window.__same_page = true")
        create_demo("late")
        pg.wait_for_selector("#sessions tr[data-session='late']")
        assert pg.evaluate("window.__same_page") is True
        pg.click("#sessions tr[data-session='busy'] button[data-action='screen']")
        pg.wait_for_function("() => document.querySelector('#screen-text').textContent.includes('demo agent ready')")
        pg.reload()  # the tab keeps its login (sessionStorage) through a reload
        pg.wait_for_selector("#sessions tr[data-session='late']")
        # The same link in another browser: used already, refused; no cookie, no data.
        again = browser.new_context()
        try:
            pg2 = again.new_page()
            pg2.goto(link)
            pg2.wait_for_selector("#offline", state="visible")
            assert "used already" in pg2.inner_text("#offline") and again.cookies() == []
            assert pg2.locator("#sessions tbody tr").count() == 0
        finally:
            again.close()
    finally:
        context.close()
        catcher.close()


def test_the_page_says_when_the_broker_is_unreachable_and_when_it_is_back(browser, workspace, tmp_path):  # type: ignore[no-untyped-def]
    if mosquitto_bin() is None:
        if mosquitto_required():
            pytest.fail("mosquitto is not installed and CI=true: install it (apt-get install -y mosquitto)")
        pytest.skip("mosquitto is not installed")
    port = free_port()
    server = start_web(env={"MQTT_BROKER": "127.0.0.1", "MQTT_PORT": str(port)})
    context = browser.new_context()
    broker = None
    try:
        pg = context.new_page()
        pg.goto(server.login)
        pg.wait_for_selector("#broker", state="visible", timeout=30_000)
        assert "unreachable" in pg.inner_text("#broker")
        (tmp_path / "late-broker").mkdir()
        broker = start_mosquitto(tmp_path / "late-broker", port=port)  # tried again every 10 s
        pg.wait_for_selector("#broker", state="hidden", timeout=60_000)
        assert pg.inner_text("#live") == "live"
        assert "the broker is back" in pg.inner_text("#lines")
    finally:
        context.close()
        server.stop()
        if broker is not None:
            broker.stop()


def test_on_a_phone_screen_nothing_scrolls_sideways_and_a_new_session_shows_up(browser, web, delegate):  # type: ignore[no-untyped-def]
    job = delegate("busy", "job-web-phone")
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        pg = context.new_page()
        pg.set_default_timeout(30_000)
        open_page(pg, web)
        button = pg.locator(f"#jobs tr[data-job='{job}'] button[data-action='cancel']")
        button.wait_for()
        pg.wait_for_function("document.documentElement.scrollWidth <= window.innerWidth", timeout=10_000)
        # A live update may redraw the row between two looks: ask for the box until the button is drawn.
        box = wait_for(button.bounding_box, timeout=10, message="the cancel button was never drawn")
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["height"] >= 30
        pg.evaluate("window.__same_page = true")
        create_demo("late")  # no job moves: the registry changing is what tells the page
        pg.wait_for_selector("#sessions tr[data-session='late']")
        assert pg.evaluate("window.__same_page") is True
    finally:
        context.close()


def test_a_prompt_is_answered_only_by_a_click_and_only_if_the_pane_shows_it(page, web, fake_agents_on_path):  # type: ignore[no-untyped-def]
    """A claude session (the fake CLI, in a real pane) whose hooks say it waits on a prompt for a tool:
    the page shows the tool and offers Allow once / Deny; a dismissed question sends nothing; an
    accepted one is refused (409) because the pane does not show Claude 2.1.332's prompt for it, and
    the page says so. (The real Claude's prompt answered: tests/real/test_claude_web_answer.py.)"""
    mam("session", "create", "--agent", "claude", "--role", "dev", "--session", "asker", check=True)
    tool = "Bash(touch /tmp/nowhere)"
    ws = Workspace(Path(os.environ["MAM_WORKSPACE"]))
    # Its SessionStart hook first (it records the session idle), then the prompt's.
    wait_for(lambda: session_state.read(ws, "asker"), timeout=30, message="the fake claude's SessionStart hook")
    session_state.record(ws, "asker", Activity("waiting", "PermissionRequest", tool=tool, message="permission prompt"))
    shown = wait_for(
        lambda: next((r for r in web.state()["sessions"] if r["name"] == "asker" and r["actions"]), None),
        timeout=30,
        message=lambda: f"no answer offered: {[r for r in web.state()['sessions'] if r['name'] == 'asker']}",
    )
    assert shown["state"] == "waiting" and shown["waiting_tool"] == tool
    open_page(page, web)
    row = "#sessions tr[data-session='asker']"
    page.wait_for_selector(f"{row}[data-state='waiting'] button[data-action='allow']")
    assert page.inner_text(f"{row} td.state") == f"waiting: {tool}"
    assert page.is_visible(f"{row} button[data-action='deny']")
    questions, posts = dismissed_click(page, f"{row} button[data-action='allow']")
    assert tool in questions[0] and "asker" in questions[0] and posts == []
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_response(lambda r: r.url.endswith("/api/session/asker/allow")) as answer:
        page.click(f"{row} button[data-action='allow']")
    assert answer.value.status == 409 and "nothing typed" in answer.value.json()["error"]
    assert json.loads(answer.value.request.post_data) == {"tool": tool}
    page.wait_for_function("() => document.querySelector('#toast') && !document.querySelector('#toast').hidden")
    assert "nothing typed" in page.inner_text("#toast")


def test_the_page_shows_the_task_tree_and_a_tripped_breaker(page, web):  # type: ignore[no-untyped-def]
    """Issue 42: the org's tasks as a tree by parent (a subtask indented under its parent, a todo task with what
    holds it) and its roles, a tripped breaker marked; the state JSON lists them as `mam task list --json` does."""
    mam("role", "add", "lead", "--session", "quiet", check=True)
    mam("role", "add", "dev", "--session", "busy", "--reports-to", "lead", check=True)
    mam("role", "add", "ops", "--session", "gone", "--breaker", "1", check=True)  # a stopped session: its job fails
    parent = mam("task", "add", "Ship it", "--role", "lead", "--brief", "demo-disposition: review", check=True)
    parent = parent.stdout.strip()
    child = mam("task", "add", "Build it", "--role", "dev", "--parent", parent, check=True).stdout.strip()
    top = mam("task", "add", "Release", "--role", "lead", "--blocked-by", child, check=True).stdout.strip()
    broken = mam("task", "add", "Deploy", "--role", "ops", check=True).stdout.strip()
    try:
        wait_for(lambda: mam_json("role", "show", "ops")["breaker"]["tripped"], timeout=60, message="ops not tripped")
        open_page(page, web)
        page.wait_for_selector(f"#tasks tr[data-task='{child}'][data-depth='1'][data-state='running']")
        page.wait_for_selector(f"#tasks tr[data-task='{broken}'][data-state='failed']")
        page.wait_for_selector("#roles tr[data-role='ops'].tripped")
        cells = page.eval_on_selector_all(
            "#tasks tbody tr", "rows => rows.map(r => [r.dataset.task, r.querySelector('td.title').textContent])"
        )
        ids = [t["id"] for t in mam_json("task", "list")]
        assert [c[0] for c in cells] == ids and ids.index(child) == ids.index(parent) + 1
        assert dict(map(tuple, cells))[child] == "  Build it"
        state = page.text_content(f"#tasks tr[data-task='{top}'] td.state")
        assert state == "todo (blockers)"
        assert "TRIPPED" in page.text_content("#roles tr[data-role='ops'] td.breaker")
        assert [t["id"] for t in web.state()["tasks"]] == ids
    finally:
        for task in (parent, child, top):
            mam("task", "cancel", task)
