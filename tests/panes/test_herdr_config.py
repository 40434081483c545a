"""The herdr config mam writes for its servers: paths, the merge, and the TOML writer behind it."""

from __future__ import annotations

import datetime
import string
from pathlib import Path

import tomllib
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from mam.panes.herdr_config import (
    config_dir,
    dumps,
    session_config_path,
    socket_path,
    user_config_path,
    write_session_config,
)
from mam.workspace import Workspace
from tests.panes.conftest import settings


def test_config_dir_resolution(tmp_path: Path) -> None:
    assert config_dir(settings(), {"XDG_CONFIG_HOME": "/x", "HOME": "/h"}) == Path("/x/herdr")
    assert config_dir(settings(), {"HOME": "/h"}) == Path("/h/.config/herdr")
    assert (
        config_dir(settings(HERDR_CONFIG_DIR=str(tmp_path / "herdr")), {"XDG_CONFIG_HOME": "/x"}) == tmp_path / "herdr"
    )
    assert socket_path(Path("/c/herdr"), "mam-x") == Path("/c/herdr/sessions/mam-x/herdr.sock")
    assert user_config_path(Path("/c/herdr"), {}) == Path("/c/herdr/config.toml")
    assert user_config_path(Path("/c/herdr"), {"HERDR_CONFIG_PATH": "/elsewhere.toml"}) == Path("/elsewhere.toml")


def test_merge_keeps_everything_and_overrides_only_resume(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    user = tmp_path / "config.toml"
    user.write_text('[session]\nresume_agents_on_restore = true\nkeep = "me"\n[ui]\nsidebar_width = 40\n')
    path = write_session_config(ws, "s1", user)
    assert path == session_config_path(ws, "s1")
    assert tomllib.loads(path.read_text()) == {
        "session": {"resume_agents_on_restore": False, "keep": "me"},
        "ui": {"sidebar_width": 40},
    }
    assert path.stat().st_mode & 0o777 == 0o600


def test_no_user_config_writes_only_the_key(tmp_path: Path) -> None:
    path = write_session_config(Workspace(tmp_path), "s2", tmp_path / "missing.toml")
    assert tomllib.loads(path.read_text()) == {"session": {"resume_agents_on_restore": False}}


def test_writer_round_trips_awkward_values() -> None:
    data = {
        "plain": "x",
        "quotes": 'it\'s "quoted" \\ back\tslash\nnew line \x01 \x7f é 🙂',
        "bare-key_1": 1,
        "needs quoting": True,
        "f": 1.5,
        "big": 10**18,
        "neg": -3,
        "inf": float("inf"),
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
        "day": datetime.date(2026, 1, 2),
        "list": [1, 2, 3],
        "mixed": [1, "a", [True, False], {"inline": "table", "n": 2}],
        "empty": [],
        "table": {"a": 1, "nested": {"b": "c", "deeper": {"d": [1.0]}}},
        "array": [{"key": "g", "sub": {"x": 1}}, {"key": "h", "items": [{"y": 2}]}],
        "blank": {},
    }
    assert tomllib.loads(dumps(data)) == data


_keys = st.text(alphabet=string.ascii_letters + string.digits + '-_ .é"', min_size=1, max_size=8)
_scalars = st.one_of(st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False), st.text(max_size=20))
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=3)),
    max_leaves=10,
)


@hsettings(max_examples=200, deadline=None, database=None)
@given(st.dictionaries(_keys, _values, max_size=5))
def test_writer_round_trips_any_table(data: dict) -> None:
    assert tomllib.loads(dumps(data)) == data
