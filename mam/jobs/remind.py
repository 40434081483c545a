"""Finished without reporting: the agent's turn ended (its CLI's Stop / notify hook) while its job is
still open, and no `completed` or `error` came.

MAM_REMIND_AFTER_S after such a turn end, if the agent has not gone on by itself, and only when its
input box is empty and no dialog shows, one reminder is typed into the agent's input: the job is
still open, and the exact commands that end it. At most MAM_REMINDERS per job, each in the audit
log (`reminded`); a turn end after the last one (again given MAM_REMIND_AFTER_S for a late report)
fails the job: reason `ended_without_report`, exit 1. The brief is never pasted again. A CLI without
a turn-end hook never counts a turn end, so its jobs keep the deadlines alone. A remote job is
reminded by the runner on the agent's host, which tells the origin with a runner `error`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

from mam.ids import check_job_id, check_nonce
from mam.jobs import record as rec
from mam.jobs.delivery import PaneDelivery
from mam.jobs.ledger import Ledger
from mam.outcomes import JobState, Reason
from mam.settings import Settings

RETRY_S = 0.5  # the box was not empty or a dialog showed: look again this soon


def reminder_text(job_id: str, nonce: str, *, started: bool) -> str:
    """The reminder: every indented line is a command that runs exactly as printed. Only checked text
    is typed: the id and the nonce are checked again here (UsageError), whatever set them."""
    check_job_id(job_id)
    check_nonce(nonce)
    head = f"mam job {job_id} is still open: you have not reported on it.\n"
    if not started:
        head += f"First acknowledge it with this command:\n  mam event started --job {job_id} --nonce {nonce}\nThen end"
    else:
        head += "End"
    return (
        head + " it with one of these two commands, run exactly as written (your own words between the quotes):\n"
        f'  mam event completed --job {job_id} --message "one-line result"\n'
        f'  mam event error --job {job_id} --reason "why"\n'
    )


class Reminder:
    """Driven by the wrapper's loop (`check()` each round); `typer(text) -> bool` types into the pane
    when its input box is empty and no dialog shows (False: not now), or is None (no pane here)."""

    def __init__(
        self,
        ledger: Ledger,
        settings: Settings,
        typer: Callable[[str], bool] | None,
        end: Callable[[Reason, str], None],
    ) -> None:
        self.ledger, self.typer, self.end = ledger, typer, end
        self.after_s = settings.remind_after_s
        self.most = settings.reminders
        self.seen = ledger.job.turn_ends
        self.sent = sum(1 for line in rec.read_audit(ledger.ws, ledger.job.id) if line.get("kind") == "reminded")
        self.due: float | None = None

    def paused(self) -> None:
        """While the job is paused: its turn ends are the pause's (a safe pause lets the turn finish), never
        a reason to remind; nothing is due."""
        self.seen, self.due = self.ledger.job.turn_ends, None

    def check(self) -> None:
        job = self.ledger.job
        if job.terminal or self.typer is None:
            return
        now = time.monotonic()
        if job.turn_ends > self.seen:
            self.seen = job.turn_ends
            self.due = now + self.after_s
        if self.due is None or now < self.due:
            return
        if job.activity != "idle":
            self.due = None  # the agent went on by itself (a new prompt, a tool call): wait for its next turn end
            return
        if self.sent >= self.most:
            self.due = None
            detail = (
                f"the agent's turn ended {job.turn_ends} times without `completed` or `error` "
                f"({self.sent} reminder{'s' if self.sent != 1 else ''} typed)"
            )
            self.end(Reason.ENDED_WITHOUT_REPORT, detail)
            return
        text = reminder_text(job.id, job.nonce, started=job.state is JobState.RUNNING)
        if not self.typer(text):
            self.due = now + RETRY_S
            return
        self.sent += 1
        self.due = None
        data = text.encode("utf-8")
        self.ledger.note(
            "reminded",
            count=self.sent,
            of=self.most,
            turn_ends=job.turn_ends,
            bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
        )


def pane_typer(delivery: Any) -> Callable[[str], bool] | None:
    """For a local pane (PaneDelivery): type `text` and press Enter when the input box is empty and
    no dialog shows (`PaneDelivery.type_idle`; False: not now); None for a delivery without a pane
    here (a remote job)."""
    if not isinstance(delivery, PaneDelivery):
        return None
    return lambda text: not delivery.type_idle(text)
