"""A session's own git worktree: `.mam/worktrees/<session>/` on its branch, from its lifecycle's side.

Made by `mam session create --worktree`, checked by resume (still there, still on its branch),
released by `mam session remove` (the folder only when clean or forced; the branch only when
every commit on it is in its base), and listed by `mam doctor` when a worktree has no session or
a session has lost its worktree. The git work itself is mam.util.worktree's (prepare / remove /
dirty_files); this module only decides what to do with them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mam.errors import SessionRefused, UsageError
from mam.store.sessions import SessionRow
from mam.util.git import GitError, git, git_env, maybe
from mam.util.worktree import Prepared, dirty_files, prepare
from mam.util.worktree import remove as remove_worktree
from mam.workspace import Workspace


def default_branch_name(session: str) -> str:
    return f"mam/{session}"


def worktree_path(ws: Workspace, session: str) -> Path:
    return ws.state / "worktrees" / session


@dataclass(frozen=True)
class Plan:
    """What `--worktree` will make, checked before anything is written."""

    repo: Path
    path: Path
    branch: str
    base: str  # the ref as given
    base_commit: str


def plan(
    ws: Workspace, session: str, *, branch: str | None, base: str | None, environ: Mapping[str, str] | None
) -> Plan:
    """Check a `--worktree` request; UsageError (exit 2) for anything wrong, nothing written."""
    env = git_env(environ)
    top = maybe(["rev-parse", "--show-toplevel"], cwd=ws.root, env=env) if ws.root.is_dir() else None
    if not top:
        raise UsageError(f"--worktree needs a git checkout, and the workspace {ws.root} is not in one")
    repo = Path(top)
    name = branch or default_branch_name(session)
    # `--branch` would expand `@{-1}` and the like: a name holding "@{" is refused before git sees it.
    if name.startswith("-") or "@{" in name or maybe(["check-ref-format", "--branch", name], cwd=repo, env=env) != name:
        raise UsageError(f"--branch {name!r} is not a valid branch name")
    if maybe(["rev-parse", "--verify", "--quiet", f"refs/heads/{name}"], cwd=repo, env=env):
        raise UsageError(f"branch {name!r} already exists in {repo}; choose another --branch or delete that branch")
    # No --base: the branch checked out now, by name (so an approval later merges back into it, and
    # `session remove` compares with where it is then); HEAD itself only when it is detached.
    ref = base or maybe(["symbolic-ref", "--quiet", "--short", "HEAD"], cwd=repo, env=env) or "HEAD"
    commit = maybe(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], cwd=repo, env=env)
    if not commit and not base and not maybe(["rev-parse", "--verify", "--quiet", "HEAD"], cwd=repo, env=env):
        raise UsageError(
            f"--worktree needs a commit to start from, and the git repository {repo} has none yet: "
            "make one first (e.g. git commit --allow-empty -m start)"
        )
    if not commit:
        raise UsageError(f"--base {ref!r} is not a commit in {repo}")
    path = worktree_path(ws, session)
    if os.path.lexists(path):
        raise UsageError(
            f"{path} already exists (a worktree left by an earlier session?); see `mam doctor`, "
            f"then remove it with `mam worktree remove --name {session}`"
        )
    return Plan(repo=repo, path=path, branch=name, base=ref, base_commit=commit)


def make(p: Plan, environ: Mapping[str, str] | None) -> Prepared:
    """Create the planned worktree on its new branch, from the checked base commit."""
    return prepare(p.repo, p.branch, path=p.path, base=p.base_commit, environ=environ)


def undo(p: Plan, environ: Mapping[str, str] | None) -> None:
    """Take back a worktree just made for a session that did not start: the folder and its (empty) branch."""
    env = git_env(environ)
    git(["worktree", "remove", "--force", str(p.path)], cwd=p.repo, env=env, check=False)
    tip = maybe(["rev-parse", "--verify", "--quiet", f"refs/heads/{p.branch}"], cwd=p.repo, env=env)
    if tip == p.base_commit:  # nothing was committed on it: the branch is ours to delete
        git(["branch", "-D", "--", p.branch], cwd=p.repo, env=env, check=False)


def check_resumable(row: SessionRow, environ: Mapping[str, str] | None) -> None:
    """Refuse (exit 5) to resume a worktree session whose worktree is gone or is on another branch."""
    if not row.worktree:
        return
    path = Path(row.worktree)
    env = git_env(environ)
    hint = f"remove the session with `mam session remove {row.name}` and create it again"
    if not path.is_dir() or not maybe(["rev-parse", "--show-toplevel"], cwd=path, env=env):
        raise SessionRefused(f"session {row.name!r}: its worktree {path} is gone; {hint}", session=row.name)
    on = maybe(["symbolic-ref", "--quiet", "--short", "HEAD"], cwd=path, env=env) or "a detached HEAD"
    if on != row.branch:
        raise SessionRefused(
            f"session {row.name!r}: its worktree {path} is on {on}, not on its branch {row.branch}; "
            f"check out {row.branch} there (git -C {path} switch {row.branch}) or {hint}",
            session=row.name,
        )


@dataclass(frozen=True)
class Released:
    """What `session remove` did with a session's worktree and branch."""

    worktree: str
    worktree_removed: bool
    discarded: list[str]  # what --force threw away
    branch: str
    branch_deleted: bool
    unmerged: int  # commits on the branch not in its base (the branch is kept when > 0)
    message: str

    def as_dict(self) -> dict[str, object]:
        return dict(vars(self))


