"""Git worktrees for loop creators and sessions: prepare one from a base rev, remove one only when it is clean.

Clean means no uncommitted or untracked files in the worktree or in any of its (recursive)
submodules. Every git call is an argv list; nothing is run through a shell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mam.util.git import GitError, git, git_env, maybe, out


@dataclass(frozen=True)
class Prepared:
    path: str
    branch: str
    base: str  # commit id
    submodules: bool


@dataclass(frozen=True)
class Removed:
    path: str
    branch: str
    forced: bool
    dirty: list[str] = field(default_factory=list)  # what --force threw away


def prepare(
    repo: Path,
    name: str,
    *,
    path: Path,
    base: str = "HEAD",
    submodules: bool = True,
    environ: Mapping[str, str] | None = None,
) -> Prepared:
    """`git worktree add -b NAME PATH BASE` (+ submodules); refuses if the folder or the branch exists."""
    env = git_env(environ)
    top = _top(repo, env)
    if maybe(["check-ref-format", "--branch", name], cwd=top, env=env) is None:
        raise GitError(f"{name!r} is not a valid branch name", name=name)
    if path.exists():
        raise GitError(
            f"{path} already exists; remove it first (worktree remove) or choose another --path", path=str(path)
        )
    if maybe(["rev-parse", "--verify", "--quiet", f"refs/heads/{name}"], cwd=top, env=env):
        raise GitError(f"branch {name!r} already exists in {top}; choose another name or delete the branch", name=name)
    commit = maybe(["rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"], cwd=top, env=env)
    if not commit:
        raise GitError(f"base {base!r} is not a commit in {top}", base=base)
    path.parent.mkdir(parents=True, exist_ok=True)
    git(["worktree", "add", "-b", name, str(path), commit], cwd=top, env=env)
    with_subs = submodules and (path / ".gitmodules").is_file()
    if with_subs:
        try:
            git(["submodule", "update", "--init", "--recursive"], cwd=path, env=env)
        except GitError as e:
            raise GitError(
                f"worktree {path} was created, but its submodules could not be checked out: {e}; "
                f"fix that, or remove the worktree with `mam worktree remove --path {path} --force`",
                path=str(path),
            ) from e
    return Prepared(path=str(path), branch=name, base=commit, submodules=with_subs)


def dirty_files(path: Path, environ: Mapping[str, str] | None = None) -> list[str]:
    """Uncommitted or untracked entries of the worktree and of its submodules, as `sub/dir: XY file`."""
    env = git_env(environ)
    found = [f"{line}" for line in _porcelain(path, env)]
    status = maybe(["submodule", "status", "--recursive"], cwd=path, env=env) or ""
    for line in status.splitlines():
        if not line or line[0] == "-":  # not initialised: nothing checked out, nothing to lose
            continue
        sub = line[1:].split(" ", 1)[1]
        if sub.endswith(")") and " (" in sub:  # drop the trailing `(describe)`
            sub = sub.rsplit(" (", 1)[0]
        found += [f"{sub}: {entry}" for entry in _porcelain(path / sub, env)]
    return found


def remove(repo: Path, path: Path, *, force: bool = False, environ: Mapping[str, str] | None = None) -> Removed:
    """Remove a linked worktree after checking it is clean; `force` removes it anyway."""
    env = git_env(environ)
    top = _top(repo, env)
    entry = _find_worktree(top, path, env)
    if entry is None:
        raise GitError(f"{path} is not a worktree of {top} (see `git worktree list`)", path=str(path))
    if entry["path"] == str(_main_worktree(top, env)):
        raise GitError(
            f"{path} is the main checkout of {top}, not a linked worktree; it is never removed", path=str(path)
        )
    wt = Path(entry["path"])
    dirty = dirty_files(wt, environ) if wt.is_dir() else []
    if dirty and not force:
        listing = "\n  ".join(dirty[:50]) + ("\n  ..." if len(dirty) > 50 else "")
        raise GitError(
            f"worktree {wt} is not clean; commit or discard these first (or pass --force):\n  {listing}",
            path=str(wt),
            dirty=dirty,
        )
    # The check above covers submodules; git itself refuses any worktree with submodules without --force.
    git(["worktree", "remove", "--force", *(["--force"] if force else []), str(wt)], cwd=top, env=env)
    return Removed(
        path=str(wt),
        branch=entry.get("branch", "").removeprefix("refs/heads/"),
        forced=force and bool(dirty),
        dirty=dirty if force else [],
    )


def _porcelain(path: Path, env: Mapping[str, str]) -> list[str]:
    text = git(["status", "--porcelain", "--untracked-files=all", "--ignore-submodules=none"], cwd=path, env=env).stdout
    return [line for line in text.splitlines() if line.strip()]


def _top(repo: Path, env: Mapping[str, str]) -> Path:
    if not repo.is_dir():
        raise GitError(f"{repo} is not a folder", path=str(repo))
    top = maybe(["rev-parse", "--show-toplevel"], cwd=repo, env=env)
    if not top:
        raise GitError(f"{repo} is not in a git checkout", path=str(repo))
    return Path(top)


def _worktrees(top: Path, env: Mapping[str, str]) -> list[dict[str, str]]:
    entries: list[dict[str, str]] = []
    for line in out(["worktree", "list", "--porcelain"], cwd=top, env=env).splitlines():
        key, _, value = line.partition(" ")
        if key == "worktree":
            entries.append({"path": value})
        elif entries and key:
            entries[-1][key] = value
    return entries


def _main_worktree(top: Path, env: Mapping[str, str]) -> Path:
    return Path(_worktrees(top, env)[0]["path"])


def _find_worktree(top: Path, path: Path, env: Mapping[str, str]) -> dict[str, str] | None:
    want = path.expanduser().resolve()
    return next((e for e in _worktrees(top, env) if Path(e["path"]).resolve() == want), None)
