"""The org part of `mam demo --org`: a lead and two developers (demo agents) run a task with two blocked
subtasks, a failure that trips a breaker, and a reset.

The roles: `lead` (session lead), `dev-a` (dev-1) and `dev-b` (dev-2, `--breaker 1`), both reporting to lead.
The tasks, added in this order through the node (it wakes them):

    P   Ship a greeting          lead   its job ends in review (the lead planned it; a person approves it)
    F   Run the flaky script     dev-b  its job fails: dev-b's breaker trips
    S1  Write hello.txt          dev-a  part of P
    S2  Review hello.txt         dev-b  part of P, blocked by S1; then held by dev-b's tripped breaker
    S3  Translate the greeting   dev-a  part of P, blocked by S1; its job ends blocked, waiting on S2

Then the demo resets dev-b's breaker (`mam role reset dev-b`): S2 runs, S3 is woken (unblocked) and runs, and
the demo marks P done (`mam task done`), as the person approving it would. Every change of a task is printed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mam.node.call import value
from mam.org.manage import add_role, list_tasks
from mam.org.rules import BREAKER
from mam.sessions.create import CreateRequest, create_session
from mam.settings import Settings
from mam.store.org import BLOCKED, DONE, FAILED, IN_REVIEW
from mam.store.registry import Registry
from mam.util.poll import Timeout, wait_for
from mam.workspace import Workspace

SESSIONS = ("lead", "dev-1", "dev-2")
ROLES = (("lead", "lead", None, None), ("dev-a", "dev-1", "lead", None), ("dev-b", "dev-2", "lead", 1))
PHASE_S = 120.0  # each phase's deadline: generous for a loaded machine


@dataclass
class OrgResult:
    tasks: list[dict[str, Any]] = field(default_factory=list)  # `mam task list --json`, at the end
    names: dict[str, str] = field(default_factory=dict)  # task id -> its letter (P, F, S1, S2, S3)
    ok: bool = False
    error: str = ""


EXPECTED = {"P": DONE, "F": FAILED, "S1": DONE, "S2": DONE, "S3": DONE}


def run_org(
    *, ws: Workspace, settings: Settings, registry: Registry, environ: Mapping[str, str], say: Callable[[str], None]
) -> OrgResult:
    result = OrgResult()
    for name in SESSIONS:
        row = create_session(
            CreateRequest(name=name, agent="demo", role="developer" if name != "lead" else "lead", cwd=str(ws.root)),
            ws=ws,
            settings=settings,
            registry=registry,
            environ=dict(environ),
        )
        say(f"session {name}: demo agent in pane {row.pane_id}")
    for role, session, reports_to, breaker in ROLES:
        add_role(registry, role, session=session, reports_to=reports_to, breaker=breaker)
        said = f", reports to {reports_to}" if reports_to else ", reports to no one"
        say(f"role {role}: played by {session}{said}" + (f", breaker trips after {breaker} failure" if breaker else ""))

    def add(letter: str, title: str, role: str, brief: str, **more: Any) -> str:
        out = value(ws.root, "task_add", {"title": title, "role": role, "brief": brief, **more}, environ=environ)
        result.names[out["id"]] = letter
        held = f", blocked by {', '.join(result.names[b] for b in out['blocked_by'])}" if out["blocked_by"] else ""
        say(f"task {letter} ({out['id']}) added for {role}: {title}{held}")
        return str(out["id"])

    watch = Watch(registry, settings, result, say)
    try:
        p = add("P", "Ship a greeting", "lead", "Plan the greeting and hand it to review.\ndemo-disposition: review")
        add("F", "Run the flaky script", "dev-b", "This script fails.\ndemo-behaviour: error")
        s1 = add("S1", "Write hello.txt", "dev-a", "demo-write: hello.txt :: hello from the org demo", parent=p)
        s2 = add("S2", "Review hello.txt", "dev-b", "Read hello.txt.", parent=p, blocked_by=[s1])
        translate = f"demo-write: hola.txt :: hola\ndemo-disposition: blocked {s2}; done"
        add("S3", "Translate the greeting", "dev-a", translate, parent=p, blocked_by=[s1])
        watch.until(
            lambda t: (
                t["P"]["state"] == IN_REVIEW
                and t["F"]["state"] == FAILED
                and t["S2"]["queued_for"] == BREAKER
                and t["S3"]["state"] == BLOCKED
            ),
            "S2 held by dev-b's breaker, S3 blocked on S2",
        )
        say("dev-b's breaker is tripped: S2 waits (queued_for breaker); resetting it (mam role reset dev-b)")
        value(ws.root, "role_reset", {"role": "dev-b"}, environ=environ)
        watch.until(lambda t: t["S2"]["state"] == DONE and t["S3"]["state"] == DONE, "S2 and S3 done")
        say("the subtasks are done: approving P (mam task done)")
        value(ws.root, "task_done", {"task": p}, environ=environ)
        watch.until(lambda t: t["P"]["state"] == DONE, "P done")
        result.ok = all(t["state"] == EXPECTED[result.names[t["id"]]] for t in watch.tasks())
    except Timeout as e:
        result.error = str(e)
        say(f"the org demo did not end as expected: {e}")
    result.tasks = watch.tasks()
    return result


class Watch:
    """Prints each change of a task (its state, what holds it, a new wake) while it waits for a phase's end."""

    def __init__(self, registry: Registry, settings: Settings, result: OrgResult, say: Callable[[str], None]) -> None:
        self.registry, self.settings, self.result, self.say = registry, settings, result, say
        self.seen: dict[str, tuple[str, str, int]] = {}

    def tasks(self) -> list[dict[str, Any]]:
        return list_tasks(self.registry, self.settings)

    def until(self, done: Callable[[dict[str, dict[str, Any]]], bool], what: str) -> None:
        def look() -> bool:
            by_letter = {}
            for t in self.tasks():
                letter = self.result.names.get(t["id"], t["id"])
                by_letter[letter] = t
                self._show(letter, t)
            return set(EXPECTED) <= set(by_letter) and done(by_letter)

        wait_for(look, timeout=PHASE_S, interval=0.1, message=f"waiting for {what}")

    def _show(self, letter: str, t: dict[str, Any]) -> None:
        now = (t["state"], t["queued_for"], len(t["wakes"]))
        before = self.seen.get(t["id"])
        if before == now:
            return
        self.seen[t["id"]] = now
        if before is not None and len(t["wakes"]) > before[2] or before is None and t["wakes"]:
            w = t["wakes"][-1]
            self.say(f"task {letter:<2} woken ({w['reason']}): job {w['job']} on {w['session']}")
        if before is None or before[:2] != now[:2]:
            waits = self.result.names.get(t["wait"] or "", t["wait"])
            extra = f" ({t['queued_for']})" if t["queued_for"] else f" (waiting on {waits})" if t["wait"] else ""
            w = t["wakes"][-1] if t["wakes"] else None
            if w is not None and w["task_state"] == t["state"]:  # its job's end moved it (not a person)
                extra += f": job {w['outcome']}" + (f", disposition {w['disposition']}" if w["disposition"] else "")
            self.say(f"task {letter:<2} {t['state']}{extra}")


def summary_lines(result: OrgResult) -> list[str]:
    lines = ["", f"{'TASK':<6} {'ID':<6} {'ROLE':<7} {'STATE':<10} {'WAKES':<40} JOBS"]
    for t in result.tasks:
        letter = result.names.get(t["id"], "?")
        wakes = ", ".join(w["reason"] for w in t["wakes"]) or "-"
        mark = "" if t["state"] == EXPECTED.get(letter) else f"  (expected {EXPECTED.get(letter)})"
        lines.append(
            f"{letter:<6} {t['id']:<6} {t['role']:<7} {t['state']:<10} {wakes:<40} {' '.join(t['jobs'])}{mark}"
        )
    lines.append("")
    lines.append(
        "org demo "
        + ("finished: every task ended as expected" if result.ok else f"FAILED: {result.error or 'see the marks'}")
    )
    return lines
