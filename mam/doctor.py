"""`mam doctor`: check a workspace's files, owners, modes, registry, mirror and broker; restore sessions.

Checking only reads (the registry is opened read-only). Restoring the sessions table from the
YAML mirror is the one repair, and only after a person confirms (the CLI asks): the damaged
registry is moved aside, never deleted.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from mam.agents import get_adapter, known_agents
from mam.broker import embedded
from mam.broker.survey import survey
from mam.demo import TRY_IT
from mam.errors import MamError, StoreError, UsageError
from mam.sessions.worktree import strays
from mam.store import inspect
from mam.store import sessions as sessions_table
from mam.store.registry import Registry
from mam.store.sessions import SessionRow
from mam.util import trust
from mam.util.flock import FileLock
from mam.util.proc import find_program
from mam.workspace import Workspace

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Report:
    workspace: Path
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.status != FAIL for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {"workspace": str(self.workspace), "ok": self.ok, "checks": [c.as_dict() for c in self.checks]}


def check(ws: Workspace, *, load_settings: Callable[[], Any], environ: Mapping[str, str] | None = None) -> Report:
    """Run every check; never raises for what it finds (each finding is a Check). `environ`: whose PATH
    the agent CLIs are looked up on (default: this process's, with the workspace's venv first, as panes get it)."""
    checks = [_owned(ws.env_file, "settings file"), _owned(ws.state, "state folder", private=True)]
    checks.append(_settings(load_settings))
    db = _registry(ws)
    checks.append(db.check)
    checks.append(_mirror(ws, db.sessions))
    checks.append(_records(ws))
    checks.append(_worktrees(ws, db.sessions))
    checks.append(_broker(ws, load_settings))
    if db.sessions is not None:
        checks.append(_webhook(ws))
    settings = _settings_or_none(load_settings)
    checks.append(_tmux(settings))
    checks.extend(_agents(ws, db.sessions or {}, os.environ if environ is None else environ))
    if settings is not None:
        checks.extend(_panes(ws, settings, db.sessions or {}))
    return Report(ws.root, checks)


def _settings_or_none(load_settings: Callable[[], Any]) -> Any:
    try:
        return load_settings()
    except MamError:
        return None


_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|[\x00-\x1f\x7f]")


def _version(argv: list[str], timeout: float = 15.0) -> str:
    """The first line a program prints for `argv` (its version), control characters removed; "" if none."""
    try:
        done = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (done.stdout or done.stderr).decode("utf-8", "replace").strip()
    return _CONTROL.sub("", text.splitlines()[0]).strip()[:120] if text else ""


def _tmux(settings: Any) -> Check:
    found = find_program("tmux")  # the one mam runs: never from a relative PATH entry
    needed = settings is None or settings.backend == "tmux"
    if found is None:
        how = "install it (e.g. apt-get install tmux)"
        return Check("tmux", FAIL if needed else WARN, f"not on PATH: {how}; mam runs agents in tmux panes")
    version = _version([found, "-V"])
    return Check("tmux", OK if version else WARN, f"{version or 'version unknown'} ({found})")


def _agents(ws: Workspace, sessions: dict[str, dict[str, Any]], environ: Mapping[str, str]) -> list[Check]:
    """Each agent CLI: where it is on the panes' PATH and its version, or missing (a failure only when a
    live or resumable session of the workspace runs it)."""

    first = ws.venv_bin if (ws.venv_bin / "mam").exists() else Path(sys.executable).parent
    path = os.pathsep.join([str(first), environ.get("PATH", os.defpath)])
    used = {row.get("agent") for row in sessions.values() if row.get("status") in ("running", "starting", "stopped")}
    adapters = [get_adapter(name) for name in known_agents() if name != "demo"]
    found = {a.name: shutil.which(a.command, path=path) for a in adapters}
    with ThreadPoolExecutor(max_workers=4) as pool:  # each CLI may take a second to say its version
        versions = dict(
            zip(found, pool.map(lambda where: _version([where, "--version"]) if where else "", found.values()))
        )
    checks = []
    for a in adapters:
        name = f"agent {a.name}"
        where = found[a.name]
        if where is None:
            how = f"install it ({a.install_hint})" if a.install_hint else "install it"
            status = FAIL if a.name in used else WARN
            checks.append(Check(name, status, f"{a.command} not on PATH: {how}"))
        else:
            checks.append(_drift(name, a, versions[a.name], where))
    if not any(found.values()):
        checks.append(Check("agents", WARN, f"no agent CLI found; {TRY_IT}"))
    return checks


_SEMVER = re.compile(r"\b(\d+\.\d+\.\d+)\b")


def _drift(name: str, adapter: Any, said: str, where: str) -> Check:
    """An installed CLI against the version mam's screen reading was verified with: a warning naming
    what relies on its screen when they differ (or its version cannot be told)."""
    found = _SEMVER.search(said)
    have = found.group(1) if found else ""
    verified = adapter.verified_version
    if not verified or have == verified:
        note = " (verified with mam)" if verified else ""
        return Check(name, OK, f"{said or 'version unknown'}{note} ({where})")
    relies = "; ".join(adapter.screen_checks())
    return Check(
        name,
        WARN,
        f"{have or 'version unknown'} ({where}), mam was verified with {verified}: mam reads its screen for {relies}",
    )


def _panes(ws: Workspace, settings: Any, sessions: dict[str, dict[str, Any]]) -> list[Check]:
    """Every session the registry says is running: is its agent alive in its pane? (Looks only.)"""
    from mam.panes import open_backend

    checks = []
    for name, row in sorted(sessions.items()):
        if row.get("status") not in ("running", "starting"):
            continue
        what = f"session {name}"
        pane_id = row.get("pane_id") or ""
        try:
            backend = open_backend(
                str(row.get("backend")),
                str(row.get("server")),
                settings=settings,
                ws=ws,
                socket=str(row.get("socket") or ""),
            )
            info = backend.pane(pane_id) if pane_id else None
            status = backend.exit_status(pane_id) if info is not None and info.dead else None
        except MamError as e:
            checks.append(Check(what, WARN, f"cannot look at its pane: {e}"))
            continue
        fix = f"resume it (`mam session resume --session {name}`) or stop it"
        if info is None:
            checks.append(Check(what, FAIL, f"{row.get('agent')}: pane {pane_id or '-'} is gone; {fix}"))
        elif info.dead:
            said = f" with status {status}" if status is not None else ""
            checks.append(Check(what, FAIL, f"{row.get('agent')} exited{said} (pane {pane_id} is dead); {fix}"))
        else:
            checks.append(Check(what, OK, f"{row.get('agent')} alive in pane {pane_id} (pid {info.pid})"))
    return checks


def _owned(path: Path, what: str, *, private: bool = False) -> Check:
    try:
        st = trust.check_path(path, what=what)
    except MamError as e:
        return Check(what, FAIL, str(e))
    if st is None:
        return Check(what, OK, f"{path}: none")
    mode = stat.S_IMODE(st.st_mode)
    if private and not os.access(path, os.W_OK):
        return Check(what, FAIL, f"{path}: mam cannot write here (read-only file system or folder)")
    if private and mode & 0o077:
        return Check(
            what, WARN, f"{path}: mode {mode:04o}, others may look inside; mam makes it 0700 on its next write"
        )
    return Check(what, OK, f"{path}: yours, mode {mode:04o}")


def _settings(load_settings: Callable[[], Any]) -> Check:
    try:
        settings = load_settings()
    except MamError as e:
        return Check("settings", FAIL, str(e))
    if settings.warnings:
        return Check("settings", WARN, "; ".join(settings.warnings))
    return Check("settings", OK, f"{settings.env_file or 'no .mam.env'}; every key known and valid")


@dataclass(frozen=True)
class _Db:
    check: Check
    sessions: dict[str, dict[str, Any]] | None  # None: the registry could not be read


def _registry(ws: Workspace) -> _Db:
    path = ws.db_path
    name = "registry"
    if not os.path.lexists(path):
        return _Db(Check(name, OK, f"{path}: none yet (created on first use)"), {})
    try:
        st = trust.check_path(path, what="registry")
    except MamError as e:
        return _Db(Check(name, FAIL, str(e)), None)
    assert st is not None
    if st.st_size == 0:
        return _Db(
            Check(
                name, FAIL, f"{path} is empty (0 bytes); restore the sessions with `mam doctor --restore-from-mirror`"
            ),
            None,
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        return _Db(
            Check(name, WARN, f"{path}: mode {stat.S_IMODE(st.st_mode):04o}, expected 0600"),
            inspect.read_sessions(path),
        )
    try:
        version, problems, sessions = inspect.examine(path)
    except sqlite3.Error as e:
        return _Db(
            Check(name, FAIL, f"{path} is damaged ({e}); restore the sessions with `mam doctor --restore-from-mirror`"),
            None,
        )
    if version == 0:
        return _Db(Check(name, FAIL, f"{path} is not a mam registry (schema version 0)"), None)
    if problems != ["ok"]:
        return _Db(Check(name, FAIL, f"{path} failed its integrity check: {'; '.join(problems)}"), None)
    return _Db(Check(name, OK, f"{path}: integrity ok, schema {version}, {len(sessions or {})} sessions"), sessions)


def _worktrees(ws: Workspace, sessions: dict[str, dict[str, Any]] | None) -> Check:
    """Worktrees under .mam/worktrees/ without a session, and sessions whose worktree is gone, with sizes."""
    found = strays(ws, (sessions or {}).values())
    if not found:
        return Check("worktrees", OK, "every session worktree has its session and every session its worktree")
    return Check("worktrees", WARN, "; ".join(s.describe() for s in found))


def read_mirror(path: Path) -> tuple[int, list[dict[str, Any]]]:
    """(generation, session dicts) from the YAML mirror; StoreError if it is absent or not a mirror."""

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise StoreError(f"cannot read the sessions mirror {path}: {e}", path=str(path)) from e
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("sessions"), list):
        raise StoreError(f"{path} is not a mam sessions mirror (version 1)", path=str(path))
    rows = doc["sessions"]
    if not all(isinstance(r, dict) and isinstance(r.get("name"), str) for r in rows):
        raise StoreError(f"{path}: a session entry has no name", path=str(path))
    return int(doc.get("generation") or 0), rows


def _mirror(ws: Workspace, db_sessions: dict[str, dict[str, Any]] | None) -> Check:
    name = "mirror"
    path = ws.mirror_path
    if not path.exists():
        return Check(
            name,
            OK if not db_sessions else WARN,
            f"{path}: none" + (" (rewritten on the next session change)" if db_sessions else ""),
        )
    try:
        generation, rows = read_mirror(path)
    except StoreError as e:
        return Check(name, FAIL if db_sessions is None else WARN, str(e))
    if db_sessions is None:
        return Check(
            name,
            WARN,
            f"{path}: {len(rows)} sessions (generation {generation}) that `mam doctor --restore-from-mirror` can "
            "restore",
        )
    mirrored = {r["name"]: r for r in rows}
    if set(mirrored) != set(db_sessions):
        missing, extra = sorted(set(db_sessions) - set(mirrored)), sorted(set(mirrored) - set(db_sessions))
        return Check(
            name,
            WARN,
            f"{path} disagrees with the registry (not mirrored: {missing}, only in the mirror: {extra}); "
            "it is rewritten on the next session change",
        )
    differ = sorted(
        n
        for n, r in mirrored.items()
        if r.get("conversation_id") != db_sessions[n].get("conversation_id")
        or r.get("status") != db_sessions[n].get("status")
    )
    if differ:
        return Check(
            name, WARN, f"{path} is behind the registry for {differ}; it is rewritten on the next session change"
        )
    return Check(name, OK, f"{path}: agrees with the registry ({len(rows)} sessions)")


def _records(ws: Workspace) -> Check:
    name = "job records"
    try:
        records = sorted(ws.jobs_dir.glob("*.json"))
    except OSError as e:
        return Check(name, FAIL, f"cannot list {ws.jobs_dir}: {e.strerror}")
    loose = []
    for record in records:
        try:
            st = os.lstat(record)
        except OSError:
            continue
        if st.st_uid != trust.me() or stat.S_IMODE(st.st_mode) & 0o077:
            loose.append(f"{record.name} ({trust.user_name(st.st_uid)}, {stat.S_IMODE(st.st_mode):04o})")
    if loose:
        return Check(
            name, FAIL, f"records that hold a job token are not private to you (expected 0600): {', '.join(loose[:5])}"
        )
    return Check(name, OK, f"{len(records)} in {ws.jobs_dir}, all 0600 and yours")


def _webhook(ws: Workspace) -> Check:
    """Whether the routines' webhook URL reaches them: its port held by another program fails."""
    from mam.routines.health import webhook_problem

    registry = Registry.open_existing(ws)
    if registry is None:
        return Check("routine webhook", OK, "no routines")
    try:
        problem = webhook_problem(registry)
    except (MamError, sqlite3.Error) as e:
        return Check("routine webhook", WARN, f"cannot read the routines: {e}")
    finally:
        registry.close()
    if problem:
        return Check("routine webhook", FAIL, f"down: {problem}")
    return Check("routine webhook", OK, "served by the node, or no routine has one")


