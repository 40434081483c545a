"""Registry on a network filesystem: detected from the mounts table, DELETE journal, one warning.

WAL needs shared memory that NFS, CIFS and sshfs do not give safely, so a registry there must
use the rollback journal. The mounts table is injected, so no real network mount is needed.
"""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from mam.store.db import Database, filesystem_type, journal_mode_for


def mounts_file(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "mounts"
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.fixture
def mounts(tmp_path: Path) -> tuple[Path, Path]:
    """(a mounts table, a folder) where the folder sits on an NFS mount inside the local root."""
    share = tmp_path / "share"
    (share / "ws" / ".mam").mkdir(parents=True)
    table = mounts_file(
        tmp_path,
        "/dev/vda / ext4 rw,relatime 0 0",
        "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0",
        f"fileserver:/export {share} nfs4 rw,relatime,vers=4.2 0 0",
        f"tmpfs {share}-local tmpfs rw 0 0",  # a sibling whose name starts like the share: not a parent
    )
    return table, share


def test_filesystem_type_takes_the_longest_mount_point_holding_the_path(
    mounts: tuple[Path, Path], tmp_path: Path
) -> None:
    table, share = mounts
    assert filesystem_type(share / "ws" / ".mam", mounts=table) == "nfs4"
    assert filesystem_type(share, mounts=table) == "nfs4"
    local = tmp_path / "share-local" / "ws"
    local.mkdir(parents=True)
    assert filesystem_type(local, mounts=table) == "tmpfs"
    assert filesystem_type(tmp_path / "elsewhere", mounts=table) == "ext4"
    assert filesystem_type(tmp_path, mounts=tmp_path / "no-such-mounts") == ""


def test_mount_points_with_spaces_are_unescaped(tmp_path: Path) -> None:
    folder = tmp_path / "my share"
    folder.mkdir()
    escaped = str(folder).replace(" ", "\\040")
    table = mounts_file(tmp_path, "/dev/vda / ext4 rw 0 0", f"//server/share {escaped} cifs rw 0 0")
    assert filesystem_type(folder / "ws", mounts=table) == "cifs"


@pytest.mark.parametrize("fstype", ["nfs", "nfs4", "cifs", "fuse.sshfs"])
def test_network_filesystems_get_the_delete_journal_with_one_warning(
    fstype: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "remote" / "ws" / ".mam"
    state.mkdir(parents=True)
    table = mounts_file(tmp_path, "/dev/vda / ext4 rw 0 0", f"server:/x {tmp_path / 'remote'} {fstype} rw 0 0")
    caplog.set_level(logging.WARNING, logger="mam.store.db")

    assert journal_mode_for(state, mounts=table) == "DELETE"
    first = Database(state / "agent-sessions.db", mounts=table)
    second = Database(state / "agent-sessions.db", mounts=table)
    try:
        for db in (first, second):
            assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        with first.transaction() as conn:
            conn.execute("INSERT INTO meta(key, value) VALUES ('probe', '1')")
    finally:
        first.close()
        second.close()

    warnings = [r for r in caplog.records if r.name == "mam.store.db" and r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert fstype in warnings[0].getMessage() and "journal_mode=DELETE" in warnings[0].getMessage()
    assert not (state / "agent-sessions.db-wal").exists()
    with closing(sqlite3.connect(state / "agent-sessions.db")) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # persistent in the file


def test_local_filesystems_get_wal_and_no_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    state = tmp_path / "ws" / ".mam"
    table = mounts_file(tmp_path, "/dev/vda / ext4 rw 0 0", f"tmpfs {tmp_path} tmpfs rw 0 0")
    caplog.set_level(logging.WARNING, logger="mam.store.db")
    db = Database(state / "agent-sessions.db", mounts=table)
    try:
        assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()
    assert not [r for r in caplog.records if r.name == "mam.store.db"]
