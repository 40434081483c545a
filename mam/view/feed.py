"""The workspace's activity as ordered lines, read from the registry and the loop logs.

A job's lines come from the registry, the same truth the wrapper writes: its events (table `events`,
numbered by `seq`) and its transitions (table `job_inputs`, committed with the state they produce).
Per job, an event comes before the transition it caused; a transition carries the `seq` of the last
event applied before it (0 before `started`). A loop's lines come from `.mam/loops/<id>/loop.jsonl`;
a text typed into a job's pane by `mam job send` from the job's audit line `sent` (who, how many bytes;
never the text); acts on sessions that are not jobs (a fork) from `.mam/session-audit.jsonl` (mam.sessions.audit);
a routine's from its receipts (table `routine_ticks`): one line each time a tick's status changes,
with the routine's next tick; a task's (mam/org) from its runs (table `task_runs`): a line when it is woken
(with the reason) and one when its job ended (with the disposition and what became of the task).

`Feed.read(job_ids)` returns what is new since the last call. Nothing here starts anything or
writes anything; without a registry there are simply no job lines.
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mam.errors import UsageError
from mam.jobs.send import SENT
from mam.jobs.target import parse_target
from mam.loop.describe import describe
from mam.sessions import audit
from mam.store import jobs as jobs_table
from mam.store import org as org_table
from mam.store import routines as routines_table
from mam.store.registry import Registry
from mam.util.text import for_terminal
from mam.workspace import Workspace

RECENT_TICKS = 200  # routine receipts looked at per read


@dataclass(frozen=True)
class Line:
    ts_ms: int
    kind: str  # event / transition / audit (a job's `sent` line) / loop / session / routine / task
    job: str
    session: str
    type: str  # event type, the new job state, the job's or the session's audit line kind, or the loop log's event
    seq: int
    message: str
    loop: str = ""
    routine: str = ""
    task: str = ""

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ts"] = iso(self.ts_ms)
        return out

    def text(self) -> str:
        clock = time.strftime("%H:%M:%S", time.localtime(self.ts_ms / 1000))
        what = {
            "event": self.type,
            "transition": f"-> {self.type}",
            "audit": self.type,
            "loop": f"loop {self.type}",
            "session": f"session {self.type}",
            "routine": f"routine {self.type}",
            "task": f"task {self.type}",
        }[self.kind]
        subject = self.job or self.loop or self.routine
        return f"{clock} {self.session or '-':<14} {subject:<22} {what:<20} #{self.seq:<4} {self.message}".rstrip()


def iso(ts_ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts_ms / 1000)) + f".{ts_ms % 1000:03d}Z"


def event_message(type_: str, body: dict[str, Any]) -> str:
    return for_terminal(_event_message(type_, body))


def _event_message(type_: str, body: dict[str, Any]) -> str:
    if type_ == "error":
        return str(body.get("reason", ""))
    if type_ == "started":
        hb = body.get("heartbeat_ms")
        return f"heartbeat every {int(hb) // 1000}s" if isinstance(hb, int) and hb > 0 else ""
    if type_ == "activity":
        return " ".join(str(body[k]) for k in ("state", "tool", "message") if body.get(k))
    return str(body.get("message", "") or "").splitlines()[0] if body.get("message") else ""


def _sent_line(entry: dict[str, Any], job_id: str, cur: _JobCursor) -> Line:
    """`mam job send`'s audit line: who typed how many bytes (the text is not in the log)."""
    message = for_terminal(f"by {entry.get('by', '?')} ({entry.get('bytes', '?')} bytes)")
    return Line(int(entry.get("ts_ms", 0) or 0), "audit", job_id, cur.session, SENT, cur.applied_seq, message)


@dataclass
class _JobCursor:
    session: str
    seq_done: int = 0  # events printed up to this seq
    n_done: int = 0  # transition lines read up to this number
    applied_seq: int = 0  # the last event seq the wrapper applied
    state: str = "pending"
    created: bool = False


@dataclass
class _FileCursor:
    offset: int = 0
    number: int = 0