def _broker(ws: Workspace, load_settings: Callable[[], Any]) -> Check:

    try:
        settings = load_settings()
    except MamError:
        settings = None
    if settings is not None and settings.brokers:
        found = survey(settings, ws)
        assert found is not None
        where = "configured broker" + ("s" if len(found.brokers) > 1 else "")
        return Check("broker", OK if found.in_use else FAIL, f"{where} (MQTT_BROKER): {found.summary()}")
    try:
        st = embedded.status(ws)
    except MamError as e:
        return Check("broker", FAIL, str(e))
    if st.running:
        return Check("broker", OK, f"embedded broker running: pid {st.pid}, 127.0.0.1:{st.port}")
    return Check(
        "broker",
        OK,
        "embedded broker not running (started on demand)" + (" ; its pid record is stale" if st.stale else ""),
    )


# -- restore ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RestorePlan:
    db: Path
    mirror: Path
    generation: int
    sessions: list[dict[str, Any]]
    aside: Path  # where the damaged registry goes


def plan_restore(ws: Workspace) -> RestorePlan:
    """What `--restore-from-mirror` would do; refuses (UsageError) when the registry is healthy."""
    db = _registry(ws)
    if db.check.status != FAIL:
        raise UsageError(f"the registry is not damaged ({db.check.detail}); nothing to restore")
    generation, rows = read_mirror(ws.mirror_path)
    _session_rows(ws.mirror_path, rows)  # every entry must make a session before anything is moved
    stamp = time.strftime("%Y%m%dT%H%M%S")
    return RestorePlan(
        ws.db_path, ws.mirror_path, generation, rows, ws.db_path.with_name(f"{ws.db_path.name}.broken-{stamp}")
    )


