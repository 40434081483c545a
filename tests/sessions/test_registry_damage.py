"""A damaged registry is refused, never re-initialised; `mam doctor` finds it and restores the sessions
from the YAML mirror after a person confirms (issue 12, item 8)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from mam.store.registry import Registry
from mam.store.sessions import SessionRow
from mam.workspace import Workspace
from tests.helpers.mamcli import mam

SESSIONS = [("dev-1", "conv-aaa"), ("rev-1", "conv-bbb")]


def seeded(ws: Workspace) -> bytes:
    """A registry with two sessions (and their mirror); returns the mirror's bytes."""
    registry = Registry(ws)
    try:
        for name, conversation in SESSIONS:
            registry.add_session(
                SessionRow(
                    name=name,
                    agent="demo",
                    role="dev",
                    backend="tmux",
                    server="mam-test-none",
                    cwd=str(ws.root),
                    conversation_id=conversation,
                    status="stopped",
                )
            )
    finally:
        registry.close()  # the last close checkpoints the WAL into the main file
    return ws.mirror_path.read_bytes()


def corrupt_pages(path: Path) -> None:
    """Overwrite every page but the first (the schema) with garbage, as a bad disk would."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(page)
        f.write(b"\xa5" * (size - page))


def one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1 and lines[0].startswith("mam: error: "), stderr
    return lines[0]


def doctor_checks(*args: str, input: str | None = None) -> tuple[int, dict[str, dict[str, str]]]:
    proc = mam("doctor", "--json", *args, input=input)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, {c["name"]: c for c in json.loads(proc.stdout)["checks"]}


def test_an_empty_registry_is_refused_and_the_mirror_is_never_overwritten(workspace: Workspace):
    mirror = seeded(workspace)
    workspace.db_path.write_bytes(b"")  # `: > .mam/agent-sessions.db`

    status = mam("session", "status")
    assert status.returncode == 1
    assert "is empty (0 bytes): refusing to treat it as a new registry" in one_line_error(status.stderr)
    assert "no sessions" not in status.stdout.lower()
    for write in (
        ("session", "create", "--agent", "demo", "--role", "dev", "--session", "dev-2"),
        ("session", "stop", "--session", "dev-1"),
        ("job", "delegate", "--target", "tmux:dev-1", "--brief", "hi"),
    ):
        proc = mam(*write, env={"MAM_NO_AUTOSTART": "1"})
        assert proc.returncode == 1, (write, proc.stderr)
        one_line_error(proc.stderr)
    assert workspace.mirror_path.read_bytes() == mirror
    assert workspace.db_path.stat().st_size == 0


def test_a_foreign_sqlite_file_is_not_initialised_as_a_registry(workspace: Workspace):
    workspace.ensure_state()
    with closing(sqlite3.connect(workspace.db_path)) as conn:
        conn.execute("CREATE TABLE notes (x)")
    proc = mam("session", "status")
    assert proc.returncode == 1 and "not a mam registry" in one_line_error(proc.stderr)
    with closing(sqlite3.connect(workspace.db_path)) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["notes"]


def test_a_corrupt_page_is_a_clear_error_and_doctor_restores_the_sessions_after_confirmation(workspace: Workspace):
    seeded(workspace)
    corrupt_pages(workspace.db_path)
    damaged = workspace.db_path.read_bytes()

    status = mam("session", "status")
    assert status.returncode == 1
    assert "is damaged" in one_line_error(status.stderr) and "mam doctor" in status.stderr

    code, checks = doctor_checks()
    assert code == 1
    assert checks["registry"]["status"] == "fail"
    assert checks["mirror"]["status"] == "warn" and "2 sessions" in checks["mirror"]["detail"]

    declined = mam("doctor", "--restore-from-mirror", input="n\n")
    assert declined.returncode == 1 and "nothing changed" in declined.stderr
    assert workspace.db_path.read_bytes() == damaged

    restored = mam("doctor", "--restore-from-mirror", "--json", input="y\n")
    assert restored.returncode == 0, restored.stderr
    assert "restored 2 sessions" in restored.stderr
    assert json.loads(restored.stdout)["ok"] is True
    rows = json.loads(mam("session", "status", "--json", check=True).stdout)
    assert sorted((r["name"], r["conversation_id"]) for r in rows) == sorted(SESSIONS)
    kept = [
        p
        for p in workspace.state.iterdir()
        if p.name.startswith("agent-sessions.db.broken-") and not p.name.endswith(("-wal", "-shm"))
    ]
    assert len(kept) == 1 and kept[0].read_bytes() == damaged


def test_restore_with_yes_does_not_ask_and_restore_on_a_healthy_registry_is_refused(workspace: Workspace):
    seeded(workspace)
    healthy = mam("doctor", "--restore-from-mirror", "--yes")
    assert healthy.returncode == 2 and "not damaged" in healthy.stderr

    workspace.db_path.write_bytes(b"")
    proc = mam("doctor", "--restore-from-mirror", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert "[y/N]" not in proc.stderr + proc.stdout
    assert {r["name"] for r in json.loads(mam("session", "status", "--json", check=True).stdout)} == {
        n for n, _ in SESSIONS
    }


def test_doctor_reports_a_mirror_that_disagrees_and_a_record_others_can_read(workspace: Workspace):
    seeded(workspace)
    code, checks = doctor_checks()
    # agent CLIs: none installed here (each a warning, and the "agents" hint pointing to the demo agent)
    files = {k: c for k, c in checks.items() if not k.startswith("agent ") and k != "agents"}
    assert code == 0 and all(c["status"] == "ok" for c in files.values()), checks

    text = workspace.mirror_path.read_text().replace("conv-bbb", "conv-zzz")
    workspace.mirror_path.write_text(text)
    record = workspace.jobs_dir / "job-leaky.json"
    record.write_text("{}")
    record.chmod(0o644)
    code, checks = doctor_checks()
    assert checks["mirror"]["status"] == "warn" and "rev-1" in checks["mirror"]["detail"]
    assert (
        code == 1 and checks["job records"]["status"] == "fail" and "job-leaky.json" in checks["job records"]["detail"]
    )


def test_doctor_names_a_settings_file_others_may_write(workspace: Workspace):
    env_file = workspace.env_file
    env_file.write_text("MAM_LOG_LEVEL=INFO\n")
    env_file.chmod(0o664)
    proc = mam("doctor")  # reported as a failed check: doctor is where a person looks
    assert proc.returncode == 1 and "fail  settings file: refusing settings file" in proc.stdout
    assert "0664" in proc.stdout
    restore = mam("doctor", "--restore-from-mirror", "--yes")  # writing is still refused
    assert restore.returncode == 2 and "0664" in one_line_error(restore.stderr)


def test_a_mirror_entry_that_cannot_make_a_session_is_refused_before_anything_moves(workspace: Workspace):
    seeded(workspace)
    workspace.mirror_path.write_text(workspace.mirror_path.read_text().replace("  agent: demo\n", "", 1))
    workspace.db_path.write_bytes(b"")
    proc = mam("doctor", "--restore-from-mirror", "--yes")
    assert proc.returncode == 1
    assert "'dev-1' cannot be restored" in one_line_error(proc.stderr)
    assert workspace.db_path.stat().st_size == 0
    assert not [p for p in workspace.state.iterdir() if ".broken-" in p.name]
