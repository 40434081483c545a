"""`mam job send ID --text TEXT`: a follow-up typed into the input box of a job's working agent.

Only to a job that is `running` (its agent acknowledged the brief), only into a pane of this host,
and only when the agent still runs, its input box is empty and no dialog shows: the one look, paste
and Enter that a reminder takes too (`PaneDelivery.type_idle`). TEXT is checked like a brief (not
empty, at most 256 KiB, UTF-8, no control character but tab, CR and LF). Each send is one audit
line of the job, `sent` (`by`, `pane`, `bytes`, `sha256`: never the text), committed through the
store's one commit; a refusal types nothing and writes nothing. A send changes nothing else: the
job still ends only by its events and deadlines.

A `remote:RUNNER/SESSION` job is refused (UsageError, exit 2): its pane is on the runner's host,
where the runner's copy of the job (same id) takes `mam job send`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from mam.errors import JobRefused, UsageError
from mam.ids import check_job_id
from mam.jobs.brief import check_brief
from mam.jobs.target import Target, parse_target
from mam.outcomes import JobState
from mam.sessions.audit import check_by
from mam.settings import Settings
from mam.store import journal, pauses
from mam.store.jobs import JobRow
from mam.store.registry import Registry
from mam.workspace import Workspace

SENT = "sent"  # the audit line's kind (shown by `mam tail`: mam.view.feed)


def send_text(
    ws: Workspace,
    settings: Settings,
    job_id: str,
    text: str,
    *,
    by: str | None = None,
    registry_of: Callable[[], Registry],
) -> dict[str, Any]:
    """Type `text` into the pane of running job `job_id` once and record it; return what `--json` prints.

    The id, the text and `by` are checked before `registry_of()` is called (UsageError, exit 2); an
    unknown job is JobNotFound (exit 5); a job not running, an agent gone, a box not empty or a
    dialog on the screen is JobRefused (exit 5) naming which, with nothing typed."""
    check_job_id(job_id)
    check_brief(text, what="the text")
    who = check_by(by)
    registry = registry_of()
    row = registry.job(job_id)
    if row.state != JobState.RUNNING:
        ended = f" ({row.reason})" if row.reason else ""
        raise JobRefused(
            f"job {job_id} is {row.state}{ended}, not running: nothing sent (a text goes only to a job whose agent "
            "started it and has not ended it)",
            job_id=job_id,
        )
    with registry.read() as conn:
        held = pauses.hold(conn)
    if held is not None:  # `mam pause --all`: nothing is typed anywhere until `mam resume --all`
        raise JobRefused(f"job {job_id}: nothing sent: the workspace is held (mam pause --all by {held.by})")
    target = pane_target(row)
    from mam.jobs.delivery import PaneDelivery  # slow to import: only a send pays for it

    delivery = PaneDelivery(target, ws=ws, settings=settings, registry=registry)
    why = delivery.find_target() or delivery.check_alive() or delivery.type_idle(text)
    if why:
        raise JobRefused(f"job {job_id}: nothing sent: {why}", job_id=job_id)
    data = text.encode("utf-8")
    line = {
        "by": who,
        "pane": delivery.row.pane_id if delivery.row is not None else "",
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    journal.note(registry, job_id, SENT, **line)
    return {"id": job_id, "sent": True, "session": row.session, **line}


def pane_target(row: JobRow) -> Target:
    """The session job `row` is typed into on this host; UsageError for a job whose pane is elsewhere."""
    meta = row.data.get("meta") or {}
    if meta.get("relay") == "runner":  # the runner's copy of a remote job: its session is on this host
        return Target(row.session, row.session)
    target = parse_target(row.target)
    if target.remote:
        raise UsageError(
            f"job {row.id} runs on the host of runner {target.runner} ({row.target}): nothing sent; run "
            f"`mam job send {row.id}` there"
        )
    return target
