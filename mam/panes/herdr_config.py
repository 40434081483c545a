"""Where a herdr session lives on disk, and the config file mam gives the servers it starts.

herdr keeps a named session's socket at `<config dir>/sessions/<name>/herdr.sock`, where the config
dir is `$XDG_CONFIG_HOME/herdr` (or `~/.config/herdr`). Named sessions share one `config.toml`, but
`HERDR_CONFIG_PATH` points a server at another file; mam uses that to start its servers with the
user's config plus `[session] resume_agents_on_restore = false` (a restarted server must not
relaunch agents on its own: mam resumes them, with their conversation ids).

This module writes only the merged copy under the workspace's `.mam/herdr/`; it never touches the
user's herdr files.
"""

from __future__ import annotations

import datetime
import logging
import math
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mam.errors import ConfigError
from mam.settings import Settings
from mam.util.fs import atomic_write
from mam.workspace import Workspace

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

log = logging.getLogger(__name__)

SESSION_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
OVERRIDE = {"session": {"resume_agents_on_restore": False}}


def check_session_name(name: str) -> str:
    """herdr allows ASCII letters, digits, '.', '_' and '-' in a session name; `default` is reserved."""
    if not SESSION_NAME.match(name) or name == "default" or name in (".", ".."):
        raise ConfigError(
            f"invalid herdr session name {name!r}: use letters, digits, '.', '_' or '-' (not 'default')",
            key="HERDR_SESSION_NAME",
        )
    return name


def config_dir(settings: Settings, environ: Mapping[str, str] = os.environ) -> Path:
    """HERDR_CONFIG_DIR, else $XDG_CONFIG_HOME/herdr, else ~/.config/herdr."""
    configured = settings.herdr_config_dir.strip()
    if configured:
        return Path(configured).expanduser()
    xdg = environ.get("XDG_CONFIG_HOME", "").strip()
    return (Path(xdg) if xdg else Path(environ.get("HOME") or Path.home()) / ".config") / "herdr"


def socket_path(cfg_dir: Path, name: str) -> Path:
    return cfg_dir / "sessions" / name / "herdr.sock"


def leftover_sockets(cfg_dir: Path, name: str) -> list[Path]:
    """Socket files a stopped server may leave: the API socket and the client socket beside it."""
    api = socket_path(cfg_dir, name)
    return [api, api.with_name("herdr-client.sock")]


def user_config_path(cfg_dir: Path, environ: Mapping[str, str] = os.environ) -> Path:
    """The config a herdr started from this environment would read."""
    override = environ.get("HERDR_CONFIG_PATH", "").strip()
    return Path(override).expanduser() if override else cfg_dir / "config.toml"


def session_config_path(ws: Workspace, name: str) -> Path:
    return ws.state / "herdr" / f"{name}.config.toml"


def write_session_config(ws: Workspace, name: str, user_config: Path) -> Path:
    """Write the user's config with resume_agents_on_restore = false for the session `name`; return its path."""
    merged: dict[str, Any] = {}
    if user_config.exists():
        try:
            merged = tomllib.loads(user_config.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            log.warning(
                "cannot read herdr config %s (%s); the mam-started server gets only resume_agents_on_restore = false",
                user_config,
                e,
            )
            merged = {}
    session = merged.get("session")
    if not isinstance(session, dict):
        session = merged["session"] = {}
    session.update(OVERRIDE["session"])
    source = "".join(c if c.isprintable() else "?" for c in str(user_config))
    header = f"# Written by mam for herdr session {name}: {source} plus [session] resume_agents_on_restore = false.\n"
    path = session_config_path(ws, name)
    atomic_write(path, (header + dumps(merged)).encode("utf-8"), mode=0o600)
    return path


# -- a small TOML writer (tomllib only reads) ---------------------------------------------------------
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def dumps(data: Mapping[str, Any]) -> str:
    """TOML text for a table as tomllib returns it (scalars, arrays, tables, arrays of tables)."""
    lines: list[str] = []
    _table(lines, data, [])
    return "\n".join(lines).strip("\n") + "\n"


def _table(lines: list[str], table: Mapping[str, Any], path: list[str]) -> None:
    subtables = []
    for key, value in table.items():
        if isinstance(value, Mapping):
            subtables.append((key, value))
        elif _is_table_array(value):
            subtables.append((key, value))
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in subtables:
        child = [*path, key]
        if isinstance(value, Mapping):
            lines.extend(["", f"[{'.'.join(_key(k) for k in child)}]"])
            _table(lines, value, child)
        else:
            for item in value:
                lines.extend(["", f"[[{'.'.join(_key(k) for k in child)}]]"])
                _table(lines, item, child)


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _string(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
