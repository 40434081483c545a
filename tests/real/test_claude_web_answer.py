"""Answering Claude Code 2.1.332's permission prompt from `mam web` (allow once / deny), the real program.

The scripted model asks Claude's `Bash` tool for a command no allow rule covers, so Claude asks a
person. The page (its JSON, with the page's cookie and per-login secret, as the browser sends it) offers
Allow once / Deny on that session for that tool; a click types the answer only because the pane
shows exactly that prompt: allowed, the command runs and the job completes; denied, it never runs.
Either way the job's audit log says who answered.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from mam.util.poll import wait_for
from tests.real.anthropic_server import FooterScript
from tests.real.conftest import Rig, skip_module_without
from tests.real.test_claude import PROMPT_MARKERS, brief_text, delegate
from tests.web.conftest import LINK, WebServer

skip_module_without("claude")
AUTO_MODE = "Enter to stay in auto mode"
PROCEED = "Do you want to proceed?"


def serve(rig: Rig) -> tuple[WebServer, dict[str, str]]:
    """`mam web --port 0` in the rig's workspace (its node serves it); the page's headers for a click."""
    proc = rig.mam("web", "--port", "0", check=True)
    login = next(line.strip() for line in proc.stdout.splitlines() if LINK in line)
    web = WebServer(proc=proc, base=login.split(LINK, 1)[0], login=login, env=rig.env)  # type: ignore[arg-type]
    return web, {**web.log_in(), "Origin": web.base, "Content-Type": "application/json"}


def offered(web: WebServer, session: str) -> dict[str, Any] | None:
    row = next((s for s in web.state()["sessions"] if s["name"] == session), {})
    return row if {a["name"] for a in row.get("actions", [])} >= {"allow", "deny"} else None


def past_auto_mode(rig: Rig, pane: str) -> Callable[[], bool]:
    """A poll that is True once the prompt shows. While only the auto-mode dialog shows, it types a
    person's Enter (stay in auto mode), again if the dialog is still up 3 s later: in a loaded CI run
    2.1.332 once drew the dialog before it read keys, and the first Enter was lost."""
    typed = [-1e9]

    def poll() -> bool:
        screen = rig.screen(pane)
        if PROCEED in screen:
            return True
        if AUTO_MODE in screen and time.monotonic() - typed[0] > 3.0:
            subprocess.run(["tmux", "-L", rig.tmux.name, "send-keys", "-t", pane, "Enter"], check=True)
            typed[0] = time.monotonic()
        return False

    return poll


@pytest.mark.parametrize("answer", ["allow", "deny"])
def test_a_prompt_answered_from_the_page_types_only_that_answer_and_says_who(claude_rig: Rig, answer: str) -> None:
    rig = claude_rig
    marker = rig.ws.root / f"asked-{answer}.txt"
    command = f"python3 -c \"open('{marker}', 'w')\""  # (a `touch` in the folder runs unasked)
    rig.model.reset(FooterScript(before=(command,)))
    row = rig.create(f"dev-{answer}")
    session, job_id = f"dev-{answer}", f"job-web-{answer}"
    web, page = serve(rig)
    try:
        with ThreadPoolExecutor(1) as pool:
            run = pool.submit(delegate, rig, session, brief_text(answer), timeout=90, start_deadline=60,
                              extra=("--job-id", job_id))  # fmt: skip
            shown = wait_for(lambda: offered(web, session), timeout=60,
                             message=lambda: f"no allow/deny offered:\n{rig.shown(row['pane_id'])}")  # fmt: skip
            tool = f"Bash({command})"
            assert shown["state"] == "waiting" and shown["waiting_tool"] == tool
            action = next(a for a in shown["actions"] if a["name"] == answer)
            assert action["body"] == {"tool": tool} and tool in action["question"]
            # A click for another tool types nothing: the prompt stays, the command has not run.
            body = json.dumps({"tool": "Bash(rm -rf /)"})
            status, _h, out = web.request(f"/api/session/{session}/{answer}", method="POST", headers=page, body=body)
            assert status == 409 and "not waiting on a permission prompt for Bash(rm -rf /)" in json.loads(out)["error"]
            assert any(m in rig.shown(row["pane_id"], lines=15) for m in PROMPT_MARKERS) and not marker.exists()
            # Without the page's per-login secret nothing is typed either.
            status, _h, _ = web.request(
                f"/api/session/{session}/{answer}", method="POST", headers={**page, "X-Mam-Login": "0" * 43},
                body=json.dumps(action["body"]),
            )  # fmt: skip
            assert status == 401
            click = json.dumps(action["body"])
            asking = wait_for(
                lambda: next((m for m in (AUTO_MODE, PROCEED) if m in rig.shown(row["pane_id"], lines=15)), ""),
                timeout=30,
                message=lambda: f"neither dialog:\n{rig.shown(row['pane_id'])}",
            )
            if asking == AUTO_MODE:
                # 2.1.332 first asks whether to stay in auto mode (no server-side check here): not a
                # prompt for that tool, so the click types nothing; a person answers it in the pane.
                status, _h, out = web.request(
                    f"/api/session/{session}/{answer}", method="POST", headers=page, body=click
                )
                assert status == 409 and "no permission prompt laid out as claude 2.1.332's" in json.loads(out)["error"]
                assert AUTO_MODE in rig.screen(row["pane_id"]) and not marker.exists()
            wait_for(past_auto_mode(rig, row["pane_id"]), timeout=30,
                     message=lambda: f"no prompt:\n{rig.shown(row['pane_id'])}")  # fmt: skip
            status, _h, out = web.request(f"/api/session/{session}/{answer}", method="POST", headers=page, body=click)
            assert status == 200, (out, rig.screen(row["pane_id"]))
            result = json.loads(out)["result"]
            assert (result["answer"], result["tool"], result["job"]) == (answer, tool, job_id)
            assert (
                result["option"] == ("Yes" if answer == "allow" else "No") and result["verified_version"] == "2.1.332"
            )
            if answer == "allow":
                rc, record, err = run.result()
                assert rc == 0 and record["state"] == "completed", (rc, record, err, rig.shown(row["pane_id"]))
                assert marker.exists()
            else:
                wait_for(lambda: PROCEED not in rig.shown(row["pane_id"], lines=15),
                         timeout=30, message="the prompt is still up")  # fmt: skip
                rig.mam("job", "cancel", job_id)
                run.result()
                assert not marker.exists(), "a denied command ran"
        audit = [line for line in rig.mam_json("job", "log", job_id) if line.get("kind") == "permission_answered"]
        assert len(audit) == 1, audit
        assert audit[0]["answer"] == answer and audit[0]["tool"] == tool
        assert (
            audit[0]["by"]["via"] == "web" and audit[0]["by"]["from"] == "127.0.0.1" and "@" in audit[0]["by"]["user"]
        )
    finally:
        web.stop()