def release(row: SessionRow, *, force: bool, environ: Mapping[str, str] | None) -> Released:
    """Remove the session's worktree if clean (or `force`), then its branch if every commit is in its base.

    Raises SessionRefused (exit 5) for a dirty worktree without `force`; nothing is removed then.
    """
    env = git_env(environ)
    path = Path(row.worktree)
    repo = _repo_of(row, env)
    removed, discarded = False, []
    notes: list[str] = []
    if path.is_dir():
        dirty = dirty_files(path, environ)
        if dirty and not force:
            raise _dirty(row, dirty)
        if repo is not None:
            try:
                remove_worktree(repo, path, force=force, environ=environ)
            except GitError as e:
                raise SessionRefused(f"session {row.name!r}: {e}", session=row.name) from e
            removed, discarded = True, dirty
            notes.append(f"worktree {path} removed" + (f" ({len(dirty)} change(s) discarded)" if dirty else ""))
    else:
        notes.append(f"worktree {path} was already gone")
        if repo is not None:
            git(["worktree", "prune"], cwd=repo, env=env, check=False)
    deleted, unmerged = False, 0
    if repo is not None and row.branch:
        deleted, unmerged, said = _release_branch(repo, row, env)
        notes.append(said)
    return Released(
        worktree=str(path),
        worktree_removed=removed,
        discarded=discarded,
        branch=row.branch,
        branch_deleted=deleted,
        unmerged=unmerged,
        message="; ".join(notes),
    )


def refuse_dirty(row: SessionRow, environ: Mapping[str, str] | None) -> None:
    """SessionRefused (exit 5) if the session's worktree has uncommitted or untracked files."""
    if row.worktree and Path(row.worktree).is_dir():
        dirty = dirty_files(Path(row.worktree), environ)
        if dirty:
            raise _dirty(row, dirty)


def _dirty(row: SessionRow, dirty: list[str]) -> SessionRefused:
    listing = ", ".join(dirty[:10]) + (", ..." if len(dirty) > 10 else "")
    return SessionRefused(
        f"session {row.name!r}: its worktree {row.worktree} has uncommitted changes ({listing}); commit them, "
        f"or pass --force to remove it anyway (they are lost)",
        session=row.name,
    )


def _release_branch(repo: Path, row: SessionRow, env: Mapping[str, str]) -> tuple[bool, int, str]:
    """(deleted, commits not in the base, what was said). Never deletes a branch with unmerged commits."""
    tip = maybe(["rev-parse", "--verify", "--quiet", f"refs/heads/{row.branch}"], cwd=repo, env=env)
    if not tip:
        return False, 0, f"branch {row.branch} was already gone"
    if _checked_out(repo, row.branch, env):
        return False, 0, f"branch {row.branch} kept: it is checked out in another worktree"
    base = _base_now(repo, row, env)
    count = maybe(["rev-list", "--count", tip, f"^{base}"], cwd=repo, env=env) if base else None
    if count is None:
        return False, 0, f"branch {row.branch} kept: its base {row.base or '?'} cannot be found to compare"
    unmerged = int(count)
    if unmerged:
        return (
            False,
            unmerged,
            f"branch {row.branch} kept: {unmerged} commit(s) not merged into {row.base or base}",
        )
    git(["branch", "-D", "--", row.branch], cwd=repo, env=env)
    return True, 0, f"branch {row.branch} deleted (nothing on it that {row.base or base} lacks)"


def _base_now(repo: Path, row: SessionRow, env: Mapping[str, str]) -> str | None:
    """The base to compare with: the base ref as it is now when it is a branch, else the recorded commit."""
    if row.base and row.base != "HEAD":
        ref = f"{row.base}^{{commit}}"
        now = maybe(["rev-parse", "--verify", "--quiet", "--end-of-options", ref], cwd=repo, env=env)
        if now:
            return now
    return row.base_commit or None


def _checked_out(repo: Path, branch: str, env: Mapping[str, str]) -> bool:
    text = maybe(["worktree", "list", "--porcelain"], cwd=repo, env=env) or ""
    return f"branch refs/heads/{branch}" in text.splitlines()


def _repo_of(row: SessionRow, env: Mapping[str, str]) -> Path | None:
    """The main checkout the session's worktree belongs to (the folder above `.mam/`)."""
    path = Path(row.worktree)
    state = path.parent.parent  # <workspace>/.mam/worktrees/<name>
    for folder in (path, state.parent):
        if folder.is_dir():
            common = maybe(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=folder, env=env)
            if common:
                return Path(common).parent if Path(common).name == ".git" else Path(common)
    return None


@dataclass(frozen=True)
class Stray:
    """A worktree folder without a session, or a session without its worktree (for `mam doctor`)."""

    kind: str  # "worktree without a session" | "session without its worktree"
    path: str
    session: str
    size: int  # bytes on disk (0 when the folder is gone)

    def describe(self) -> str:
        return (
            f"{self.kind}: {self.path}"
            + (f" (session {self.session})" if self.session else "")
            + (f", {human_size(self.size)}" if self.size else "")
        )


def strays(ws: Workspace, sessions: Iterable[Mapping[str, object]]) -> list[Stray]:
    """Worktrees under `.mam/worktrees/` that no session names, and sessions whose worktree is gone."""
    rows = list(sessions)
    named = {str(r.get("worktree") or "") for r in rows}
    found: list[Stray] = []
    folder = ws.state / "worktrees"
    if folder.is_dir():
        for path in sorted(folder.iterdir()):
            if path.is_dir() and str(path) not in named:
                found.append(Stray("worktree without a session", str(path), "", folder_size(path)))
    for r in rows:
        wt = str(r.get("worktree") or "")
        if wt and not Path(wt).is_dir():
            found.append(Stray("session without its worktree", wt, str(r.get("name", "")), 0))
    return found


def folder_size(path: Path) -> int:
    total = 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"
