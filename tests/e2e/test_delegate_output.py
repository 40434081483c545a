"""What `mam job delegate`, `job list`, `job log` and `session create --onboard` print, and where:
the job id first on stderr, a live status line on a terminal only, tables people read."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime

from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import MAM, mam
from tests.helpers.terminal import Terminal

SHORT = ["--start-deadline", "5", "--heartbeat", "0.5"]
JOB_ID = re.compile(r"^job-[0-9a-f]{16}$")


def on_a_terminal(*args: str, timeout: float = 60) -> tuple[int, str, str]:
    """Run mam with stderr on a pseudo-terminal (stdout a pipe); return (exit code, stdout, terminal text)."""
    term = Terminal(50, 200)  # 200 columns: nothing cut
    proc = subprocess.Popen(
        [MAM, *args], stdout=subprocess.PIPE, stderr=term.slave, stdin=subprocess.DEVNULL, text=True
    )
    term.handed()
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        seen = term.close(timeout=10)
    return proc.returncode, out, seen.decode("utf-8", "replace")


def test_the_job_id_comes_first_on_stderr_and_stdout_keeps_the_result(wired):
    create_demo("dev-1")
    proc = mam("job", "delegate", "--target", "dev-1", "--brief", "demo-write: a.txt :: x", *SHORT)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and JOB_ID.match(lines[0]), proc.stderr  # not a terminal: no status line
    assert proc.stdout == "write a.txt\n"
    jobs = json.loads(mam("job", "list", "--json", check=True).stdout)
    assert [j["id"] for j in jobs] == [lines[0]]
    as_json = mam("job", "delegate", "--target", "dev-1", "--brief", "demo-write: b.txt :: y", *SHORT, "--json")
    assert as_json.returncode == 0
    assert as_json.stderr.strip() == json.loads(as_json.stdout)["id"]


def test_on_a_terminal_a_live_status_line_unless_quiet(wired):
    create_demo("dev-1", behaviour="slow", env={"MAM_DEMO_SLEEP_S": "2"})
    code, out, screen = on_a_terminal(
        "job", "delegate", "--target", "dev-1", "--brief", "demo-write: c.txt :: z", *SHORT
    )
    assert code == 0, screen
    job_id = screen.splitlines()[0].strip()
    assert JOB_ID.match(job_id), screen
    drawn = [part for part in screen.split("\x1b[2K") if part.strip()]
    assert any(part.startswith(f"{job_id} running") and "timeout in" in part for part in drawn), screen
    assert any("last: started" in part for part in drawn), screen
    assert screen.endswith("\r\x1b[2K")  # the line is cleared at the end; the result is on stdout
    assert out.startswith("write c.txt")
    code, out, screen = on_a_terminal(
        "job", "delegate", "--target", "dev-1", "--brief", "demo-write: d.txt :: w", *SHORT, "--quiet"
    )
    assert code == 0, screen
    assert JOB_ID.match(screen.strip()) and "\x1b" not in screen, screen


def test_delegate_help_says_what_is_printed_where():
    text = mam("job", "delegate", "--help", check=True).stdout
    assert "What is printed where:" in text
    assert "stderr  first the job id" in text and "stdout  only the outcome" in text


def test_job_list_has_a_header_a_human_age_and_the_session(wired):
    create_demo("dev-1")
    done = mam("job", "delegate", "--target", "dev-1", "--brief", "demo-write: e.txt :: v", *SHORT)
    assert done.returncode == 0, done.stderr
    lines = mam("job", "list", check=True).stdout.splitlines()
    assert lines[0].split() == ["ID", "STATE", "REASON", "SESSION", "AGE"]
    row = lines[1].split()
    assert row[0] == done.stderr.strip() and row[1:4] == ["completed", "completed", "dev-1"]
    assert re.fullmatch(r"\d+[smhd]", row[4]), row


def test_job_log_prints_local_iso_times_and_event_fields_in_columns(wired):
    create_demo("dev-1")
    done = mam("job", "delegate", "--target", "dev-1", "--brief", "demo-write: f.txt :: u", *SHORT)
    job_id = done.stderr.strip()
    lines = mam("job", "log", job_id, check=True).stdout.splitlines()
    assert lines[0].split() == ["TIME", "KIND", "WHAT", "STATE", "FIELDS"]
    stored = json.loads(mam("job", "log", job_id, "--json", check=True).stdout)
    assert len(lines) == len(stored) + 1
    for line, entry in zip(lines[1:], stored):
        when = datetime.fromisoformat(line.split()[0])
        assert when.utcoffset() is not None  # local, with its offset
        assert abs(when.timestamp() * 1000 - entry["ts_ms"]) < 1
        assert line.split()[1] == entry["kind"]
    completed = next(line for line in lines if "event completed from agent" in line)
    assert completed.split()[7] == "completed" and "message=write f.txt" in completed
    header_at = lines[0].index("FIELDS")
    assert completed.index("message=") == header_at  # the fields column is aligned


def test_onboarding_shows_progress_and_prints_its_outcome_once(wired):
    proc = mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "ob-1", "--onboard")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"onboarding job job-[0-9a-f]{16}: waiting for the agent to report", proc.stderr), proc.stderr
    outcome = [line for line in proc.stdout.splitlines() if line.startswith("onboarding job")]
    assert len(outcome) == 1 and outcome[0].endswith(": completed"), proc.stdout
    assert proc.stdout.count("completed") == 1
