"""Review identity: the exact source a round reviews, named by base, head and a tree hash.

The tree includes uncommitted and untracked (not ignored) files. It is computed with a
temporary index in the OS temp dir (`GIT_INDEX_FILE`): `read-tree HEAD`, `add -A`,
`write-tree`. The user's index and working tree are never touched (git only adds objects).

Base default: the merge-base of HEAD with the default branch (origin/HEAD, else
init.defaultBranch / main / master), resolved once when the loop starts; with no default
branch, HEAD itself (HEAD~0) at that moment. Either way it is pinned as a commit id.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from mam.errors import UsageError
from mam.util.git import git, git_env, maybe, out

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


@dataclass(frozen=True)
class Snapshot:
    repo: str
    base: str
    head: str  # '' when the repository has no commit yet
    tree: str
    dirty: bool  # the tree differs from HEAD's: uncommitted or untracked files are part of it

    def same_source(self, other: Snapshot) -> bool:
        return (self.head, self.tree) == (other.head, other.tree)

    def identity(self) -> dict[str, object]:
        return asdict(self)


def default_branch(repo: Path, env: Mapping[str, str]) -> str | None:
    """The ref of the default branch, or None if there is no way to tell."""
    remote_head = maybe(["symbolic-ref", "--quiet", "refs/remotes/origin/HEAD"], cwd=repo, env=env)
    if remote_head:
        return remote_head
    configured = maybe(["config", "--get", "init.defaultBranch"], cwd=repo, env=env)
    for name in dict.fromkeys([configured or "", "main", "master"]):
        for ref in (f"refs/heads/{name}", f"refs/remotes/origin/{name}"):
            if name and maybe(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=repo, env=env):
                return ref
    return None


def resolve_base(repo: Path, base: str | None, environ: Mapping[str, str] | None) -> tuple[str, str]:
    """(commit id, how it was chosen) of the base the loop reviews against."""
    env = git_env(environ)
    if base:
        sha = maybe(["rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"], cwd=repo, env=env)
        if not sha:
            raise UsageError(f"--base {base!r} is not a commit in {repo}")
        return sha, f"--base {base}"
    head = maybe(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd=repo, env=env)
    if not head:
        return EMPTY_TREE, "the empty tree (the repository has no commit yet)"
    branch = default_branch(repo, env)
    if branch:
        merge_base = maybe(["merge-base", "HEAD", branch], cwd=repo, env=env)
        if merge_base:
            return merge_base, f"merge-base of HEAD and {branch.removeprefix('refs/heads/')}"
    return head, "HEAD when the loop started (no default branch found)"


def take_snapshot(
    repo: Path, base: str, environ: Mapping[str, str] | None, *, exclude: Sequence[Path] = ()
) -> Snapshot:
    """The snapshot of `repo` now. `exclude`: folders inside the repo never part of the source (mam's own state)."""
    env = git_env(environ)
    top = Path(out(["rev-parse", "--show-toplevel"], cwd=repo, env=env))
    head = maybe(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd=top, env=env) or ""
    # An excluded folder that .gitignore already ignores must not be named: `git add` refuses ignored paths.
    specs = ["."] + [
        f":(exclude){rel}"
        for rel in _inside(top, exclude)
        if maybe(["check-ignore", "--quiet", "--no-index", rel], cwd=top, env=env) is None
    ]
    with tempfile.TemporaryDirectory(prefix="mam-snapshot-") as tmp:
        index_env = {**env, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(["read-tree", "HEAD"] if head else ["read-tree", "--empty"], cwd=top, env=index_env)
        git(["add", "-A", "--", *specs], cwd=top, env=index_env)
        tree = out(["write-tree"], cwd=top, env=index_env)
    head_tree = maybe(["rev-parse", "--verify", "--quiet", "HEAD^{tree}"], cwd=top, env=env) if head else EMPTY_TREE
    return Snapshot(repo=str(top), base=base, head=head, tree=tree, dirty=tree != head_tree)


def _inside(top: Path, folders: Sequence[Path]) -> list[str]:
    rels = []
    for folder in folders:
        try:
            rel = folder.resolve().relative_to(top.resolve())
        except ValueError:
            continue
        if str(rel) != ".":
            rels.append(rel.as_posix())
    return rels
