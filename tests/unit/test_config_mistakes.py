"""Config mistakes are visible and bad numbers get one-line errors (issue 12, items 8 and 9).

Each case runs the real `mam` CLI: exit 2, one line on stderr, no traceback, no secret, and
nothing written for a refused job.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mam.settings import load_settings
from tests.helpers.jobs import registered_session
from tests.helpers.mamcli import mam

PASSWORD = "hunter2=="


def one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1 and lines[0].startswith("mam: error: "), stderr
    return lines[0]


def test_an_unknown_key_is_a_warning_naming_the_closest_known_key(tmp_path: Path):
    (tmp_path / ".mam.env").write_text("MQTT_BROKR=broker.example\nMAM_LOG_LEVEL=INFO\n")
    proc = mam("--workspace", str(tmp_path), "config")
    assert proc.returncode == 0
    assert f"{tmp_path / '.mam.env'}:1: unknown key MQTT_BROKR (did you mean MQTT_BROKER?)" in proc.stderr
    assert "broker.example" not in proc.stderr
    shown = json.loads(mam("--workspace", str(tmp_path), "config", "--json", check=True).stdout)
    assert shown["warnings"] == [f"{tmp_path / '.mam.env'}:1: unknown key MQTT_BROKR (did you mean MQTT_BROKER?)"]


@pytest.mark.parametrize(
    "command",
    [
        ("status",),
        ("status", "--json"),
        ("session", "status"),
        ("job", "list"),
        ("job", "status", "job-doesnotexist"),
        ("job", "log", "job-doesnotexist"),
        ("config",),
        ("budget",),
        ("routine", "list"),
        ("task", "list"),
        ("broker", "status"),
        ("doctor",),
    ],
)
def test_an_unknown_key_is_said_exactly_once_by_every_command(tmp_path: Path, command: tuple[str, ...]):
    """Issue 40: `mam status` said it twice (its settings, then the broker client's), `mam job list` never."""
    (tmp_path / ".mam.env").write_text("MAM_JOB_TIMEOUT_SS=5\n")
    proc = mam("--workspace", str(tmp_path), *command)
    warning = f"{tmp_path / '.mam.env'}:1: unknown key MAM_JOB_TIMEOUT_SS (did you mean MAM_JOB_TIMEOUT_S?)"
    assert (proc.stdout + proc.stderr).count("unknown key MAM_JOB_TIMEOUT_SS") == 1, proc.stdout + proc.stderr
    assert f"mam: warning: {warning}" in proc.stderr or command == ("doctor",)


def test_an_unknown_key_with_no_close_match_still_warns(tmp_path: Path):
    env = tmp_path / ".mam.env"
    env.write_text("COMPLETELY_DIFFERENT=1\n")
    s = load_settings(env_file=env, environ={})
    assert s.warnings == (
        f"{env}:1: unknown key COMPLETELY_DIFFERENT (mam ignores it; `mam config` lists the known keys)",
    )


def test_a_malformed_line_names_the_key_and_never_the_password(tmp_path: Path):
    (tmp_path / ".mam.env").write_text(f"MAM_LOG_LEVEL=INFO\nMQTT_PASSWORD {PASSWORD}\n")
    proc = mam("--workspace", str(tmp_path), "config")
    assert proc.returncode == 2
    line = one_line_error(proc.stderr)
    assert ".mam.env:2:" in line and "MQTT_PASSWORD" in line
    assert "hunter2" not in proc.stderr + proc.stdout


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"MAM_BROKER_PORT": "99999"}, "MAM_BROKER_PORT=99999 is not a TCP port"),
        ({"MAM_JOB_TIMEOUT_S": "inf"}, "MAM_JOB_TIMEOUT_S='inf'"),
        ({"MAM_HEARTBEAT_S": "0.0004"}, "rounds to 0 ms"),
    ],
)
def test_bad_numbers_in_settings_are_one_line_errors(tmp_path: Path, env: dict[str, str], words: str):
    proc = mam("--workspace", str(tmp_path), "broker", "start", env={"MAM_NO_AUTOSTART": "1", **env})
    assert proc.returncode == 2
    assert words in one_line_error(proc.stderr)
    assert not (tmp_path / ".mam" / "broker" / "broker.json").exists()


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--timeout", "nan", "--timeout must be a positive, finite number"),
        ("--timeout", "inf", "--timeout must be a positive, finite number"),
        ("--start-deadline", "-inf", "--start-deadline must be a positive, finite number"),
        ("--heartbeat", "0.0004", "--heartbeat 0.0004 rounds to 0 ms"),
        ("--dispatch-wait", "nan", "--dispatch-wait must be a finite number"),
    ],
)
def test_bad_numbers_on_the_command_line_are_refused_before_anything_is_written(
    tmp_path: Path, flag: str, value: str, words: str
):
    proc = mam(
        "--workspace",
        str(tmp_path),
        "job",
        "delegate",
        "--target",
        "tmux:nobody-here",
        "--brief",
        "hi",
        flag,
        value,
        env={"MAM_NO_AUTOSTART": "1"},
    )
    assert proc.returncode == 2, proc.stderr
    assert words in one_line_error(proc.stderr)
    jobs = tmp_path / ".mam" / "jobs"
    assert not jobs.exists() or list(jobs.iterdir()) == []
    assert "no jobs" in mam("--workspace", str(tmp_path), "job", "list").stdout.lower()


def test_an_agent_heartbeat_that_rounds_to_zero_is_refused(tmp_path: Path):
    proc = mam(
        "--workspace", str(tmp_path), "event", "started", "--job", "job-x", "--nonce", "abc", "--heartbeat", "0.0001"
    )
    assert proc.returncode == 2
    assert "--heartbeat 0.0001 rounds to 0 ms" in one_line_error(proc.stderr)


def test_a_missing_tls_ca_file_is_named_not_a_traceback(tmp_path: Path):
    env = {
        "MQTT_BROKER": "127.0.0.1",
        "MQTT_PORT": "1",
        "MQTT_TLS": "1",
        "MQTT_TLS_CA": str(tmp_path / "no-such-ca.pem"),
    }
    registered_session(tmp_path, "w")  # a session to deliver to: the broker is what fails
    proc = mam("--workspace", str(tmp_path), "job", "delegate", "--target", "tmux:w", "--brief", "hi", env=env)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 3, proc.stderr
    assert f"MQTT_TLS_CA file {tmp_path / 'no-such-ca.pem'} does not exist" in proc.stderr
