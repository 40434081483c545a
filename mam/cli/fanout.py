"""`mam job fanout`: one brief to several sessions, results aggregated with their provenance."""

from __future__ import annotations

import click

from mam.cli.common import App, brief_options, echo, echo_json, read_brief, workspace_option
from mam.cli.request_options import request_options
from mam.errors import UsageError
from mam.jobs.delegate import RemoteOrigin
from mam.jobs.target import parse_target
from mam.util import caller

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
    from mam.jobs.fanout import fanout as run_fanout
    from mam.util.text import for_terminal

    if (brief is None) == (brief_file is None):
        raise UsageError("give exactly one of --brief or --brief-file")
    names = check_targets(targets.split(","))
    text = brief if brief is not None else read_brief(brief_file or "-")
    remote: RemoteOrigin | None = None
    if any(parse_target(t).remote for t in names):
        from mam.remote.origin import ORIGIN

        remote = ORIGIN
    out = run_fanout(
        names,
        text,
        aggregate=aggregate,
        ws=app.ws,
        settings=app.settings,
        timeout_s=timeout_s,
        start_deadline_s=start_deadline_s,
        remote=remote,
        on_jobs=_announce,  # in the node: its client names them if interrupted
    )
    if as_json:
        echo_json(out.as_dict())
        return out.exit_code
    for b in out.branches:
        said = (b.result or b.error or b.reason).strip()
        first = for_terminal(said.splitlines()[0]) if said else ""
        vote = f" vote {for_terminal(b.vote)!r}" if b.vote is not None else ""
        echo(f"{b.target}  {b.job_id}  {b.state}{vote}  {first}")
    winner = f": {for_terminal(out.winner)}" if out.winner else ""
    echo(f"{aggregate}: {out.outcome}{winner}")
    return out.exit_code


def _announce(job_ids: list[str]) -> None:
    for job_id in job_ids:
        caller.announce_job(job_id)
