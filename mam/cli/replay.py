"""`mam job replay`: a job's state re-derived from its audit log, compared with its record (reads only)."""

from __future__ import annotations

import click

from mam.cli.common import App, echo, echo_json, existing_registry, workspace_option
from mam.outcomes import Exit

REPLAY_HELP = """Re-derive a job's state from its audit log and compare it with the recorded state.

\b
Folds .mam/delegate_job_logs/<id>/audit.jsonl (the created job, then every transition in order)
through the pure job model and prints the state it derives; --verbose prints each step. It never
types, publishes or writes anything.

\b
Exit codes: 0 the replay equals the recorded state; 1 they diverge (the first step that disagrees
with its audit line, and every differing field, are printed); 5 no such job.
"""


@click.command("replay", help=REPLAY_HELP)
@workspace_option
@click.argument("job_id")
@click.option("--verbose", "-v", is_flag=True, help="Print every step: the input and the state it gives.")
@click.option("--json", "as_json", is_flag=True, help="Print {id, equal, derived, recorded, differences, ...}.")
@click.pass_obj
def replay(app: App, job_id: str, verbose: bool, as_json: bool) -> int:
    from mam.jobs.audit_log import check

    out = check(app.ws, existing_registry(app, job_id), job_id)
    if as_json:
        echo_json(out.as_dict(verbose=verbose))
        return Exit.OK if out.equal else Exit.FAILED
    if verbose:
        for i, s in enumerate(out.steps):
            mark = "" if s.agrees else f"  <- the audit line recorded {s.logged}"
            what = s.input.get("input", "?") + (f" {s.input['type']}" if "type" in s.input else "")
            echo(f"{i + 1:>3} n={s.n} {what}: {s.derived['state']} {s.derived['reason'] or ''}".rstrip() + mark)
    d = out.derived
    echo(f"{job_id}: derived {d['state']}{' (' + d['reason'] + ')' if d['reason'] else ''} exit {d['exit_code']}")
    if out.equal:
        echo("equal to the recorded state")
        return Exit.OK
    if out.first_divergence is not None:
        echo(f"diverges at step {out.first_divergence + 1}", err=True)
    for name, pair in out.differences.items():
        echo(f"  {name}: derived {pair['derived']!r}, recorded {pair['recorded']!r}", err=True)
    return Exit.FAILED
