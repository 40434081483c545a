"""The workspace: where mam is installed, its `.mam/` state folder, its slug and paths.

It owns path names only; it does not create servers or open databases.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from mam.errors import NotAWorkspace, UsageError, WorkspaceError
from mam.ids import check_job_id
from mam.util import trust

STATE_DIR = ".mam"
ENV_FILE = ".mam.env"
NOT_A_WORKSPACE = (
    "not a mam workspace (no .mam/ or .mam.env here or above): run deploy/install.sh DIR, or pass --workspace"
)


@dataclass(frozen=True)
class Workspace:
    root: Path

    # Paths are worked out once per Workspace (cached_property): the node asks for them thousands of times a
    # minute. They depend on `root` only, which never changes.

    @cached_property
    def state(self) -> Path:
        return self.root / STATE_DIR

    @cached_property
    def env_file(self) -> Path:
        return self.root / ENV_FILE

    @cached_property
    def slug(self) -> str:
        return workspace_slug(self.root)

    @cached_property
    def db_path(self) -> Path:
        return self.state / "agent-sessions.db"

    @cached_property
    def mirror_path(self) -> Path:
        return self.state / "agent-sessions.yaml"

    @cached_property
    def jobs_dir(self) -> Path:
        return self.state / "jobs"

    @cached_property
    def logs_dir(self) -> Path:
        return self.state / "delegate_job_logs"

    @cached_property
    def broker_dir(self) -> Path:
        return self.state / "broker"

    @cached_property
    def locks_dir(self) -> Path:
        return self.state / "locks"

    @cached_property
    def run_dir(self) -> Path:
        return self.state / "run"

    @cached_property
    def venv_bin(self) -> Path:
        return self.root / ".venv" / "bin"

    def job_record(self, job_id: str) -> Path:
        return (
            self.jobs_dir / f"{check_job_id(job_id)}.json"
        )  # the last line of defence: ids are checked where they enter

    def job_log_dir(self, job_id: str) -> Path:
        return self.logs_dir / check_job_id(job_id)

    def session_dir(self, name: str) -> Path:
        """Per-session files mam writes for an agent's launch (settings, config): never the user's own config."""
        return self.state / "sessions" / name

    def lock(self, name: str) -> Path:
        return self.locks_dir / f"{name}.lock"

    def check_trusted(self) -> None:
        """Refuse a `.mam/` or `.mam.env` of another user or writable by others; tighten `.mam/` to 0700."""

        trust.check_state_dir(self.state)
        trust.check_path(self.env_file, what="settings file")

    def ensure_state(self) -> Path:
        """Create `.mam/` (0700, or check and tighten an existing one) and its sub-folders; return it."""

        trust.check_state_dir(self.state)
        try:
            for folder in (self.state, self.jobs_dir, self.logs_dir, self.locks_dir, self.run_dir):
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as e:
            raise WorkspaceError(f"cannot create {self.state}: {e}") from e
        return self.state


def workspace_slug(root: Path) -> str:
    """A short, stable, socket-safe name for a workspace: its folder name plus a hash of its path."""
    base = re.sub(r"[^a-z0-9]+", "-", root.name.lower()).strip("-")[:24] or "ws"
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:6]
    return f"{base}-{digest}"


def find_workspace(
    explicit: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    check: bool = True,
) -> Workspace:
    """`--workspace`, else `MAM_WORKSPACE`, else the nearest folder up from cwd with `.mam/` or `.mam.env`.

    None of these: NotAWorkspace (exit 2), so a command run in the wrong folder creates nothing there.

    The workspace found is checked (`Workspace.check_trusted`): a `.mam/` or `.mam.env` planted
    by another user, e.g. in /tmp above the folder mam runs in, is refused, never used.
    `check=False` (for `mam doctor`, which only looks and reports): found, not judged.
    """
    environ = os.environ if environ is None else environ
    chosen = explicit or environ.get("MAM_WORKSPACE") or ""
    if chosen:
        root = Path(chosen).expanduser()
        if not root.is_dir():
            source = "--workspace" if explicit else "MAM_WORKSPACE"
            raise UsageError(f"workspace folder does not exist: {root} (from {source})")
        ws = Workspace(root.resolve())
        if check:
            ws.check_trusted()
        return ws
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        # lexists: a planted symbolic link counts as found (and is then refused), not skipped.
        state, env = folder / STATE_DIR, folder / ENV_FILE
        if state.is_dir() or state.is_symlink() or (os.path.lexists(env) and not env.is_dir()):
            ws = Workspace(folder)
            if check:
                ws.check_trusted()
            return ws
    raise NotAWorkspace(NOT_A_WORKSPACE)
