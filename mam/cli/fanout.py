"""`mam job fanout`: one brief to several sessions, results aggregated with their provenance."""

from __future__ import annotations

import click

from mam.cli.common import App, brief_options, echo, echo_json, node_value, read_brief, workspace_option
from mam.cli.request_options import request_options
from mam.errors import UsageError
from mam.util.text import for_terminal

FANOUT_HELP = """Delegate the same brief to every target at once and aggregate their results.

\b
Each target gets a job of its own (under the caps and budgets, as `mam job delegate`):
  all    wait for every job and report each result (decided: every job completed)
  first  take the first job to complete and cancel the others
  vote   take the last non-empty line of each completed result as its vote; decided when one
         vote has more than half of the targets (a tie or no majority is reported as such)
The output always names each target's job id, state, result and vote (the provenance).

\b
Exit codes: 0 the aggregate is decided; 1 it is not (a job failed for `all`, none completed for
`first`, a tie or no majority for `vote`); 2 bad options (nothing delegated); 3 no broker;
130 interrupted (Ctrl-C): the jobs stay open and are named, to follow with
`mam job wait ID`.
"""


@click.command("fanout", help=FANOUT_HELP)
@workspace_option
@click.option("--targets", required=True, help="Comma-separated targets: NAME, tmux:NAME, herdr:NAME, remote:R/NAME.")
@brief_options
@click.option(
    "--aggregate", type=click.Choice(["all", "first", "vote"]), default="all", show_default=True, help="How to decide."
)
@request_options("timeout_s", "start_deadline_s")  # each job's
@click.option("--json", "as_json", is_flag=True, help="Print the aggregate and every job's provenance as JSON.")
@click.pass_obj
def fanout(
    app: App,
    targets: str,
    brief: str | None,
    brief_file: str | None,
    aggregate: str,
    timeout_s: float | None,
    start_deadline_s: float | None,
    as_json: bool,
) -> int:
    from mam.jobs.fanout import check_targets
    from mam.jobs.ledger import new_job_id
    from mam.node.client import Gone
    from mam.node.front import still_running

    if (brief is None) == (brief_file is None):
        raise UsageError("give exactly one of --brief or --brief-file")
    names = check_targets(targets.split(","))
    text = brief if brief is not None else read_brief(brief_file or "-")
    # The jobs' ids are this call's: if the node dies, the same request in the next node takes them over.
    job_ids = [new_job_id() for _ in names]
    args = {
        "targets": names,
        "brief": text,
        "aggregate": aggregate,
        "timeout_s": timeout_s,
        "start_deadline_s": start_deadline_s,
        "job_ids": job_ids,
    }
    try:
        out = node_value(app, "fanout", args, signals=True)
    except Gone as gone:  # the node runs the jobs on: each is named, to follow
        for job_id in gone.jobs or job_ids:
            echo(still_running(job_id), err=True)
        return 128 + gone.signum
    if as_json:
        echo_json(out)
        return int(out["exit_code"])
    for b in out["jobs"]:
        said = (b["result"] or b["error"] or b["reason"]).strip()
        first = for_terminal(said.splitlines()[0]) if said else ""
        vote = f" vote {for_terminal(b['vote'])!r}" if b["vote"] is not None else ""
        echo(f"{b['target']}  {b['job_id']}  {b['state']}{vote}  {first}")
    winner = f": {for_terminal(out['winner'])}" if out["winner"] else ""
    echo(f"{aggregate}: {out['outcome']}{winner}")
    return int(out["exit_code"])
