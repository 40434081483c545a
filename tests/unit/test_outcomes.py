"""The table of outcomes (mam/outcomes.py) is the one place for exit codes and reasons:
the job model, the CLI, the MCP server and every SKILL.md exit table agree with it (MESSAGING.md
and docs/delegation.md's reason table are checked in test_messaging_doc.py), and no literal exit
code or reason string comes back anywhere else in mam/.
"""

from __future__ import annotations

import ast
import asyncio
import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from mam import errors
from mam.cli import cli
from mam.jobs.model import Claim, Delivered, End, Event, Job, JobState, Tick, advance, step
from mam.outcomes import (
    ENDINGS,
    OPEN,
    OPEN_STATES,
    STATE_EXIT,
    TAKEN_OVER_EXIT,
    TERMINAL,
    Exit,
    Ignored,
    Reason,
    Rejected,
    onboard_exit_code,
)

ROOT = Path(__file__).resolve().parents[2]
MAM = ROOT / "mam"
SKILLS = ROOT / "skills"
EXIT_VALUES = {v for k, v in vars(Exit).items() if not k.startswith("_")}
STATE_VALUES = {s.value for s in JobState}
REASON_VALUES = {r.value for r in Reason} | {r.value for r in Rejected} | {r.value for r in Ignored}


# -- the table itself ------------------------------------------------------------------------------
def test_every_ending_is_terminal_and_exits_as_its_state_unless_the_contract_says_otherwise() -> None:
    for reason, row in ENDINGS.items():
        assert row.reason is reason and row.state in TERMINAL
        special = {
            Reason.BROKER_UNAVAILABLE: Exit.BROKER_UNAVAILABLE,
            Reason.BUDGET_EXHAUSTED: Exit.BUDGET,
            Reason.TOKEN_BUDGET: Exit.BUDGET,
        }
        assert row.exit_code == special.get(reason, STATE_EXIT[row.state]), reason
    assert set(STATE_EXIT) == TERMINAL
    assert OPEN == frozenset(JobState) - TERMINAL and set(OPEN_STATES) == {s.value for s in OPEN}


def test_the_contract_exit_codes() -> None:
    # docs/architecture.md ("Contracts") and the SKILL.md files: these numbers are a contract.
    assert (Exit.OK, Exit.FAILED, Exit.USAGE, Exit.TIMED_OUT, Exit.BROKER_UNAVAILABLE) == (0, 1, 2, 2, 3)
    assert (Exit.LOCK_BUSY, Exit.NOT_DELIVERED, Exit.NOT_FOUND, TAKEN_OVER_EXIT, Exit.BUDGET) == (4, 5, 5, 5, 6)
    assert (Exit.ONBOARD_FAILED, Exit.ONBOARD_LATE, Exit.NO_EXECUTABLE, Exit.INTERRUPTED) == (44, 45, 127, 130)
    assert {s: STATE_EXIT[s] for s in TERMINAL} == {
        JobState.COMPLETED: 0,
        JobState.FAILED: 1,
        JobState.TIMED_OUT: 2,
        JobState.CANCELLED: 5,
    }


def test_errors_exit_with_codes_from_the_table() -> None:
    for name in dir(errors):
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, errors.MamError):
            assert cls.exit_code in EXIT_VALUES, name
    assert errors.ConfigError.exit_code == Exit.USAGE and errors.BrokerError.exit_code == Exit.BROKER_UNAVAILABLE
    assert errors.JobNotFound.exit_code == errors.SessionNotFound.exit_code == Exit.NOT_FOUND
    assert errors.LockBusy.exit_code == Exit.LOCK_BUSY


