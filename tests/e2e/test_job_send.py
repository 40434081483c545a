"""`mam job send ID --text TEXT` (mam/jobs/send.py), end to end: real tmux on a private socket, a real
Mosquitto, the demo agent in a real pane. A send to a running job types the text once (the pane and
the agent's own conversation log say so) and leaves a `sent` audit line with who asked, shown by the
feed; every refusal (an unknown or ended job, a control character, a box that is not empty) is one
line with its exit code, and nothing is typed."""

from __future__ import annotations

import hashlib
import json
import subprocess

import pytest

from mam.jobs.record import read_audit
from mam.sessions.audit import default_by
from mam.util.poll import wait_for
from mam.view.feed import Feed
from mam.workspace import Workspace
from tests.e2e.test_node import open_job
from tests.helpers.jobs import FAST, capture, create_demo
from tests.helpers.mamcli import mam

HOLD = ["--start-deadline", "30", "--heartbeat", "60"]  # silent after `started`: running for K x 60 s


@pytest.fixture
def sendable(workspace, mosquitto_broker, monkeypatch):
    """A workspace wired to Mosquitto, short poll intervals (the broker is not what is tested here)."""
    for key, value in {**mosquitto_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    return workspace


def user_turns(ws: Workspace, session: dict, needle: str) -> int:
    """How many messages the demo agent itself recorded receiving that hold `needle`."""
    path = ws.state / "demo-agent" / "conversations" / f"{session['conversation_id']}.json"
    return sum(1 for t in json.loads(path.read_text())["turns"] if t["role"] == "user" and needle in t["text"])


def running_job(ws: Workspace, tmux: str, session: dict) -> str:
    """A job of `session` that is running, its agent silent and its input box empty again."""
    out = mam("job", "delegate", "--target", session["name"], "--brief", "hold", "--detach", "--json", *HOLD)
    assert out.returncode == 0, out.stderr
    job = json.loads(out.stdout)["id"]
    assert open_job(ws) == job
    wait_for(
        lambda: capture(tmux, session["pane_id"]).rstrip().endswith("now going silent)\n\u203a"),
        timeout=30,
        message="the demo agent never showed its empty input box after `started`",
    )
    return job


def sent_lines(ws: Workspace, job: str) -> list[dict]:
    return [line for line in read_audit(ws, job) if line["kind"] == "sent"]


def refused(proc: subprocess.CompletedProcess[str], code: int, says: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    assert proc.stderr.startswith("mam: error: ") and says in proc.stderr, proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr


def test_a_send_to_a_running_job_types_the_text_once_and_is_audited_with_who_asked(sendable, tmux_server):
    s = create_demo("w", behaviour="silent_after_start")
    job = running_job(sendable, tmux_server.name, s)
    text = "FOLLOW-UP-ONE: also run the unit tests\nand say which failed"
    out = mam("job", "send", job, "--text", text, "--by", "alice@review", "--json")
    assert out.returncode == 0, out.stderr
    data = text.encode()
    sent = json.loads(out.stdout)
    assert sent == {
        "id": job,
        "sent": True,
        "session": "w",
        "by": "alice@review",
        "pane": s["pane_id"],
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    wait_for(lambda: user_turns(sendable, s, "FOLLOW-UP-ONE") == 1, timeout=30, message="the agent never got the text")
    assert capture(tmux_server.name, s["pane_id"]).count("FOLLOW-UP-ONE") == 1  # typed once, submitted once
    (line,) = sent_lines(sendable, job)
    assert (line["by"], line["bytes"], line["sha256"], line["pane"]) == (
        "alice@review",
        len(data),
        sent["sha256"],
        s["pane_id"],
    )
    assert "FOLLOW-UP-ONE" not in sendable.job_log_dir(job).joinpath("audit.jsonl").read_text()  # never the text
    # The feed (`mam tail`) shows it as one short line of the job, without the text.
    shown = [x for x in Feed(sendable, job=job).read() if x.type == "sent"]
    assert [(x.kind, x.job, x.session, x.message) for x in shown] == [
        ("audit", job, "w", f"by alice@review ({len(data)} bytes)")
    ]
    assert "sent" in shown[0].text() and "FOLLOW-UP" not in shown[0].text()

    # Without --by: the user and the host. The plain output is one line.
    wait_for(
        lambda: capture(tmux_server.name, s["pane_id"]).rstrip().endswith("nothing to do)\n\u203a"),
        timeout=30,
        message="the demo agent never showed its empty input box again",
    )
    again = mam("job", "send", job, "--text", "FOLLOW-UP-TWO")
    assert again.returncode == 0 and again.stdout == f"{job}: sent\n", again.stderr
    wait_for(lambda: user_turns(sendable, s, "FOLLOW-UP-TWO") == 1, timeout=30, message="no second text")
    assert [line["by"] for line in sent_lines(sendable, job)] == ["alice@review", default_by()]
    status = json.loads(mam("job", "status", job, "--json", check=True).stdout)
    assert status["state"] == "running"  # a send changes nothing else about the job
    mam("job", "cancel", job, check=True)


def test_every_refusal_is_one_line_and_types_nothing(sendable, tmux_server):
    s = create_demo("w", behaviour="silent_after_start")
    refused(mam("job", "send", "job-0123456789abcdef", "--text", "MARK-NONE"), 5, "no job 'job-0123456789abcdef'")
    refused(mam("job", "send", "..", "--text", "MARK-NONE"), 2, "invalid job id '..'")
    job = running_job(sendable, tmux_server.name, s)
    before = capture(tmux_server.name, s["pane_id"])

    # An escape sequence would end the bracketed paste and type the rest as keys: refused, like a brief's.
    refused(mam("job", "send", job, "--text", "MARK-ESC \x1b[201~ then keys"), 2, "control character (U+001B)")
    refused(mam("job", "send", job, "--text", "  \n"), 2, "the text is empty")
    refused(mam("job", "send", job, "--text", "MARK-BY", "--by", "a\x1bb"), 2, "--by must be printable")

    # A person's half-typed line in the input box: never added to.
    tmux = ["tmux", "-L", tmux_server.name]
    subprocess.run([*tmux, "send-keys", "-t", s["pane_id"], "-l", "half typed by a person"], check=True)
    wait_for(
        lambda: capture(tmux_server.name, s["pane_id"]).rstrip().endswith("\u203a half typed by a person"),
        timeout=30,
        message="the typed keys never showed in the input box",
    )
    refused(mam("job", "send", job, "--text", "MARK-BUSY"), 5, "is not empty")
    screen = capture(tmux_server.name, s["pane_id"])
    assert "MARK-" not in screen and screen.rstrip().endswith("\u203a half typed by a person")
    subprocess.run([*tmux, "send-keys", "-t", s["pane_id"], "C-c"], check=True)  # the demo's Ctrl-C clears the box
    wait_for(lambda: capture(tmux_server.name, s["pane_id"]).rstrip().endswith("\u203a"), timeout=30)

    # An ended job takes no text.
    mam("job", "cancel", job, check=True)
    refused(mam("job", "send", job, "--text", "MARK-ENDED"), 5, "is cancelled (cancelled_by_user), not running")

    assert sent_lines(sendable, job) == []
    assert user_turns(sendable, s, "MARK-") == 0
    after = capture(tmux_server.name, s["pane_id"])
    assert "MARK-" not in after and after.count("hold") == before.count("hold")


def test_no_text_goes_into_a_permission_prompt(sendable, tmux_server, fake_agents_on_path):
    """The fake claude (tests/fakes) working on a job; a first text makes it ask for a permission, as a
    model asking for a command outside the rules would: the next text is refused, the prompt untouched."""
    row = json.loads(
        mam("session", "create", "--agent", "claude", "--role", "dev", "--session", "c", "--json", check=True).stdout
    )
    out = mam("job", "delegate", "--target", "c", "--brief", "work\nfake-work: 120", "--detach", "--json", *HOLD)
    assert out.returncode == 0, out.stderr
    job = json.loads(out.stdout)["id"]
    assert open_job(sendable) == job
    asked = mam("job", "send", job, "--text", "fake-ask-permission for the next step")
    assert asked.returncode == 0, asked.stderr
    wait_for(
        lambda: "Do you want to proceed?" in capture(tmux_server.name, row["pane_id"]),
        timeout=30,
        message="the fake claude never asked",
    )
    refused(mam("job", "send", job, "--text", "MARK-PROMPT"), 5, "shows a dialog or permission prompt")
    screen = capture(tmux_server.name, row["pane_id"])
    assert "MARK-PROMPT" not in screen and "Do you want to proceed?" in screen
    assert len(sent_lines(sendable, job)) == 1
    mam("job", "cancel", job, check=True)
