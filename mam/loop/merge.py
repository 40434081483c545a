"""Landing an approved change: merge the reviewed head into the base branch (ff, merge or squash).

The new commit of the base branch is made with plumbing (merge-tree, commit-tree), so no
checkout is touched while it is worked out; the branch then moves only forward, to that commit:
with `git merge --ff-only` in the checkout that has the base branch checked out (its files follow,
and git refuses if that would overwrite local changes), else with `update-ref` guarded by the old
value. Every git call is an argv list; nothing runs through a shell.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from mam.errors import ApprovalRefused
from mam.util.git import GitError, git, maybe, out

MODES = ("ff", "merge", "squash")


def branch_tip(repo: Path, branch: str, env: Mapping[str, str]) -> str | None:
    return maybe(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"], cwd=repo, env=env)


def tree_of(repo: Path, commit: str, env: Mapping[str, str]) -> str:
    return out(["rev-parse", f"{commit}^{{tree}}"], cwd=repo, env=env)


def checked_out_at(repo: Path, branch: str, env: Mapping[str, str]) -> Path | None:
    """The worktree (main checkout included) that has `branch` checked out, if any."""
    path: str | None = None
    for line in out(["worktree", "list", "--porcelain"], cwd=repo, env=env).splitlines():
        key, _, value = line.partition(" ")
        if key == "worktree":
            path = value
        elif key == "branch" and value == f"refs/heads/{branch}" and path:
            return Path(path)
    return None


def merge(
    repo: Path, *, base_branch: str, head: str, mode: str, message: str, env: Mapping[str, str]
) -> tuple[str, str]:
    """Merge `head` into `base_branch`; return (the branch's new commit, what was done). ApprovalRefused if
    it cannot be done as asked (not a fast-forward, a conflict, local changes in the base's checkout)."""
    if mode not in MODES:
        raise ApprovalRefused(f"--merge {mode!r}: use ff, merge or squash")
    old = branch_tip(repo, base_branch, env)
    if not old:
        raise ApprovalRefused(f"the base branch {base_branch!r} does not exist in {repo}")
    if mode == "ff":
        if maybe(["merge-base", "--is-ancestor", old, head], cwd=repo, env=env) is None:
            raise ApprovalRefused(
                f"{base_branch} moved to {old[:12]} since the change was made and is not an ancestor of the reviewed "
                f"head {head[:12]}: a fast-forward is impossible; approve with --merge merge or --merge squash"
            )
        new = head
    else:
        proc = git(["merge-tree", "--write-tree", "--no-messages", old, head], cwd=repo, env=env, check=False)
        if proc.returncode != 0:
            raise ApprovalRefused(
                f"the reviewed head {head[:12]} does not merge cleanly into {base_branch} ({old[:12]}): "
                f"{proc.stdout.strip().splitlines()[1:2] or proc.stderr.strip()}"
            )
        tree = proc.stdout.split()[0]
        parents = ["-p", old, "-p", head] if mode == "merge" else ["-p", old]
        new = out(["commit-tree", tree, *parents, "-m", message], cwd=repo, env=env)
    where = checked_out_at(repo, base_branch, env)
    if where is not None:
        changed = maybe(["status", "--porcelain", "--untracked-files=no"], cwd=where, env=env)
        if changed:
            raise ApprovalRefused(
                f"{where} has {base_branch} checked out with uncommitted changes; commit or stash them, then approve"
            )
        try:
            git(["merge", "--ff-only", "-q", new], cwd=where, env=env)
        except GitError as e:
            raise ApprovalRefused(f"could not move {base_branch} in {where}: {e}") from e
    else:
        git(["update-ref", "-m", message.splitlines()[0], f"refs/heads/{base_branch}", new, old], cwd=repo, env=env)
    done = {"ff": "fast-forwarded", "merge": "merged (merge commit)", "squash": "squashed"}[mode]
    return new, f"{base_branch} {done}: {old[:12]} -> {new[:12]}"
