"""`mam budget`: the governor's caps and what they hold (mam/governor/status.py)."""

from __future__ import annotations

import click

from mam.cli.common import App, echo, echo_json, workspace_option

BUDGET_HELP = """Show the running-job caps and token budgets, and what each holds now.

\b
Caps (settings, `mam config` lists them; 0 means no cap):
  MAM_MAX_RUNNING_JOBS          jobs delivered and not ended, workspace-wide
  MAM_MAX_RUNNING_JOBS_<ROLE>   the same for the sessions of one role (e.g. _REVIEWER)
  MAM_TOKEN_BUDGET              tokens the workspace's jobs may spend, ever
  MAM_TOKEN_BUDGET_DAILY        tokens they may spend per UTC day
  session create --token-budget N   tokens one session's jobs may spend
  job delegate --max-tokens N   a job is stopped (exit 6) once its measured usage passes N

\b
Before its brief is typed, a job takes a running slot and reserves its estimate
(--estimate-tokens, else the median of its role's last 20 completed jobs, else
MAM_DEFAULT_ESTIMATE_TOKENS) against every token cap at once. When it ends, the reservation
is committed with its measured usage (its CLI's own records), or released if it never ran.
A job that does not fit waits `queued`, in the registry's job order; one a budget can never
fit is refused at once (exit 6, budget_exhausted). At 80 % of a token cap: one warning.

\b
For each token cap: committed (spent), reserved (held by jobs in flight), used
(committed + reserved), remaining; then each session and role, running and queued counts,
and the tokens saved by dedup (delegations that attached to an existing job, times its tokens).

\b
Exit codes:
  0  printed (an empty workspace shows zeros)
"""


@click.command("budget", help=BUDGET_HELP)
@workspace_option
@click.option("--json", "as_json", is_flag=True, help="Print it as one JSON object.")
@click.pass_obj
def budget(app: App, as_json: bool) -> None:
    from mam.governor.status import budget_status, empty_status, render
    from mam.store.registry import Registry

    registry = Registry.open_existing(app.ws)
    try:
        view = budget_status(registry, app.settings) if registry is not None else empty_status(app.settings)
    finally:
        if registry is not None:
            registry.close()
    if as_json:
        echo_json(view)
    else:
        echo(render(view))
