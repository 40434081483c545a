"""A job's token usage, recorded when the job ends: from the CLI's own records of the messages
between the injection and the end (mam.usage.readers), else the `--tokens N` the agent gave with
`mam event completed` (source `agent`), else nothing. Kept in the job's meta (`usage`: record,
`job status --json`, `job list`), and as the audit log's last line (`usage`)."""

from __future__ import annotations

import logging
from typing import Any

from mam.agents import get_adapter
from mam.errors import MamError
from mam.hooks import session_state
from mam.jobs import record as rec
from mam.jobs.ledger import Ledger
from mam.outcomes import Reason
from mam.store import journal
from mam.store.registry import Registry
from mam.usage.readers import COUNTER_AGENTS, job_usage, running_counters
from mam.workspace import Workspace

log = logging.getLogger(__name__)


def reported_tokens(ws: Workspace, job_id: str) -> int | None:
    """The `tokens` of the job's accepted `completed` event, if the agent gave any."""
    for line in rec.read_audit(ws, job_id):
        inp = line.get("input") if line.get("kind") == "input" else None
        if isinstance(inp, dict) and inp.get("type") == "completed":
            tokens = (inp.get("body") or {}).get("tokens")
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
                return tokens
    return None


def total(usage: Any) -> int | None:
    """The tokens of a usage record: `total_tokens` when the agent gave only that, else the sum of its four counts."""
    if not isinstance(usage, dict):
        return None
    given = usage.get("total_tokens")
    if isinstance(given, int) and not isinstance(given, bool) and given >= 0:
        return given
    counts = [usage.get(k) for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")]
    return sum(c for c in counts if isinstance(c, int) and not isinstance(c, bool) and c > 0)


# The agent said the job ended: the records of its last response are being written, worth a short wait. A job
# ended by a deadline or by mam (a prompt left up, a cancel) has a turn that may never end: read once.
SETTLES = frozenset({Reason.COMPLETED.value, Reason.AGENT_ERROR.value, Reason.ENDED_WITHOUT_REPORT.value})


def measure(
    ws: Workspace, registry: Registry, ledger: Ledger, *, until_ms: int | None = None, settle: bool = True
) -> dict[str, Any] | None:
    """The job's usage from the CLI's records between its injection and its end (`until_ms`: so far,
    for a job still running; `settle=False` never waits for a record still being written, nor does a
    job that did not end by its agent's word, SETTLES)."""
    job = ledger.job
    since, until = job.claimed_ms or job.delivered_ms, until_ms if until_ms is not None else job.ended_ms
    if since is None or until is None:
        return None
    row = registry.find_session(job.session)
    usage = None
    if row is not None:
        hooks = session_state.read(ws, row.name)
        conversation = row.conversation_id or hooks.get("conversation_id") or _discover(row)
        usage = job_usage(
            row.agent,
            conversation_id=conversation,
            transcript_path=str(hooks.get("transcript_path") or ""),
            cwd=row.cwd,
            env=row.agent_env,
            since_ms=since,
            until_ms=until,
            settle=settle and job.reason in SETTLES,
            base=ledger.usage_base,
        )
    if usage is None and until_ms is None:
        tokens = reported_tokens(ws, job.id)
        if tokens is not None:
            usage = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0}
            usage.update({"total_tokens": tokens, "source": "agent"})
    return usage


def mark_usage(registry: Registry, ledger: Ledger) -> None:
    """Right before the claim: keep the running token counters of a CLI that records only those (hermes),
    for `measure` to subtract (none kept for the other CLIs; a failure only logs: no usage then)."""
    row = registry.find_session(ledger.job.session)
    if row is None or row.agent not in COUNTER_AGENTS:
        return
    try:
        conversation = row.conversation_id or _discover(row)
        ledger.usage_base = running_counters(row.agent, conversation_id=conversation, env=row.agent_env)
    except (OSError, ValueError, MamError) as e:
        log.warning("job %s: usage counters not read: %s", ledger.job.id, e)


def _discover(row: Any) -> str | None:
    """The conversation of a CLI that names it only in its store (codex), not yet on the row."""
    if not row.launched_at:
        return None
    found = get_adapter(row.agent).discover(cwd=row.cwd, since=row.launched_at, env=row.agent_env)
    return str(found) if found else None


def record_usage(registry: Registry, ledger: Ledger) -> None:
    """Once the job ended: measure its usage and keep it on the job's row and record, with an audit
    line `usage` (a failure only logs)."""
    if not ledger.job.terminal or "usage" in ledger.meta:
        return
    ws = registry.ws
    try:
        usage = measure(ws, registry, ledger)
        if usage is None:
            return
        meta = {**ledger.meta, "usage": usage}
        done = journal.commit(
            registry,
            journal.Transition(
                ledger.job.id,
                lines=[("usage", {"usage": usage})],
                changes={"data": {"job": ledger.job.as_dict(), "meta": meta}},
                expected_owner=ledger.owner,
            ),
        )
        if not done.ok:
            return  # taken over meanwhile: the new owner's row stands
        ledger.meta["usage"] = usage
        journal.write_record(
            ws,
            ledger.job.id,
            journal.record_from({"job": ledger.job.as_dict(), "meta": meta}, ledger.owner),
            ledger.token,
        )
    except (OSError, ValueError, MamError) as e:
        log.warning("job %s: usage not recorded: %s", ledger.job.id, e)
