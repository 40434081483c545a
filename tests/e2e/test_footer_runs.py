"""Every command line of a real footer runs exactly as printed (guarantee 11).

A fake claude takes two real jobs in real panes and records the text it was given; the test
splits each command line of that footer as a shell would (shlex, no shell), runs it, and
expects exit 0 from each: started, progress and completed on one job, error on the other.

A fake hermes takes a job too, and the test runs its footer lines the way hermes 0.19's
`terminal` tool does: `bash -l -c <line>` in the environment of the agent's own process, with a
login profile that resets PATH (as Debian's /etc/profile does).
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

from tests.helpers.mamcli import mam, spawn_mam


def turn_entry(log: Path, job_id: str) -> dict[str, object] | None:
    if not log.exists():
        return None
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if entry["event"] == "turn" and f"mam job {job_id}." in entry["text"]:
            return dict(entry)
    return None


def turn_text(log: Path, job_id: str) -> str:
    entry = turn_entry(log, job_id)
    return str(entry["text"]) if entry else ""


def process_env(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.decode().split("=", 1) for item in raw.split(b"\0") if b"=" in item)


def footer_commands(text: str) -> dict[str, list[str]]:
    """The footer's command lines by event kind; every other footer line must be prose."""
    footer = text[text.rindex("\n---\n") + 5 :]
    commands: dict[str, list[str]] = {}
    for line in footer.splitlines():
        if line.startswith("  "):
            argv = shlex.split(line)
            assert argv[:2] == ["mam", "event"], line
            commands[argv[2]] = argv
        else:
            assert not line.lstrip().startswith("mam "), f"a command outside the command lines: {line!r}"
            assert "[" not in line, f"an optional part in brackets: {line!r}"
    return commands


def test_each_footer_command_runs_as_printed_against_a_live_job(wired, fake_agents_on_path, tmp_path, poll):
    log = tmp_path / "agents.jsonl"
    env = {"MAM_FAKE_AGENT_LOG": str(log)}
    for name in ("fa", "fb"):
        mam("session", "create", "--agent", "claude", "--role", "dev", "--session", name, env=env, check=True)
    done = spawn_mam(
        "job",
        "delegate",
        "--target",
        "tmux:fa",
        "--brief",
        "say hello",
        "--job-id",
        "job-fa",
        "--start-deadline",
        "60",
        "--heartbeat",
        "30",
        "--json",
    )
    failed = spawn_mam(
        "job",
        "delegate",
        "--target",
        "tmux:fb",
        "--brief",
        "say hello",
        "--job-id",
        "job-fb",
        "--start-deadline",
        "60",
        "--heartbeat",
        "30",
        "--json",
    )
    try:
        text_a = poll(lambda: turn_text(log, "job-fa"), timeout=30)
        text_b = poll(lambda: turn_text(log, "job-fb"), timeout=30)
        a, b = footer_commands(text_a), footer_commands(text_b)
        assert set(a) == set(b) == {"started", "progress", "completed", "error"}
        for argv in (a["started"], a["progress"], a["completed"], b["started"], b["error"]):
            run = subprocess.run(
                argv, capture_output=True, text=True, timeout=60
            )  # no shell: argv as a shell would split it
            assert run.returncode == 0, (argv, run.stdout, run.stderr)
        out, err = done.communicate(timeout=60)
        assert done.returncode == 0, err
        assert json.loads(out)["state"] == "completed"
        out, err = failed.communicate(timeout=60)
        assert failed.returncode == 1, err
        assert json.loads(out)["reason"] == "agent_error"
    finally:
        for proc in (done, failed):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def test_hermes_terminal_login_shell_runs_the_footer_as_printed(
    wired, fake_agents_on_path, tmp_path, monkeypatch, poll
):
    home = tmp_path / "login-home"
    home.mkdir()
    (home / ".profile").write_text("PATH=/usr/bin:/bin\nexport PATH\n")  # what /etc/profile does on Debian
    monkeypatch.setenv("HOME", str(home))
    log = tmp_path / "agents.jsonl"
    mam(
        "session",
        "create",
        "--agent",
        "hermes",
        "--role",
        "dev",
        "--session",
        "fh",
        env={"MAM_FAKE_AGENT_LOG": str(log)},
        check=True,
    )
    job = spawn_mam(
        "job",
        "delegate",
        "--target",
        "tmux:fh",
        "--brief",
        "say hello",
        "--job-id",
        "job-fh",
        "--start-deadline",
        "60",
        "--heartbeat",
        "30",
        "--json",
    )
    try:
        entry = poll(lambda: turn_entry(log, "job-fh"), timeout=30)
        env = process_env(int(entry["pid"]))  # what hermes hands its terminal tool's bash
        lines = {
            shlex.split(line)[2]: line.strip()
            for line in str(entry["text"]).splitlines()
            if line.startswith("  mam event ")
        }
        assert set(lines) == {"started", "progress", "completed", "error"}
        for kind in ("started", "progress", "completed"):
            run = subprocess.run(
                ["bash", "-l", "-c", lines[kind]], env=env, cwd=str(home), capture_output=True, text=True, timeout=60
            )
            assert run.returncode == 0, (lines[kind], run.stdout, run.stderr)
        out, err = job.communicate(timeout=60)
        assert job.returncode == 0, err
        assert json.loads(out)["state"] == "completed"
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()


def test_a_tasks_footer_runs_as_printed_and_its_review_line_leaves_the_task_in_review(
    wired, fake_agents_on_path, tmp_path, poll
):
    """A task's job (issue 42): its footer's command lines, split as a shell would, run as printed; the
    review line in place of the plain completed one leaves the task in_review."""
    log = tmp_path / "agents.jsonl"
    env = {"MAM_FAKE_AGENT_LOG": str(log)}
    mam("session", "create", "--agent", "claude", "--role", "dev", "--session", "ft", env=env, check=True)
    mam("role", "add", "dev", "--session", "ft", check=True)
    try:
        task = mam("task", "add", "Look it over", "--role", "dev", check=True).stdout.strip()
        job_id = f"{task}-r1"
        text = poll(lambda: turn_text(log, job_id), timeout=60)
        footer = text[text.rindex("\n---\n") + 5 :]
        lines = [shlex.split(line) for line in footer.splitlines() if line.startswith("  ")]
        assert all(argv[:2] == ["mam", "event"] for argv in lines)
        for line in footer.splitlines():
            if not line.startswith("  "):
                assert not line.lstrip().startswith("mam ") and "[" not in line, line
        review = next(argv for argv in lines if "--disposition" in argv)
        started = next(argv for argv in lines if argv[2] == "started")
        for argv in (started, review):
            run = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            assert run.returncode == 0, (argv, run.stdout, run.stderr)
        shown = poll(
            lambda: (
                (t := json.loads(mam("task", "show", task, "--json", check=True).stdout))["state"] == "in_review" and t
            ),
            timeout=60,
        )
        assert shown["wakes"][0]["disposition"] == "review"
    finally:
        mam("node", "stop")