@dataclass
class Feed:
    """New lines since the last read, for one workspace (optionally one job or one session)."""

    ws: Workspace
    job: str | None = None
    session: str | None = None
    since_seq: int | None = None  # with a cursor's first read: skip lines numbered at or below this seq
    _jobs: dict[str, _JobCursor] = field(default_factory=dict)
    _loops: dict[str, _FileCursor] = field(default_factory=dict)
    _audit: _FileCursor = field(default_factory=_FileCursor)
    _ticks: dict[int, str] = field(default_factory=dict)  # a routine tick's number -> its status shown
    _runs: dict[int, str] = field(default_factory=dict)  # a task run's number -> its status shown
    _registry: Registry | None = None

    def close(self) -> None:
        if self._registry is not None:
            self._registry.close()
            self._registry = None

    def registry(self) -> Registry | None:
        if self._registry is None:
            self._registry = Registry.open_existing(self.ws)
        return self._registry

    # -- which jobs ---------------------------------------------------------------------------
    def job_ids(self, *, updated_since: float | None = None, newest: int = 100000) -> list[str]:
        """Jobs worth reading: the `newest` ones (updated_since None) or those touched since then."""
        registry = self.registry()
        if registry is None:
            return []
        with registry.read() as conn:
            if self.job:
                row = jobs_table.find(conn, self.job)
                rows = [row] if row is not None else []
            elif updated_since is None:
                rows = jobs_table.list_jobs(conn, session=self.session, limit=newest)
            else:
                rows = jobs_table.recently_updated(conn, updated_since)
        return [r.id for r in rows if self.session is None or r.session == self.session]

    # -- reading ------------------------------------------------------------------------------
    def read(self, job_ids: Iterable[str] | None = None, *, loops: bool = True) -> list[Line]:
        """What is new for `job_ids` (default: every job) and the loops, merged by time."""
        ids = list(job_ids) if job_ids is not None else self.job_ids()
        streams: list[Iterable[Line]] = [self._job_lines(j) for j in dict.fromkeys(ids)]
        if loops and self.job is None:
            streams.extend(self._loop_lines(p) for p in self._loop_logs())
            streams.append(self._audit_lines())
            streams.append(self._routine_lines())
            streams.append(self._task_lines())
        return list(heapq.merge(*(list(s) for s in streams), key=lambda line: line.ts_ms))

    def _job_lines(self, job_id: str) -> list[Line]:
        registry = self.registry()
        if registry is None:
            return []
        cur = self._jobs.get(job_id)
        with registry.read() as conn:
            row = jobs_table.find(conn, job_id)
            if row is None or (self.session is not None and row.session != self.session):
                return []
            if cur is None:
                cur = self._jobs[job_id] = _JobCursor(session=row.session)
            events = {e.seq: e for e in jobs_table.events_after(conn, job_id, cur.seq_done)}
            inputs = jobs_table.inputs_after(conn, job_id, cur.n_done, also=(SENT,))
        out: list[Line] = []
        if not cur.created:
            cur.created = True
            out.append(
                Line(
                    int(row.created_at * 1000),
                    "transition",
                    job_id,
                    row.session,
                    "pending",
                    0,
                    f"created: {row.target}",
                )
            )
        for entry in inputs:
            inp = entry.get("input", {})
            cur.n_done = int(entry.get("n", cur.n_done + 1))
            if entry.get("kind") == SENT:
                out.append(_sent_line(entry, job_id, cur))
                continue
            at = int(inp.get("at", 0) or 0)
            if inp.get("input") == "event":
                seq = int(inp.get("seq", 0))
                for s in sorted(k for k in events if k <= seq):
                    out.extend(self._event_line(cur, job_id, events.pop(s)))
                if seq > cur.seq_done:  # only on the bus (a remote job): the wrapper's copy
                    cur.seq_done = seq
                    body = inp.get("body") or {}
                    out.append(
                        Line(
                            at,
                            "event",
                            job_id,
                            cur.session,
                            str(inp.get("type")),
                            seq,
                            event_message(inp["type"], body),
                        )
                    )
                cur.applied_seq = max(cur.applied_seq, seq)
            state = str(entry.get("state", cur.state))
            if state != cur.state:
                detail = entry.get("reason") or ""
                if inp.get("input") == "end" and inp.get("detail"):
                    detail = f"{detail}: {inp['detail']}" if detail else str(inp["detail"])
                if inp.get("input") in ("pause", "resume"):  # mam job pause|resume: how, and who asked
                    detail = " ".join(x for x in (str(entry.get("mode") or ""), f"by {entry.get('by', '')}") if x)
                msg = f"{cur.state} -> {state}" + (f" ({detail})" if detail else "")
                out.append(Line(at, "transition", job_id, cur.session, state, cur.applied_seq, msg))
                cur.state = state
        for s in sorted(events):
            # Stored ahead of its wrapper: only the next one, so the transition an earlier event caused is
            # never shown after a later event (an open job's wrapper commits it a moment after the store).
            if row.open and s > cur.applied_seq + 1:
                break
            out.extend(self._event_line(cur, job_id, events[s]))
        floor = self.since_seq
        return [line for line in out if floor is None or line.seq > floor]

    def _event_line(self, cur: _JobCursor, job_id: str, ev: jobs_table.EventRow) -> list[Line]:
        if ev.seq <= cur.seq_done:
            return []
        cur.seq_done = ev.seq
        try:
            body = json.loads(ev.raw).get("body") or {}
        except (ValueError, AttributeError):
            body = {}
        return [Line(int(ev.ts), "event", job_id, cur.session, ev.type, ev.seq, event_message(ev.type, body))]

    def _loop_logs(self) -> list[Path]:
        folder = self.ws.state / "loops"
        try:
            return sorted(folder.glob("*/loop.jsonl"))
        except OSError:
            return []

    def _loop_lines(self, path: Path) -> Iterator[Line]:

        loop_id = path.parent.name
        cur = self._loops.setdefault(loop_id, _FileCursor())
        for entry in _new_entries(path, cur):
            session = str(entry.get("session") or entry.get("reviewer") or entry.get("creator") or "")
            if self.session is not None and session != self.session:
                continue
            yield Line(
                int(float(entry.get("ts", 0)) * 1000),
                "loop",
                str(entry.get("job") or ""),
                session,
                str(entry.get("event", "")),
                int(entry.get("round", 0) or 0),
                describe(entry) or str(entry.get("event", "")),
                loop=loop_id,
            )

    def _routine_lines(self) -> list[Line]:
        """A line for each routine tick whose status changed since the last read (the last RECENT_TICKS)."""
        registry = self.registry()
        if registry is None:
            return []
        with registry.read() as conn:
            ticks = routines_table.recent_ticks(conn, RECENT_TICKS)
            routines = routines_table.targets(conn)
        out = []
        for t in reversed(ticks):
            status = str(t["status"])
            if self._ticks.get(int(t["n"])) == status:
                continue
            self._ticks[int(t["n"])] = status
            routine = routines.get(str(t["routine"]))
            session = _session_of(str(routine["target"])) if routine is not None else ""
            if self.session is not None and session != self.session:
                continue
            at = t["ended_at"] or t["fired_at"] or t["created_at"]
            what = str(t["outcome"] or t["reason"] or "")
            detail = f": {t['detail']}" if t["detail"] else ""
            nxt = routine["next_at"] if routine is not None else None
            message = f"{t['trigger']} tick {iso(int(t['scheduled'] * 1000))[:19]}Z {what}{detail}".strip()
            if nxt:
                message += f"; next tick {iso(int(nxt * 1000))[:19]}Z"
            out.append(
                Line(
                    int(at * 1000),
                    "routine",
                    str(t["job_id"]),
                    session,
                    status,
                    int(t["n"]),
                    for_terminal(message),
                    routine=str(t["routine"]),
                )
            )
        return out

    def _task_lines(self) -> list[Line]:
        """A `woken` line for each task run (its reason), then one when its job ended (outcome, disposition, and
        the state it moved the task to), of the last RECENT_TICKS runs."""
        registry = self.registry()
        if registry is None:
            return []
        with registry.read() as conn:
            runs = org_table.recent_runs(conn, RECENT_TICKS)
        out = []
        for r in runs:
            shown = self._runs.get(r.n)
            if shown == r.status or (self.session is not None and r.session != self.session):
                continue
            self._runs[r.n] = r.status
            if shown is None:
                woken = f"{r.task}: woken ({r.reason}) on {r.session}"
                out.append(
                    Line(int(r.created_at * 1000), "task", r.job_id, r.session, "woken", r.n, woken, task=r.task)
                )
            if r.status == org_table.ENDED:
                said = f"{r.task}: job {r.outcome}"
                if r.disposition:
                    said += f", disposition {r.disposition}" + (f" {r.waiting_on}" if r.waiting_on else "")
                said += f"; the task is {r.task_state}" if r.task_state else "; the task was not moved"
                if r.detail:
                    said += f" ({r.detail})"
                at = int((r.ended_at or r.created_at) * 1000)
                kind = r.task_state or r.outcome
                out.append(Line(at, "task", r.job_id, r.session, kind, r.n, for_terminal(said), task=r.task))
        return out

    def _audit_lines(self) -> Iterator[Line]:
        """Session audit lines (`mam session fork`): with --session, those of that session or naming it as source."""
        for entry in _new_entries(audit.path(self.ws), self._audit):
            session, source = str(entry.get("session") or ""), str(entry.get("source") or "")
            if self.session is not None and self.session not in (session, source):
                continue
            kind = str(entry.get("kind", ""))
            said = f"from {source} " if kind == "fork" and source else ""
            yield Line(
                int(float(entry.get("ts", 0)) * 1000),
                "session",
                "",
                session,
                kind,
                0,
                f"{said}by {entry.get('by', '')}".strip(),
            )


def _session_of(target: str) -> str:
    """A routine target's session, as its jobs name it (mam.jobs.target)."""
    try:
        t = parse_target(target)
    except UsageError:
        return ""
    return f"{t.runner}/{t.session}" if t.remote else t.session


def _new_entries(path: Path, cur: _FileCursor) -> Iterator[dict[str, Any]]:
    """The JSON objects of the complete lines appended to `path` since `cur` (which moves on)."""
    try:
        if path.stat().st_size <= cur.offset:
            return
        with open(path, "rb") as f:
            f.seek(cur.offset)
            chunk = f.read()
    except OSError:
        return
    complete = chunk[: chunk.rfind(b"\n") + 1]  # a torn last line waits for its end
    cur.offset += len(complete)
    for raw in complete.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        cur.number += 1
        if isinstance(entry, dict):
            yield entry