def test_onboarding_exit_codes() -> None:
    assert onboard_exit_code(JobState.COMPLETED.value, Reason.COMPLETED.value) == Exit.OK
    assert onboard_exit_code(JobState.TIMED_OUT.value, Reason.WALL_CLOCK_TIMEOUT.value) == Exit.ONBOARD_LATE
    assert onboard_exit_code(JobState.FAILED.value, Reason.AGENT_BLOCKED.value) == Exit.ONBOARD_LATE
    assert onboard_exit_code(JobState.FAILED.value, Reason.AGENT_ERROR.value) == Exit.ONBOARD_FAILED
    assert onboard_exit_code(JobState.FAILED.value, Reason.BROKER_UNAVAILABLE.value) == Exit.ONBOARD_FAILED


# -- the job model ends jobs as the table says ---------------------------------------------------
def _job() -> Job:
    return Job("j", "s", "n", 0, start_deadline_ms=100, heartbeat_ms=10, heartbeat_k=2, budget_ms=1000)


def _running() -> Job:
    job = advance(advance(_job(), Claim(0)), Delivered(0))
    return advance(job, Event(1, 1, "started", "agent", {"nonce": "n"}))


@pytest.mark.parametrize(
    ("reason", "make"),
    [
        (Reason.COMPLETED, lambda: advance(_running(), Event(2, 2, "completed", "agent", {"message": "m"}))),
        (Reason.AGENT_ERROR, lambda: advance(_running(), Event(2, 2, "error", "agent", {"reason": "r"}))),
        (Reason.AGENT_BLOCKED, lambda: advance(advance(_job(), Delivered(0)), Tick(101))),
        (Reason.DEADLINE_TIMEOUT, lambda: advance(_running(), Tick(22))),
        (Reason.WALL_CLOCK_TIMEOUT, lambda: advance(replace(_running(), heartbeat_ms=10_000), Tick(1001))),
        (Reason.TARGET_NOT_FOUND, lambda: advance(_job(), Event(1, 1, "rejected", "runner", {}))),
        (Reason.RUNNER_ERROR, lambda: advance(_job(), Event(1, 1, "error", "runner", {}))),
        (
            Reason.RUNNER_STOPPED,
            lambda: advance(_job(), Event(1, 1, "rejected", "runner", {"reason": "runner_stopped"})),
        ),
        (Reason.BRIEF_REFUSED, lambda: advance(_job(), Event(1, 1, "error", "runner", {"reason": "brief_refused"}))),
        (
            Reason.BUDGET_EXHAUSTED,
            lambda: advance(_job(), Event(1, 1, "rejected", "runner", {"reason": "budget_exhausted"})),
        ),
    ],
)
def test_the_model_ends_jobs_as_the_table_says(reason: Reason, make) -> None:  # type: ignore[no-untyped-def]
    job = make()
    assert (job.reason, job.state, job.exit_code) == (reason, ENDINGS[reason].state, ENDINGS[reason].exit_code)


def test_what_the_model_ignores_is_in_the_table() -> None:
    job = _running()
    whys = {
        step(job, Claim(5))[1],
        step(job, Delivered(5))[1],
        step(job, Event(5, 5, "started", "agent", {"nonce": "n"}))[1],
        step(job, Event(5, 1, "progress", "agent", {}))[1],
        step(job, Event(5, 6, "delivered", "agent", {}))[1],
        step(job, Tick(5))[1],
        step(advance(job, End(6, JobState.CANCELLED, "x", 5)), Tick(7))[1],
        step(advance(_job(), Delivered(0)), Event(1, 1, "started", "agent", {"nonce": "other"}))[1],
        step(advance(_job(), Delivered(0)), Event(1, 1, "progress", "agent", {}))[1],
        step(_job(), Event(1, 1, "started", "agent", {"nonce": "n"}))[1],
    }
    assert whys <= {i.value for i in Ignored} and len(whys) == 10


# -- the CLI -------------------------------------------------------------------------------------------
def _help(*words: str) -> str:
    out = CliRunner().invoke(cli, [*words, "--help"])
    assert out.exit_code == Exit.OK, out.output
    return out.output.split("\nOptions:\n", 1)[0]


