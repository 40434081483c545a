"""Folder trust records in the agent CLIs' own config files: one entry for one folder, every
other key kept, the file replaced atomically (a reader sees the old file or the new one).

Only the session's own cwd is ever recorded, and only when the create was not given --no-trust.
A config file that is a symbolic link (a dotfiles repository) stays one: the file it names is
replaced, atomically, beside itself. A folder the user marked untrusted (codex `trust_level =
"untrusted"`, gemini `DO_NOT_TRUST`) is left so, and the create fails saying why (`distrusted`).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mam.errors import AgentError

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def resolved(path: Path) -> Path:
    """The file `path` names once every symbolic link is followed: what a trust record replaces."""
    return Path(os.path.realpath(path))


def distrusted(agent: str, path: Path, cwd: str) -> AgentError:
    return AgentError(
        f"{agent}: {path} marks {cwd} as untrusted, and mam leaves that as you set it: trust the folder in "
        f"{agent} yourself, or create the session with --no-trust (the agent then asks)",
        agent=agent,
    )


def write_atomically(path: Path, text: str, *, mode: int | None = None) -> None:
    """Replace `path` with `text`, with `mode` (default: its own, 0600 for a new file). A symbolic link
    stays: the file it names is replaced, by a temporary file beside that file."""
    path = resolved(path)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o600
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".mam-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Serialize mam's read-modify-write of a file in `folder` (two creates at once must not lose an
    entry). The folder itself is locked: the file is replaced by rename, so its inode changes."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def trust_in_json(path: Path, cwd: str, *, agent: str) -> Path | None:
    """Set `projects.<cwd>.hasTrustDialogAccepted = true` in Claude's `.claude.json`; None if it already was."""
    with folder_lock(resolved(path).parent):
        return _trust_in_json(path, cwd, agent=agent)


def _trust_in_json(path: Path, cwd: str, *, agent: str) -> Path | None:
    data: Any = {}
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError) as e:
            raise AgentError(
                f"{agent}: cannot read {path} to record {cwd} as trusted ({e}); "
                "fix the file, or create the session with --no-trust",
                agent=agent,
            ) from e
    if not isinstance(data, dict) or not isinstance(data.get("projects", {}), dict):
        raise AgentError(
            f"{agent}: {path} is not shaped as expected (an object with a 'projects' object); "
            "create the session with --no-trust",
            agent=agent,
        )
    projects = data.setdefault("projects", {})
    entry = projects.setdefault(cwd, {})
    if not isinstance(entry, dict):
        raise AgentError(
            f"{agent}: {path} holds an unexpected entry for {cwd}; create the session with --no-trust", agent=agent
        )
    if entry.get("hasTrustDialogAccepted") is True:
        return None
    entry["hasTrustDialogAccepted"] = True
    write_atomically(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return path


def toml_string(value: str) -> str:
    """A TOML basic string."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\u{ord(m.group()):04x}", escaped) + '"'


_HEADER = re.compile(r"^\s*\[\s*projects\s*\.\s*(\"(?:[^\"\\]|\\.)*\"|'[^']*')\s*\]\s*(#.*)?$")
_TABLE = re.compile(r"^\s*\[")
_TRUST_LINE = re.compile(r"^\s*trust_level\s*=")


def _header_key(line: str) -> str | None:
    m = _HEADER.match(line)
    if not m:
        return None
    quoted = m.group(1)
    if quoted.startswith("'"):
        return quoted[1:-1]
    try:
        return str(json.loads(quoted))  # TOML basic strings and JSON strings agree for paths
    except ValueError:
        return None


def trust_in_toml(path: Path, cwd: str, *, agent: str) -> Path | None:
    """Set `[projects."<cwd>"] trust_level = "trusted"` in Codex's config.toml, keeping every other line."""
    with folder_lock(resolved(path).parent):
        return _trust_in_toml(path, cwd, agent=agent)


def _trust_in_toml(path: Path, cwd: str, *, agent: str) -> Path | None:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _header_key(line) == cwd), None)
    if start is None:
        if re.search(r"^\s*projects\s*=", text, re.M):
            raise AgentError(
                f"{agent}: {path} keeps 'projects' inline; record {cwd} as trusted yourself, "
                "or create the session with --no-trust",
                agent=agent,
            )
        block = [f"[projects.{toml_string(cwd)}]", 'trust_level = "trusted"']
        new_lines = [*lines, *([""] if lines and lines[-1].strip() else []), *block]
    else:
        end = next((i for i in range(start + 1, len(lines)) if _TABLE.match(lines[i])), len(lines))
        body = lines[start + 1 : end]
        current = next((i for i, line in enumerate(body) if _TRUST_LINE.match(line)), None)
        if current is not None and re.match(r'^\s*trust_level\s*=\s*"trusted"\s*(#.*)?$', body[current]):
            return None
        if current is not None and re.match(r'^\s*trust_level\s*=\s*"untrusted"\s*(#.*)?$', body[current]):
            raise distrusted(agent, path, cwd)
        if current is None:
            body.insert(0, 'trust_level = "trusted"')
        else:
            body[current] = 'trust_level = "trusted"'
        new_lines = [*lines[: start + 1], *body, *lines[end:]]
    new_text = "\n".join(new_lines) + "\n"
    _check_toml(new_text, path, cwd, agent)
    write_atomically(path, new_text)
    return path


def _check_toml(text: str, path: Path, cwd: str, agent: str) -> None:
    try:
        parsed = tomllib.loads(text)
    except ValueError as e:
        raise AgentError(
            f"{agent}: recording {cwd} as trusted would leave {path} unreadable ({e}); "
            "create the session with --no-trust",
            agent=agent,
        ) from e
    if parsed.get("projects", {}).get(cwd, {}).get("trust_level") != "trusted":
        raise AgentError(
            f"{agent}: could not record {cwd} as trusted in {path}; create the session with --no-trust", agent=agent
        )