def _session_rows(mirror: Path, rows: list[dict[str, Any]]) -> list[Any]:

    known = {f.name for f in fields(SessionRow)}
    out, seen = [], set()
    for row in rows:
        try:
            session = SessionRow(**{k: v for k, v in row.items() if k in known})
        except (TypeError, ValueError) as e:  # a missing field, an unknown status
            raise StoreError(f"{mirror}: session {row.get('name')!r} cannot be restored ({e})", path=str(mirror)) from e
        if session.name in seen:
            raise StoreError(f"{mirror}: session {session.name!r} appears twice", path=str(mirror))
        seen.add(session.name)
        out.append(session)
    return out


def restore(ws: Workspace, plan: RestorePlan) -> int:
    """Move the damaged registry aside and rebuild the sessions table from the mirror; the count restored."""

    rows = _session_rows(plan.mirror, plan.sessions)
    with FileLock(str(ws.lock("mirror"))):
        for suffix in ("", "-wal", "-shm"):
            old = Path(f"{plan.db}{suffix}")
            if os.path.lexists(old):
                os.replace(old, f"{plan.aside}{suffix}")
    registry = Registry(ws)
    try:
        with registry.write() as conn:
            for row in rows:
                sessions_table.insert(conn, row)
            sessions_table.set_generation(conn, plan.generation + 1)
        registry.refresh_mirror(force=True)
    finally:
        registry.close()
    return len(plan.sessions)