@pytest.mark.parametrize(
    "words",
    [
        ("job", "delegate"),
        ("job", "cancel"),
        ("job", "send"),
        ("session", "create"),
        ("loop",),
        ("event",),
        ("monitor",),
        ("runner",),
        ("doctor",),
        ("demo",),
        ("mcp",),
        ("budget",),
    ],
)
def test_every_exit_code_a_help_text_names_is_in_the_table(words: tuple[str, ...]) -> None:
    text = _help(*words)
    start = text.find("Exit")
    assert start >= 0, words
    codes = {int(n) for n in re.findall(r"(?:^|[\s;:])(\d{1,3})(?=\s+[a-z(`-]|\.|\s*$)", text[start:], re.M)}
    assert codes and codes <= EXIT_VALUES, (words, codes - EXIT_VALUES)


def test_the_delegate_help_gives_each_reason_its_exit_code() -> None:
    rows: dict[int, str] = {}
    code = -1
    for line in _help("job", "delegate").split("Exit codes:", 1)[1].splitlines():
        m = re.match(r"\s+(\d{1,3})\s{2}(.*)", line)
        if m:
            code = int(m.group(1))
        rows[code] = rows.get(code, "") + " " + (m.group(2) if m else line)
    named = {word: code for code, text in rows.items() for word in re.findall(r"\((\w+)\)", text)}
    assert set(named) >= {"agent_blocked", "brief_refused", "deadline_timeout", "wall_clock_timeout", "session_busy"}
    for word, code in named.items():
        assert ENDINGS[Reason(word)].exit_code == code, word


# -- the MCP server ------------------------------------------------------------------------------------
def test_the_mcp_tools_name_exit_codes_from_the_table() -> None:
    from mam.mcp.server import build, outcome_result

    tools = asyncio.run(build(None, poll_s=1).list_tools())  # type: ignore[arg-type]
    text = "\n".join(t.description or "" for t in tools)
    codes = {int(n) for n in re.findall(r"exit_code (\d+)", text)} | {
        int(n) for n in re.findall(r"exit_code \d+ [^,.;)]*?, (\d+)", text)
    }
    assert {Exit.ONBOARD_FAILED, Exit.ONBOARD_LATE, Exit.NOT_DELIVERED} <= codes <= EXIT_VALUES
    for reason, row in ENDINGS.items():
        res = outcome_result({"id": "j", "state": row.state.value, "reason": reason.value, "exit_code": row.exit_code})
        assert res.is_error is (row.exit_code != Exit.OK)
        assert res.structured_content is not None and res.structured_content["exit_code"] == row.exit_code


# -- the SKILL.md exit tables ----------------------------------------------------------------------------
def _exit_rows(path: Path) -> list[tuple[int, str]]:
    text = path.read_text(encoding="utf-8")
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0] if "## Exit codes" in text else ""
    return [(int(m.group(1)), m.group(2)) for m in re.finditer(r"^\|\s*(\d{1,3})\s*\|(.*)$", section, re.M)]


@pytest.mark.parametrize("skill", sorted(p.parent.name for p in SKILLS.glob("*/SKILL.md")))
def test_every_skill_exit_code_is_in_the_table(skill: str) -> None:
    for code, _meaning in _exit_rows(SKILLS / skill / "SKILL.md"):
        assert code in EXIT_VALUES, (skill, code)


def test_the_delegate_skill_gives_each_reason_and_state_its_exit_code() -> None:
    rows = _exit_rows(SKILLS / "multi-agent-mux-delegate-job" / "SKILL.md")
    named: set[str] = set()
    for code, meaning in rows:
        for word in re.findall(r"`(\w+)`", meaning):
            if word in {r.value for r in ENDINGS}:
                assert ENDINGS[Reason(word)].exit_code == code, word
                named.add(word)
            elif word in STATE_VALUES:
                assert STATE_EXIT[JobState(word)] == code, word
    assert {Reason.AGENT_ERROR, Reason.AGENT_BLOCKED, Reason.DEADLINE_TIMEOUT, Reason.SESSION_BUSY} <= named
    assert {code for code, _ in rows} >= {row.exit_code for row in ENDINGS.values()} | {TAKEN_OVER_EXIT}


