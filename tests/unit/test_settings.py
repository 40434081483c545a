"""Settings: precedence (environment > .mam.env > defaults), validation, the example file, `mam config`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mam.envfile import parse_env_text
from mam.errors import ConfigError
from mam.settings import KEYS, KEYS_BY_NAME, example_env_text, load_settings

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "pw-Zq81-never-shown"
SECRET = "dispatch-Xk42-never-shown"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- precedence and sources ----------------------------------------------------------------------


def test_defaults_without_file_or_environment():
    s = load_settings(env_file=None, environ={})
    for key in KEYS:
        assert s.raw(key.name) == key.default
        assert s.sources[key.name] == "default"
    assert s.env_file is None
    assert s.broker_host == "" and s.broker_port == 1883 and not s.no_autostart


def test_environment_wins_over_file_which_wins_over_defaults(tmp_path: Path):
    env_file = write(tmp_path / ".mam.env", "# settings\nMQTT_PORT=2000\nMAM_HEARTBEAT_S=7\n")
    s = load_settings(env_file=env_file, environ={"MQTT_PORT": "3000", "UNRELATED": "x"})
    assert s.broker_port == 3000
    assert s.sources["MQTT_PORT"] == "environment"
    assert s.heartbeat_s == 7.0
    assert s.sources["MAM_HEARTBEAT_S"] == f"{env_file}:3"
    assert s.raw("MAM_HEARTBEAT_K") == KEYS_BY_NAME["MAM_HEARTBEAT_K"].default
    assert s.sources["MAM_HEARTBEAT_K"] == "default"
    assert s.env_file == env_file


def test_empty_environment_value_still_wins(tmp_path: Path):
    env_file = write(tmp_path / ".mam.env", "MQTT_BROKER=broker.example\n")
    s = load_settings(env_file=env_file, environ={"MQTT_BROKER": ""})
    assert s.broker_host == ""
    assert s.sources["MQTT_BROKER"] == "environment"


def test_missing_optional_file_is_fine_but_a_required_one_is_not(tmp_path: Path):
    assert load_settings(env_file=tmp_path / "absent.env", environ={}).env_file is None
    with pytest.raises(ConfigError, match="not found"):
        load_settings(env_file=tmp_path / "absent.env", environ={}, required_env_file=True)


def test_unknown_keys_in_the_file_are_kept_apart(tmp_path: Path):
    env_file = write(tmp_path / ".mam.env", "SOMETHING_ELSE=1\nMQTT_TLS=1\n")
    s = load_settings(env_file=env_file, environ={})
    assert dict(s.extra_env) == {"SOMETHING_ELSE": "1"}
    assert s.mqtt_tls is True
    assert "SOMETHING_ELSE" not in s.values


@pytest.mark.parametrize("word", ["1", "true", "YES", "on"])
def test_true_words(word: str):
    assert load_settings(env_file=None, environ={"MAM_NO_AUTOSTART": word}).no_autostart


@pytest.mark.parametrize("word", ["0", "false", "No", "off", ""])
def test_false_words(word: str):
    assert not load_settings(env_file=None, environ={"MAM_NO_AUTOSTART": word}).no_autostart


@pytest.mark.parametrize(
    ("environ", "words"),
    [
        ({"MQTT_PORT": "abc"}, "MQTT_PORT='abc' (environment)"),
        ({"MQTT_PORT": "70000"}, "not a TCP port"),
        ({"MQTT_PORT": "-1"}, "negative"),
        ({"MAM_HEARTBEAT_S": "0"}, "positive"),
        ({"MAM_JOB_TIMEOUT_S": "soon"}, "MAM_JOB_TIMEOUT_S"),
        ({"MQTT_TLS": "maybe"}, "1/0"),
        ({"MAM_BACKEND": "screen"}, "tmux or herdr"),
        ({"MQTT_TLS_CERT": "/c.pem"}, "go together"),
    ],
)
def test_bad_values_are_config_errors_naming_key_and_source(environ: dict[str, str], words: str):
    with pytest.raises(ConfigError) as info:
        load_settings(env_file=None, environ=environ)
    assert words in str(info.value)
    assert info.value.exit_code == 2


def test_a_bad_value_in_the_file_names_the_file_and_line(tmp_path: Path):
    env_file = write(tmp_path / ".mam.env", "\nMQTT_PORT=abc\n")
    with pytest.raises(ConfigError, match=rf"MQTT_PORT='abc' \({env_file}:2\)"):
        load_settings(env_file=env_file, environ={})


def test_with_overrides_validates_and_marks_the_source():
    s = load_settings(env_file=None, environ={}).with_overrides(MQTT_PORT="4000")
    assert s.broker_port == 4000 and s.sources["MQTT_PORT"] == "override"
    with pytest.raises(ConfigError):
        s.with_overrides(MQTT_PORT="x")


def test_describe_redacts_secrets():
    s = load_settings(env_file=None, environ={"MQTT_PASSWORD": PASSWORD, "MAM_DISPATCH_SECRET": SECRET})
    rows = {r["key"]: r for r in s.describe()}
    assert [r["key"] for r in s.describe()] == [k.name for k in KEYS]
    assert rows["MQTT_PASSWORD"]["value"] == "***"
    assert rows["MAM_DISPATCH_SECRET"]["value"] == "***"
    assert PASSWORD not in repr(s.describe()) and SECRET not in repr(s.describe())


# -- .mam.env.example ----------------------------------------------------------------------------


def test_committed_example_matches_example_env_text():
    committed = (REPO / ".mam.env.example").read_text(encoding="utf-8")
    assert committed == example_env_text(), "regenerate it: python -m mam config --example > .mam.env.example"


def test_example_documents_every_key_with_its_default_commented_out():
    text = example_env_text()
    assert parse_env_text(text, source=".mam.env.example") == []  # sets nothing (issue 40)
    keyed = re.compile(r"# [A-Z][A-Z0-9_]*=")
    uncommented = "\n".join(line[2:] if keyed.match(line) else "" for line in text.splitlines())
    entries = parse_env_text(uncommented, source=".mam.env.example")
    assert [e.key for e in entries] == [k.name for k in KEYS]
    for entry in entries:
        assert entry.value == KEYS_BY_NAME[entry.key].default, entry.key
    for key in KEYS:
        assert f"# {key.doc}\n# {key.name}=" in text


def test_example_loads_to_the_defaults_each_from_its_default(tmp_path: Path):
    env_file = write(tmp_path / ".mam.env", example_env_text())
    s = load_settings(env_file=env_file, environ={})
    assert {k.name: s.raw(k.name) for k in KEYS} == {k.name: k.default for k in KEYS}
    assert set(s.sources.values()) == {"default"}  # `mam config` shows nothing as set by the file
    edited = write(tmp_path / ".mam.env", example_env_text().replace("# MAM_HEARTBEAT_S=30", "MAM_HEARTBEAT_S=12"))
    s = load_settings(env_file=edited, environ={})
    assert s.raw("MAM_HEARTBEAT_S") == "12" and s.sources["MAM_HEARTBEAT_S"].startswith(str(edited))


# -- `mam config` as a user runs it ----------------------------------------------------------------


def mam(*args: str, ws: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "MAM_WORKSPACE": str(ws), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "mam", *args],
        cwd=ws,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def rows_of(stdout: str) -> dict[str, list[str]]:
    rows = {}
    for line in stdout.splitlines():
        parts = line.split()
        if parts and parts[0] in KEYS_BY_NAME:
            rows[parts[0]] = parts[1:]
    return rows


def test_mam_config_prints_every_key_and_its_source(ws: Path):
    env_file = write(ws / ".mam.env", "MQTT_PORT=2001\nMAM_HEARTBEAT_S=9\n")
    r = mam("config", ws=ws, env={"MAM_HEARTBEAT_S": "11"})
    assert r.returncode == 0, r.stderr
    rows = rows_of(r.stdout)
    assert set(rows) == set(KEYS_BY_NAME)
    assert rows["MQTT_PORT"] == ["2001", f"{env_file}:1"]
    assert rows["MAM_HEARTBEAT_S"] == ["11", "environment"]
    assert rows["MAM_HEARTBEAT_K"] == ["4", "default"]
    assert f"workspace: {ws}" in r.stdout


def test_mam_config_redacts_secrets_everywhere(ws: Path):
    write(ws / ".mam.env", f"MQTT_PASSWORD='{PASSWORD}'\nMQTT_USERNAME=bob\n")
    for args in (("config",), ("config", "--json")):
        r = mam(*args, ws=ws, env={"MAM_DISPATCH_SECRET": SECRET})
        assert r.returncode == 0, r.stderr
        for text in (r.stdout, r.stderr):
            assert PASSWORD not in text and SECRET not in text
    r = mam("config", "--json", ws=ws, env={"MAM_DISPATCH_SECRET": SECRET})
    shown = {row["key"]: row for row in json.loads(r.stdout)["settings"]}
    assert shown["MQTT_PASSWORD"]["value"] == "***"
    assert shown["MAM_DISPATCH_SECRET"]["value"] == "***"
    assert shown["MAM_DISPATCH_SECRET"]["source"] == "environment"
    assert shown["MQTT_USERNAME"]["value"] == "bob"


def test_mam_config_env_file_option(ws: Path, tmp_path: Path):
    other = write(tmp_path / "other.env", "export MQTT_BROKER=broker.internal\n")
    write(ws / ".mam.env", "MQTT_BROKER=ignored.example\n")
    r = mam("--env-file", str(other), "config", "--json", ws=ws)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["env_file"] == str(other)
    shown = {row["key"]: row for row in data["settings"]}
    assert shown["MQTT_BROKER"]["value"] == "broker.internal"
    assert shown["MQTT_BROKER"]["source"] == f"{other}:1"


def test_mam_config_missing_env_file_option_is_exit_2(ws: Path, tmp_path: Path):
    r = mam("--env-file", str(tmp_path / "nope.env"), "config", ws=ws)
    assert r.returncode == 2
    assert "not found" in r.stderr and "Traceback" not in r.stderr


def test_mam_config_bad_value_is_a_clear_error_with_exit_2(ws: Path):
    write(ws / ".mam.env", f"MQTT_PASSWORD={PASSWORD}\nMQTT_PORT=abc\n")
    r = mam("config", ws=ws, env={"MAM_DISPATCH_SECRET": SECRET})
    assert r.returncode == 2
    assert r.stderr.startswith("mam: error: MQTT_PORT='abc'")
    assert f"{ws / '.mam.env'}:2" in r.stderr
    assert "Traceback" not in r.stderr
    assert PASSWORD not in r.stdout + r.stderr and SECRET not in r.stdout + r.stderr


def test_mam_config_malformed_file_names_file_and_line_without_the_secret(ws: Path):
    write(ws / ".mam.env", f"# ok\nMQTT_PASSWORD {PASSWORD}\n")
    r = mam("config", ws=ws)
    assert r.returncode == 2
    assert f"{ws / '.mam.env'}:2:" in r.stderr
    assert PASSWORD not in r.stdout + r.stderr


def test_mam_config_example_matches_the_library(ws: Path):
    r = mam("config", "--example", ws=ws)
    assert r.returncode == 0
    assert r.stdout == example_env_text()


def test_every_key_has_a_typed_field_of_its_kind() -> None:
    import dataclasses
    import typing

    from mam.settings import Settings

    hints = typing.get_type_hints(Settings)
    kinds = {"str": str, "path": str, "int": int, "float": float, "bool": bool}
    s = load_settings(environ={"MQTT_TLS": "yes", "MAM_POLL_S": "0.5", "MQTT_BROKER": " host "})
    assert len({k.field for k in KEYS}) == len(KEYS)
    for key in KEYS:
        assert hints[key.field] is kinds[key.kind], key.name
        assert type(getattr(s, key.field)) is kinds[key.kind], key.name
        field = next(f for f in dataclasses.fields(Settings) if f.name == key.field)
        assert field.repr is not key.secret, f"{key.name}: a secret must stay out of repr()"
    assert s.mqtt_tls is True and s.poll_s == 0.5 and s.broker_host == "host"
    assert s.broker_port == 1883 and s.embedded_broker_port == 0 and s.heartbeat_k == 4.0
    assert s.with_overrides(MAM_POLL_S="2").poll_s == 2.0 and s.poll_s == 0.5


def test_role_caps_are_a_family_of_names_typed_and_checked(tmp_path: Path) -> None:
    env_file = write(tmp_path / ".mam.env", "MAM_MAX_RUNNING_JOBS_PLAN_WRITER=2\n")
    s = load_settings(env_file=env_file, environ={"MAM_MAX_RUNNING_JOBS_REVIEWER": "1", "MAM_MAX_RUNNING_JOBS": "3"})
    assert s.max_running_jobs == 3 and not s.warnings
    assert s.max_running_for_role("reviewer") == 1 and s.max_running_for_role("plan-writer") == 2
    assert s.max_running_for_role("dev") == 0
    assert s.with_overrides(MAM_POLL_S="1").max_running_for_role("reviewer") == 1
    with pytest.raises(ConfigError, match="MAM_MAX_RUNNING_JOBS_REVIEWER"):
        load_settings(environ={"MAM_MAX_RUNNING_JOBS_REVIEWER": "-1"})
