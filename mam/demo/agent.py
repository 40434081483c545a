"""The demo agent: a real interactive terminal program with no LLM, for demos and tests.

It behaves like an agent TUI: raw mode, bracketed paste, an input box, a transcript, a
conversation file it can resume. When a submitted message holds a mam job footer it follows
the protocol with the real `mam event` commands and does deterministic work:

    demo-write: PATH :: TEXT      write a file (TEXT may use \\n)
    demo-append: PATH :: TEXT     append to a file
    demo-commit: MESSAGE          git add -A && git commit (argv, no shell); a failed commit is named in the
                                  result with git's reason (`commit failed: fatal: ...`)
    demo-sleep: SECONDS           work that long (a progress event each second while work is left; Escape
                                  interrupts it)
    demo-await: PATH              work until PATH exists (at most AWAIT_LIMIT_S; Escape interrupts it): a test
                                  holds the turn open for as long as it needs, whatever the machine's load
    demo-tokens: N                spend N output tokens at this point (see Usage)
    demo-behaviour: NAME          override the session's behaviour for this brief
    demo-verdict: V               reviewer verdict: PASS, NOT PASS, none, inline, lower, double
    demo-rebut: TEXT              as a creator, answer a fix request with [REBUT: TEXT]
    demo-disposition: D[; D...]   a task's job (mam task): complete it with `--disposition D`, D one of
                                  done, review, blocked TASK (`--waiting-on TASK`); the Nth run of the
                                  same task takes the Nth D (the last one from then on)

A brief holding a line `Report file: PATH` is a review: the agent writes a report there
that ends with its verdict line. A brief holding `Plan file: PATH` asks for a plan: the agent
writes one there (or adds a revision to it). A brief holding `[mam-loop: challenge]` asks a
creator to challenge a plan: it answers with a challenge for its first MAM_DEMO_CHALLENGES
(default 1) such briefs, then with `[PLAN OK]`. MAM_DEMO_ANSWER, when set, is the last line
of every result (a session's vote in `mam job fanout --aggregate vote`). Behaviours
(MAM_DEMO_BEHAVIOUR or --behaviour): ok,
never_start, crash_after_start, silent_after_start, error, slow, unsubmitted.

Usage: like a real CLI's transcript, the conversation file records the tokens of each model turn
(a turn's `usage`: input_tokens, output_tokens, cache_read_tokens, cache_write_tokens), which mam
reads for the job's usage (mam.usage.readers.demo_conversation). For each job, deterministically:
input_tokens = ceil(bytes of the submitted message / 4) when it starts, then output_tokens = N at
each `demo-tokens: N` line as it is reached, then output_tokens = REPLY_TOKENS (100) for its reply,
just before `completed`. Its work log is in the same file: a turn `work: begin` when it takes a job,
`work: end` just before it reports (completed or error), `work: interrupted` on an Escape.
Escape while it works interrupts the job, as a real CLI's turn is interrupted: no report is sent.
Run: python -m mam.agents.demo_agent (--session-id ID | --resume ID) [--behaviour B]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import select
import shutil
import subprocess
import sys
import termios
import threading
import time
import tty
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mam.util.proc import module_argv

REPLY_TOKENS = 100
ESCAPE_WAIT_S = 0.05  # a lone Escape is one that no other byte follows this soon (a TUI's escape timeout)
BEHAVIOURS = ("ok", "never_start", "crash_after_start", "silent_after_start", "error", "slow", "unsubmitted")
PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"
PROMPT = "\u203a"  # the input box's glyph: the last line of the screen is "› " and what is typed
STARTED = re.compile(
    r"mam event started --job (?P<id>[A-Za-z0-9._-]+) --nonce (?P<nonce>[A-Za-z0-9]+) --heartbeat (?P<hb>[0-9.]+)"
)
AWAIT_LIMIT_S = 120.0  # demo-await: a test that never makes its file still sees the job end
DIRECTIVE = re.compile(r"^\s*demo-(?P<name>[a-z]+):\s?(?P<value>.*?)\s*$", re.M)
REPORT_FILE = re.compile(r"^\s*Report file:\s*(?P<path>\S.*?)\s*$", re.M)
FIX_REQUEST = "[mam-loop: fix]"
CHALLENGE_REQUEST = "[mam-loop: challenge]"
RESUMED = (
    "was paused and is resumed now"  # a resume brief reads so (mam.jobs.brief.resume_brief), as STARTED its footer
)
PLAN_FILE = re.compile(r"^\s*Plan file:\s*(?P<path>\S.*?)\s*$", re.M)
TASK_LINE = re.compile(r"^Task (?P<id>[A-Za-z0-9][A-Za-z0-9._-]*): ", re.M)  # a task's brief (mam.org.brief)


def conversations_dir(env: Mapping[str, str]) -> Path:
    """In the workspace of the session (nothing in HOME); ~/.mam-demo when run outside one."""
    workspace = env.get("MAM_WORKSPACE")
    if workspace:
        return Path(workspace) / ".mam" / "demo-agent" / "conversations"
    return _home_dir(env)


def _home_dir(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".mam-demo" / "conversations"


def conversation_paths(env: Mapping[str, str], cid: str) -> list[Path]:
    """Where conversation `cid` may be: the current place first, then ~/.mam-demo (where sessions
    created by mam 0.1.0 before 2026-11-30 kept theirs)."""
    return list(dict.fromkeys([conversations_dir(env) / f"{cid}.json", _home_dir(env) / f"{cid}.json"]))


def commit(message: str, cwd: Path | None = None) -> str:
    """`git add -A` and `git commit` in `cwd`: `commit`, `nothing to commit`, or `commit failed: ` and git's
    own first line of why (no user.name or user.email, not a git repository), never a failure passed off
    as nothing to do."""
    subprocess.run(["git", "add", "-A"], check=False, capture_output=True, cwd=cwd)
    proc = subprocess.run(["git", "commit", "-q", "-m", message], capture_output=True, text=True, cwd=cwd)
    if proc.returncode == 0:
        return "commit"
    status = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, cwd=cwd)
    if status.returncode == 0 and not status.stdout.strip():
        return "nothing to commit"
    lines = [line.strip() for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
    why = next((line for line in lines if line.startswith("fatal:")), lines[0] if lines else f"exit {proc.returncode}")
    return f"commit failed: {why}"


class Interrupted(Exception):
    """Escape was pressed while the agent worked on a job (the job's id is the message)."""


class Conversation:
    """The agent's memory: one JSON file per conversation id."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path, self.data = path, data
        self._lock = threading.Lock()

    @classmethod
    def open(cls, cid: str, *, resume: bool) -> Conversation:
        path = conversations_dir(os.environ) / f"{cid}.json"
        if resume:
            path = next((p for p in conversation_paths(os.environ, cid) if p.exists()), path)
            if not path.exists():
                print(f"No conversation found with session ID: {cid}", file=sys.stderr)
                sys.exit(1)
            return cls(path, json.loads(path.read_text()))
        path.parent.mkdir(parents=True, exist_ok=True)
        convo = cls(
            path, {"id": cid, "cwd": os.getcwd(), "created": time.time(), "turns": [], "reviews": 0, "launches": 0}
        )
        convo.save()
        return convo

    def add(self, role: str, text: str, **extra: Any) -> None:
        with self._lock:
            self.data["turns"].append({"role": role, "text": text, "ts": time.time(), **extra})
            self.save()

    def brief_of(self, job: str) -> str:
        """The first message of this conversation that delegated `job` (its brief, not a resume)."""
        for turn in self.data["turns"]:
            m = STARTED.search(turn["text"]) if turn["role"] == "user" else None
            if m is not None and m.group("id") == job and RESUMED not in turn["text"]:
                return str(turn["text"])
        return ""

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data))
        os.replace(tmp, self.path)


class Screen:
    """Raw-mode output: every newline needs a carriage return."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        with self._lock:
            os.write(1, text.replace("\r\n", "\n").replace("\n", "\r\n").encode("utf-8", "replace"))

    def line(self, text: str) -> None:
        self.write("\r\x1b[2K" + text + "\n")

    def prompt(self, text: str = "") -> None:
        self.write(f"\r\x1b[2K{PROMPT} " + text)


class DemoAgent:
    def __init__(self, convo: Conversation, behaviour: str) -> None:
        self.convo, self.behaviour = convo, behaviour
        self.screen = Screen()
        self.buffer = ""
        self.pasted = False
        self.swallow_enter = behaviour == "unsubmitted"
        self.mam = shutil.which("mam") or ""
        self.busy = threading.Lock()
        self.interrupt = threading.Event()  # Escape while a job is worked on
        self.working_on = ""  # the job whose `started` was sent and whose end is not yet reported

    # -- input --------------------------------------------------------------------------------
    def run(self) -> int:
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd) if os.isatty(fd) else None
        if saved is not None:
            tty.setraw(fd)
        try:
            self.screen.write("\x1b[?2004h")
            self.screen.line(f"demo agent ready (conversation {self.convo.data['id']}, behaviour {self.behaviour})")
            self.screen.prompt()
            return self._loop(fd)
        finally:
            self.screen.write("\x1b[?2004l\r\n")
            if saved is not None:
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)

    def _loop(self, fd: int) -> int:
        pending = b""
        in_paste = False
        paste = bytearray()
        while True:
            if pending == b"\x1b" and not in_paste and not select.select([fd], [], [], ESCAPE_WAIT_S)[0]:
                pending = b""  # a lone Escape: interrupt the work under way
                if self.busy.locked():
                    self.interrupt.set()
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return 0
            pending += chunk
            while pending:
                if in_paste:
                    end = pending.find(PASTE_END)
                    if end < 0:
                        keep = len(PASTE_END) - 1  # the end marker may be split across reads
                        paste += pending[:-keep] if len(pending) > keep else b""
                        pending = pending[-keep:] if len(pending) > keep else pending
                        break
                    paste += pending[:end]
                    pending = pending[end + len(PASTE_END) :]
                    in_paste = False
                    self.buffer += paste.decode("utf-8", "replace")
                    self.pasted = True
                    paste.clear()
                    self.screen.prompt(self.placeholder())
                    continue
                if pending.startswith(PASTE_START):
                    pending = pending[len(PASTE_START) :]
                    in_paste = True
                    continue
                if PASTE_START.startswith(pending) and len(pending) < len(PASTE_START):
                    break  # wait for the rest of a possible paste marker
                if pending[:1] == b"\x1b":
                    pending = pending[1:]  # a lone Escape or another sequence: ignored
                    continue
                key, pending = pending[:1], pending[1:]
                if self._key(key) is False:
                    return 0

    def _key(self, key: bytes) -> bool:
        if key in (b"\r", b"\n"):
            if self.pasted and self.swallow_enter:
                self.swallow_enter = False  # 'unsubmitted': the first Enter after a paste is lost
                return True
            text, self.buffer, self.pasted = self.buffer, "", False
            if text.strip() in ("/exit", "/quit"):
                self.screen.line("bye")
                return False
            if text.strip():
                self.submit(text)
            self.screen.prompt()
        elif key == b"\x04":
            if not self.buffer:
                self.screen.line("bye")
                return False
        elif key == b"\x03":
            self.buffer, self.pasted = "", False
            self.screen.prompt()
        elif key in (b"\x7f", b"\x08"):
            self.buffer = self.buffer[:-1]
            self.screen.prompt(self.buffer)
        else:
            self.buffer += key.decode("utf-8", "replace")
            if not self.pasted:
                self.screen.prompt(self.buffer)
        return True

    # -- work ---------------------------------------------------------------------------------
    def submit(self, text: str) -> None:
        self.screen.line("» you:")
        self.screen.write(text.rstrip("\n") + "\n")
        self.convo.add("user", text)
        threading.Thread(target=self._work, args=(text,), daemon=True).start()

    def _work(self, text: str) -> None:
        with self.busy:
            self.interrupt.clear()
            try:
                self._handle(text)
            except Interrupted as e:
                self.convo.add("agent", f"interrupted {e}", work="interrupted", job=str(e))
                self.say("interrupted")
            except Exception as e:  # the demo must never die of a bad brief: it reports it
                self.screen.line(f"demo agent: internal error {type(e).__name__}: {e}")
                if self.working_on:  # as a real agent would: the job ends now, not at its deadline
                    self.event("error", self.working_on, "--reason", f"demo agent: {type(e).__name__}: {e}"[:500])
            finally:
                self.working_on = ""

    def _handle(self, text: str) -> None:
        m = STARTED.search(text)
        if m is None:
            self.say("(no mam job in this message; nothing to do)")
            return
        job, nonce, hb = m.group("id"), m.group("nonce"), m.group("hb")
        if RESUMED in text:  # `mam job resume`: carry on with the job's own brief, as a real agent's context holds it
            text = self.convo.brief_of(job) or text
        directives = [(d.group("name"), d.group("value")) for d in DIRECTIVE.finditer(text)]
        behaviour = next((v for n, v in directives if n == "behaviour"), self.behaviour)
        if behaviour == "never_start":
            self.say(f"(ignoring job {job})")
            return
        silent = behaviour == "silent_after_start"
        self.convo.add("agent", f"working on {job}", work="begin", job=job)
        self.spend(job, input_tokens=math.ceil(len(text.encode("utf-8")) / 4))
        self.event("started", job, "--nonce", nonce, *([] if silent else ["--heartbeat", hb]))
        self.working_on = job
        if behaviour == "crash_after_start":
            self.say("crashing now (demo)")
            os._exit(3)
        if silent:
            self.say(f"(started {job}, now going silent)")
            return
        if behaviour == "error":
            self.convo.add("agent", f"done with {job}", work="end", job=job)
            self.working_on = ""
            self.event("error", job, "--reason", "demo agent was told to fail")
            return
        if behaviour == "slow":
            directives.append(("sleep", os.environ.get("MAM_DEMO_SLEEP_S", "3")))
        message, report = self._do(job, text, directives)
        args = ["--message", message] + (["--report", report] if report else [])
        args += self._disposition(text, directives)
        self.spend(job, output_tokens=REPLY_TOKENS)
        self.convo.add("agent", f"done with {job}", work="end", job=job)
        self.working_on = ""
        self.event("completed", job, *args)

    def _disposition(self, text: str, directives: list[tuple[str, str]]) -> list[str]:
        """`--disposition D [--waiting-on TASK]` for this run of the task (see demo-disposition), else none."""
        said = next((v for n, v in directives if n == "disposition"), "")
        task = TASK_LINE.search(text)
        if not said or task is None:
            return []
        runs = self.convo.data.setdefault("task_runs", {})
        n = int(runs.get(task.group("id"), 0))
        runs[task.group("id")] = n + 1
        self.convo.save()
        steps = [s.split() for s in said.split(";") if s.strip()]
        step = steps[min(n, len(steps) - 1)]
        return ["--disposition", step[0]] + (["--waiting-on", step[1]] if len(step) > 1 else [])

    def spend(self, job: str, **tokens: int) -> None:
        """Record a model turn's usage, as a CLI's transcript does (see Usage in the module docstring)."""
        usage = {
            k: tokens.get(k, 0) for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
        }
        self.convo.add("agent", f"model turn for {job}", usage=usage, job=job)

    def _do(self, job: str, text: str, directives: list[tuple[str, str]]) -> tuple[str, str | None]:
        done: list[str] = []
        rebut = next((v for n, v in directives if n == "rebut"), os.environ.get("MAM_DEMO_REBUT", ""))
        if FIX_REQUEST in text and rebut:
            return f"[REBUT: {rebut}]", None
        if CHALLENGE_REQUEST in text:
            return self._challenge(), None
        for name, value in directives:
            if self.interrupt.is_set():
                raise Interrupted(job)
            if name == "tokens":
                self.spend(job, output_tokens=int(value or "0"))
                done.append(f"spent {value} tokens")
            elif name in ("write", "append"):
                path, _, content = value.partition(" :: ")
                target = Path(path.strip())
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "a" if name == "append" else "w", encoding="utf-8") as f:
                    f.write(content.replace("\\n", "\n") + ("\n" if not content.endswith("\\n") else ""))
                done.append(f"{name} {target}")
            elif name == "commit":
                done.append(commit(value or "demo commit"))
            elif name == "sleep":
                self._sleep(job, float(value or "1"))
                done.append(f"worked {value}s")
            elif name == "await":
                self._await(job, Path(value))
                done.append(f"saw {value}")
        report = REPORT_FILE.search(text)
        if report:
            return self._review(Path(report.group("path")), directives), report.group("path")
        plan = PLAN_FILE.search(text)
        if plan:
            return self._plan(Path(plan.group("path"))), None
        answer = os.environ.get("MAM_DEMO_ANSWER", "")  # a fixed last line: this session's vote in a fan-out
        return ("; ".join(done) or "done") + (f"\n{answer}" if answer else ""), None

    def _sleep(self, job: str, seconds: float) -> None:
        """Work `seconds`, saying how far it got each second while work is left (a report right before
        `completed` would say nothing the completion does not)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.interrupt.wait(min(1.0, max(0.0, end - time.monotonic()))):
                raise Interrupted(job)
            left = end - time.monotonic()
            if left > 0:
                self.event("progress", job, "--message", f"working ({left:.0f}s left)")

    def _await(self, job: str, path: Path) -> None:
        """Work until `path` exists (or AWAIT_LIMIT_S passed), looking each 0.05 s."""
        end = time.monotonic() + AWAIT_LIMIT_S
        while not path.exists() and time.monotonic() < end:
            if self.interrupt.wait(0.05):
                raise Interrupted(job)

    def _review(self, path: Path, directives: list[tuple[str, str]]) -> str:
        n = self.convo.data.get("reviews", 0)
        self.convo.data["reviews"] = n + 1
        self.convo.save()
        touch = os.environ.get("MAM_DEMO_REVIEW_TOUCH", "")
        if touch and n == 0:
            with open(touch, "a", encoding="utf-8") as f:  # change the source while the review runs
                f.write(f"changed during review {time.time()}\n")
        script = [v.strip() for v in os.environ.get("MAM_DEMO_VERDICTS", "PASS").split(",") if v.strip()] or ["PASS"]
        verdict = next((v for k, v in directives if k == "verdict"), script[min(n, len(script) - 1)])
        body = [f"# Review {n + 1} by the demo agent", "", "Checked the snapshot named in the brief."]
        if verdict.upper() == "NOT PASS":
            body += [
                "",
                "## Findings",
                f"- demo finding {n + 1}: please record a fix",
                f"demo-append: DEMO_FIXES.md :: fix for review {n + 1}",
                "demo-commit: apply review findings",
            ]
        ending = {
            "PASS": "[VERDICT: PASS]",
            "NOT PASS": "[VERDICT: NOT PASS]",
            "none": "No verdict from me.",
            "inline": "Overall this is [VERDICT: PASS] in my view.",
            "lower": "[verdict: pass]",
            "double": "[VERDICT: PASS]\n[VERDICT: NOT PASS]",
        }.get(verdict, verdict)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(body + ["", ending]) + "\n", encoding="utf-8")
        return f"review written: {verdict}"

    def _count(self, key: str) -> int:
        n = int(self.convo.data.get(key, 0))
        self.convo.data[key] = n + 1
        self.convo.save()
        return n

    def _challenge(self) -> str:
        n = self._count("challenges")
        if n < int(os.environ.get("MAM_DEMO_CHALLENGES", "1") or 0):
            return f"demo challenge {n + 1}: the plan needs a step that tests the change"
        return "[PLAN OK]"

    def _plan(self, path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            n = self._count("plan_revisions") + 1
            with open(path, "a", encoding="utf-8") as f:
                f.write(f"\n## Revision {n}\n\n- Added a step that tests the change, as the creator asked.\n")
            return f"plan revised ({n})"
        path.write_text(
            "# Plan (demo planner)\n\n1. Do exactly what the task says.\n2. Commit the result.\n", encoding="utf-8"
        )
        return "plan written"

    def event(self, kind: str, job: str, *args: str) -> None:

        argv = ([self.mam] if self.mam else module_argv(sys.executable, "mam")) + ["event", kind, "--job", job, *args]
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            self.say(f"mam event {kind} failed ({proc.returncode}): {proc.stderr.strip()[:300]}")
        elif kind != "progress":
            self.say(f"{kind} sent")
        self.convo.add("agent", f"event {kind} rc={proc.returncode}")

    def placeholder(self) -> str:
        return f"[pasted {len(self.buffer.encode())} bytes, press Enter to send]"

    def say(self, text: str) -> None:
        self.screen.line(f"« {text}")
        self.screen.prompt(self.placeholder() if self.pasted else self.buffer)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mam.agents.demo_agent")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--session-id")
    group.add_argument("--resume")
    parser.add_argument("--behaviour", default=os.environ.get("MAM_DEMO_BEHAVIOUR", "ok"), choices=BEHAVIOURS)
    args = parser.parse_args(argv)
    cid = args.resume or args.session_id
    convo = Conversation.open(cid, resume=bool(args.resume))
    convo.data["launches"] = convo.data.get("launches", 0) + 1
    convo.save()
    return DemoAgent(convo, args.behaviour).run()


if __name__ == "__main__":
    sys.exit(main())
