"""Briefs: validation, and the footer that tells the agent exactly which `mam event` commands to run."""

from __future__ import annotations

import re

from mam.errors import UsageError

MAX_BRIEF_BYTES = 256 * 1024
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def check_brief(text: str, *, max_bytes: int = MAX_BRIEF_BYTES, what: str = "the brief") -> str:
    """The brief if it may be pasted into a pane; else UsageError. Run on every brief, local or dispatched,
    and on every other text mam pastes (`what` names it: `mam job send`'s text): a control character
    (ESC above all) would end a bracketed paste and type the rest as keystrokes."""
    if not isinstance(text, str):
        raise UsageError(f"{what} is not text")
    if not text.strip():
        raise UsageError(f"{what} is empty")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise UsageError(
            f"{what} is {size} bytes; the limit is {max_bytes} (put long material in a file and name it in {what})"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise UsageError(f"{what} is not valid UTF-8 text") from e
    bad = _CONTROL.search(text)
    if bad:
        raise UsageError(
            f"{what} holds a control character (U+{ord(bad.group()):04X}); only tab, CR and LF are allowed"
        )
    return text


def seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


TASK_KIND = "task"  # the kind of a task's job (mam/org): its footer also says how to report a disposition


def footer(job_id: str, nonce: str, heartbeat_s: float, *, task: bool = False) -> str:
    """The commands the agent runs, one per line and each runnable exactly as printed; anything
    optional is said in words on a line of its own (guarantee 11). `task`: the job is a task's run
    (mam/org), so the agent may also say how the task stands (`--disposition`)."""
    hb = seconds(heartbeat_s)
    return (
        "\n\n---\n"
        f"This is mam job {job_id}. Report on it from your shell; each indented line is one command, run it exactly "
        "as written.\n"
        "First, exactly once, before you start:\n"
        f"  mam event started --job {job_id} --nonce {nonce} --heartbeat {hb}\n"
        "While you work, as often as you like (put your own words between the quotes):\n"
        f'  mam event progress --job {job_id} --message "what you are doing"\n'
        "When you are done (your one-line result between the quotes):\n"
        f'  mam event completed --job {job_id} --message "one-line result"\n'
        + (_dispositions(job_id) if task else "")
        + "To attach a longer report, add --report and the path of a file you wrote to that command.\n"
        "If you cannot do it:\n"
        f'  mam event error --job {job_id} --reason "why"\n'
    )


def _dispositions(job_id: str) -> str:
    return (
        "That marks the task done. To leave it in review instead (a person marks it done or reopens it), "
        "run this in its place:\n"
        f'  mam event completed --job {job_id} --disposition review --message "what to review"\n'
        "If the task cannot go on until another task is done, add --disposition blocked --waiting-on and that "
        "task's id to the completed command: the task is woken again once that one is done.\n"
    )


def with_footer(brief: str, job_id: str, nonce: str, heartbeat_s: float, *, task: bool = False) -> str:
    return brief.rstrip("\n") + footer(job_id, nonce, heartbeat_s, task=task)


RESUMED = "was paused and is resumed now"  # how a resume brief begins (after `mam job <id> `)


def resume_brief(job_id: str, nonce: str, heartbeat_s: float, *, task: bool = False) -> str:
    """What `mam job resume` types: the job id, a new nonce (its `started` must carry it), the footer."""
    return f"mam job {job_id} {RESUMED}: carry on with it where you left off." + footer(
        job_id, nonce, heartbeat_s, task=task
    )
