"""Running git for loops, worktrees and sessions' worktrees: argv only (never a shell), an explicit environment.

The environment is passed in by the caller (the CLI hands over its own); variables that
would point git at another repository or index (GIT_DIR, GIT_INDEX_FILE, ...) are dropped
so a loop started from inside a git hook still looks at the checkout it was given.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from mam.errors import LoopError
from mam.util.proc import clean_path, find_program

# Variables that redirect git away from the repository found from `cwd`.
_REDIRECTS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_PREFIX",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
)
FALLBACK_PATH = "/usr/local/bin:/usr/bin:/bin"


class GitError(LoopError):
    """Raised when a git command the loop or a worktree operation needs fails."""


def git_env(environ: Mapping[str, str] | None, **extra: str) -> dict[str, str]:
    """`environ` without the redirecting variables, plus `extra`; a bare PATH when none is given."""
    base = dict(environ) if environ is not None else {"PATH": FALLBACK_PATH}
    env = {k: v for k, v in base.items() if k not in _REDIRECTS}
    env.setdefault("PATH", FALLBACK_PATH)
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.update(extra)
    return env


def git(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str], check: bool = True
) -> subprocess.CompletedProcess[str]:
    """git by its absolute path, found on env's PATH without its relative and empty entries (a `git` in
    `cwd` or the caller's folder never runs), with that PATH (so do the programs git runs)."""
    path = clean_path(env.get("PATH", FALLBACK_PATH))
    try:
        program = find_program("git", path)
        if program is None:
            raise FileNotFoundError(f"git is not on PATH ({path or 'no absolute folder'})")
        proc = subprocess.run(
            [program, *args], cwd=cwd, env={**env, "PATH": path}, capture_output=True, text=True, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise GitError(f"cannot run git {' '.join(args[:2])} in {cwd}: {e}", cwd=str(cwd)) from e
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise GitError(
            f"git {' '.join(args[:3])} failed in {cwd}: {detail[-1] if detail else f'exit {proc.returncode}'}",
            cwd=str(cwd),
        )
    return proc


def out(args: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> str:
    return git(args, cwd=cwd, env=env).stdout.strip()


def maybe(args: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> str | None:
    """The command's output, or None if it failed (for questions such as 'is there a HEAD?')."""
    proc = git(args, cwd=cwd, env=env, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def toplevel(path: Path, env: Mapping[str, str]) -> Path | None:
    """The top of the git checkout holding `path`, or None if it is not in one."""
    if not path.is_dir():
        return None
    top = maybe(["rev-parse", "--show-toplevel"], cwd=path, env=env)
    return Path(top) if top else None
