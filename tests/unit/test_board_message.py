"""Board messages: what a receiver accepts, and which keys it checks them with."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mam.board.message import SECRET_FILE, BoardMessage, Keys, board_secret
from mam.bus.topics import Topics
from mam.errors import DecodeError
from mam.settings import load_settings
from mam.workspace import Workspace

TOPICS = Topics("p")


def _ws(tmp_path: Path, name: str) -> Workspace:
    root = tmp_path / name
    root.mkdir()
    return Workspace(root)


def _open(msg: BoardMessage, raw: bytes, keys: Keys, key: str | None = None) -> BoardMessage:
    return BoardMessage.open(TOPICS.board(msg.board, key or msg.key), raw, keys=keys, topics=TOPICS)


def _reason(call) -> str:
    with pytest.raises(DecodeError) as e:
        call()
    return str(e.value.reason)


def test_the_shared_secret_checks_and_a_forgery_or_a_move_is_rejected(tmp_path) -> None:
    settings = load_settings(env_file=tmp_path / "none").with_overrides(MAM_DISPATCH_SECRET="s" * 40)
    ws = _ws(tmp_path, "a")
    assert board_secret(settings, ws) == "s" * 40 and not (ws.state / SECRET_FILE).exists()
    msg = BoardMessage(ws.slug, "plan/x", "v", 3, "w", 1)
    keys = Keys(settings)
    assert _open(msg, msg.encode("s" * 40), keys) == msg
    assert _reason(lambda: _open(msg, msg.encode("t" * 40), keys)) == "bad_signature"
    tampered = msg.encode("s" * 40).replace(b'"value":"v"', b'"value":"w"')
    assert _reason(lambda: _open(msg, tampered, keys)) == "bad_signature"
    assert _reason(lambda: _open(msg, msg.encode("s" * 40), keys, key="plan/y")) == "wrong_job"


def test_without_a_secret_a_workspace_key_of_this_user_checks_its_own_board_only(tmp_path) -> None:
    settings = load_settings(env_file=tmp_path / "none")
    a, b = _ws(tmp_path, "a"), _ws(tmp_path, "b")
    key_a, key_b = board_secret(settings, a), board_secret(settings, b)
    assert (a.state / SECRET_FILE).stat().st_mode & 0o777 == 0o600 and key_a != key_b
    keys = Keys(settings)
    good = BoardMessage(a.slug, "k", "v", 1, "w", 1, origin=str(a.root))
    assert _open(good, good.encode(key_a), keys) == good
    # b's key, named as b's folder, signing for a's board: b's key signs for b's board only (also once cached).
    own_b = BoardMessage(b.slug, "k", "v", 1, "w", 1, origin=str(b.root))
    assert _open(own_b, own_b.encode(key_b), keys) == own_b
    moved = BoardMessage(a.slug, "k", "x", 2, "w", 1, origin=str(b.root))
    assert _reason(lambda: _open(moved, moved.encode(key_b), keys)) == "bad_signature"
    for origin in ("a", str(a.root) + "/../a", ""):
        odd = BoardMessage(a.slug, "k", "x", 2, "w", 1, origin=origin)
        assert _reason(lambda odd=odd: _open(odd, odd.encode(key_a), Keys(settings))) == "bad_signature"
    # A key file others may read, or one reached through a symbolic link, is not a key.
    os.chmod(a.state / SECRET_FILE, 0o644)
    assert _reason(lambda: _open(good, good.encode(key_a), Keys(settings))) == "bad_signature"
    os.chmod(a.state / SECRET_FILE, 0o600)
    os.rename(a.state / SECRET_FILE, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", a.state / SECRET_FILE)
    assert _reason(lambda: _open(good, good.encode(key_a), Keys(settings))) == "bad_signature"


@pytest.mark.parametrize("key", ["plan/../secret", "..", "../plan", "plan/..", "./plan", "plan/./x", "."])
def test_a_key_with_a_dot_or_dot_dot_segment_is_refused_written_or_received(tmp_path, key: str) -> None:
    """Issue 39, item 12: board keys with `..` segments are refused (a key reads like a path)."""
    from mam.board.keys import check_key
    from mam.errors import UsageError

    with pytest.raises(UsageError, match="no '.' or '..' between slashes"):
        check_key(key)
    settings = load_settings(env_file=tmp_path / "none").with_overrides(MAM_DISPATCH_SECRET="s" * 40)
    msg = BoardMessage("board", key, "v", 1, "w", 1)
    assert _reason(lambda: _open(msg, msg.encode("s" * 40), Keys(settings))) == "bad_shape"
    for fine in ("plan..x", "plan/.hidden", "a.b/c..d", "plan/step"):
        assert check_key(fine) == fine