def test_the_create_skill_names_the_onboarding_codes() -> None:
    rows = dict(_exit_rows(SKILLS / "multi-agent-mux-create" / "SKILL.md"))
    assert "onboarding failed" in rows[Exit.ONBOARD_FAILED] and "not end in time" in rows[Exit.ONBOARD_LATE]


# -- no literal comes back --------------------------------------------------------------------------------
TABLE = MAM / "outcomes.py"
# A stand-in for a third-party agent CLI (run in a pane, never by mam's commands): its exit codes are not mam's.
NOT_MAM = {MAM / "demo" / "agent.py"}
EXIT_CALLS = {"exit", "_exit", "SystemExit"}
REASON_CALLS = {"End", "refuse", "fail", "_end", "end_job", "Admission", "DecodeError", "ending"}


def _int(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _word(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in REASON_VALUES


def literals(path: Path) -> list[str]:
    """The literal exit codes and reason strings in one module, as `line: what`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    cli = path.is_relative_to(MAM / "cli")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (cli or node.name == "main"):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Return) and _int(sub.value):
                    found.append(f"{sub.lineno}: return {ast.unparse(sub.value)}")  # type: ignore[arg-type]
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            args = [*node.args, *(k.value for k in node.keywords)]
            if name in EXIT_CALLS and any(_int(a) for a in node.args):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
            if name in REASON_CALLS and any(_int(a) or _word(a) for a in args):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
            for k in node.keywords:
                if k.arg in ("exit_code", "code") and _int(k.value) or k.arg in ("reason", "state") and _word(k.value):
                    found.append(f"{node.lineno}: {k.arg}={ast.unparse(k.value)}")
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", "") for t in targets}
            exits = any(n in ("exit_code", "code") or n.upper().startswith("EXIT") for n in names)
            if exits and _int(node.value) or _word(node.value):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Compare):  # `job.state == "completed"`, `row["reason"] != "..."`
            sides = [node.left, *node.comparators]
            if (
                any(isinstance(o, (ast.Eq, ast.NotEq)) for o in node.ops)
                and any(isinstance(s, ast.Constant) and s.value in STATE_VALUES | REASON_VALUES for s in sides)
                and any(re.search(r"(state|reason)\b\W*$", ast.unparse(s)) for s in sides)
            ):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        if (
            isinstance(node, ast.Return)
            and isinstance(node.value, ast.Tuple)
            and any(_word(e) for e in node.value.elts)
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Compare) and any(_int(s) for s in [node.left, *node.comparators]):
            if any("exit_code" in ast.unparse(s) for s in [node.left, *node.comparators]):  # `out.exit_code != 0`
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_finds_what_it_is_written_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import sys\n"
        "class E(Exception):\n    exit_code = 5\n"
        "def main():\n    return 2\n"
        "def f(job, x):\n"
        "    sys.exit(3)\n"
        "    End(0, x, 'wrapper_died', 5)\n"
        "    refuse('inject_failed', 'no')\n"
        "    if job.state == 'completed':\n        return job, 'job_closed'\n"
        "    note('rejected', reason='max_jobs')\n"
        "EXIT_PASSED = 0\n"
        "ok = out.get('exit_code') == 0\n"
    )
    assert len(literals(bad)) == 10, literals(bad)


def test_no_literal_exit_code_or_reason_outside_the_table() -> None:
    found = {
        str(p.relative_to(ROOT)): hits
        for p in sorted(MAM.rglob("*.py"))
        if p != TABLE and p not in NOT_MAM and (hits := literals(p))
    }
    assert not found, f"literal exit codes or reasons outside mam/outcomes.py: {found}"
