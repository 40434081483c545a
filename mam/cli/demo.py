"""`mam demo`: a self-contained tour with demo agents in real panes."""

from __future__ import annotations

import click

from mam.cli.common import echo
from mam.demo import TRY_IT
from mam.demo.tour import run_demo, summary_lines
from mam.outcomes import Exit


@click.command("demo")
@click.option("--keep", is_flag=True, help="Keep the temporary workspace afterwards (its path is printed).")
@click.option("--no-loop", is_flag=True, help="Skip the review loop part.")
@click.option("--org", is_flag=True, help="Org mode instead: roles, tasks with blockers, a breaker and a reset.")
@click.pass_obj
def demo(app: object, keep: bool, no_loop: bool, org: bool) -> int:
    """Run demo agents in a temporary workspace, with the embedded broker and a private tmux server.

    \b
    It creates demo sessions, delegates jobs (two at once, one failing on purpose),
    runs a short review loop with two demo reviewers, shows progress live, prints a
    summary and removes everything it started, then names the README's section "Trying it
    without an agent CLI" (sessions of your own with the demo agent). Needs tmux; no LLM, no network.
    With --org: a lead and two developers (roles, one reporting chain) run a task with
    two blocked subtasks; a failure trips a developer's breaker, which is reset, and
    every task's wakes and dispositions are shown (docs/org.md).
    Exit codes: 0 everything ended as expected; 1 otherwise.
    """

    result = run_demo(echo=echo, keep=keep, loop=not no_loop, org=org)
    for line in summary_lines(result):
        echo(line)
    echo(f"next: {TRY_IT}")
    return Exit.OK if result.ok else Exit.FAILED
