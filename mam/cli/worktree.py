"""`mam worktree prepare|remove`: issue worktrees for creators (worktree_prepare.sh / worktree_remove.sh)."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

import click

from mam.cli.common import App, echo, echo_json, workspace_option
from mam.errors import UsageError
from mam.util.worktree import prepare as prepare_worktree
from mam.util.worktree import remove as remove_worktree

EXIT_HELP = """
\b
Exit codes: 0 done; 1 refused or git failed (the message says why); 2 bad options.
"""


@click.group("worktree")
def worktree() -> None:
    """Prepare and remove issue worktrees (git worktree) for creator sessions."""


@worktree.command(
    "prepare",
    help="Create a git worktree on a new branch NAME from --base (refuses if the folder or branch exists).\n"
    + EXIT_HELP,
)
@workspace_option
@click.option("--name", required=True, help="Issue / branch name (a new branch).")
@click.option(
    "--path", "path", default=None, metavar="DIR", help="Where to create it (default: <workspace>/.mam/worktrees/NAME)."
)
@click.option("--base", default="HEAD", show_default=True, metavar="REV", help="Commit the branch starts from.")
@click.option("--repo", default=None, metavar="DIR", help="The repository (default: the workspace).")
@click.option(
    "--submodules/--no-submodules", default=True, show_default=True, help="Check out submodules in the new worktree."
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def prepare(
    app: App, name: str, path: str | None, base: str, repo: str | None, submodules: bool, as_json: bool
) -> None:

    where = Path(path).expanduser().resolve() if path else app.ws.state / "worktrees" / name
    done = prepare_worktree(
        Path(repo) if repo else app.ws.root,
        name,
        path=where,
        base=base,
        submodules=submodules,
        environ=dict(os.environ),
    )
    if as_json:
        echo_json(asdict(done))
    else:
        echo(f"worktree {done.path} on new branch {done.branch} from {done.base}")


@worktree.command(
    "remove",
    help="Remove a worktree, only if it and its submodules have no uncommitted or untracked files.\n" + EXIT_HELP,
)
@workspace_option
@click.option("--path", "path", default=None, metavar="DIR", help="The worktree folder.")
@click.option("--name", default=None, help="Instead of --path: <workspace>/.mam/worktrees/NAME.")
@click.option("--repo", default=None, metavar="DIR", help="The repository (default: the workspace).")
@click.option("--force", is_flag=True, help="Remove it even if it is not clean (the listed changes are lost).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def remove(app: App, path: str | None, name: str | None, repo: str | None, force: bool, as_json: bool) -> None:

    if (path is None) == (name is None):
        raise UsageError("give exactly one of --path or --name")
    where = Path(path).expanduser() if path else app.ws.state / "worktrees" / str(name)
    done = remove_worktree(Path(repo) if repo else app.ws.root, where, force=force, environ=dict(os.environ))
    if as_json:
        echo_json(asdict(done))
        return
    echo(f"removed worktree {done.path}" + (f" (branch {done.branch} kept)" if done.branch else ""))
    if done.dirty:
        echo(f"  --force discarded {len(done.dirty)} change(s):", err=True)
        for line in done.dirty:
            echo(f"    {line}", err=True)
