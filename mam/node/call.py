"""An operation of the node protocol for a library caller: the CLI's commands beyond the lean ones, the MCP
server, a loop, the demo, onboarding. Typed values in, typed values out: no command line, no output text.

`call` hands the request to the workspace's node (started when the operation needs one: mam.protocol
STARTS_NODE), else runs it in this process (mam.node.local: MAM_NODE=0, or no node and none to start). The
job's owner is then the node while it runs, and this caller going away (a client leaving, Ctrl-C) takes
nothing from it. `on_frame` is told each frame before the final one (the job the operation drives, its
progress). `answer` is the final frame's value, or Refused with the node's one line and exit code.
A caller's signals are its own (none is forwarded): one interrupted closes the connection, and the node
runs the operation on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mam.errors import Refused
from mam.jobs.result import Outcome, outcome_from_dict
from mam.node import client, local
from mam.outcomes import Exit
from mam.protocol import request, settings_of

Frame = dict[str, Any]


def call(
    root: str | Path | None,
    op: str,
    args: dict[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    on_frame: Callable[[Frame], None] | None = None,
    signals: bool = False,
) -> Frame:
    """The final frame of `op` with `args` for the workspace at `root` (None: found from this process's folder
    and MAM_WORKSPACE). `environ`: the caller's environment, whose settings variables the request carries
    (and whose MAM_NODE and MAM_NO_AUTOSTART count; default: this process's). `signals`: this process's
    interrupts are the node's to know (a command line's own: mam.node.client.Gone names the jobs)."""
    environ = os.environ if environ is None else environ
    req = request(op, args, settings_of(environ))
    tell = on_frame or _ignore
    if client.flag(environ, "MAM_NODE", True):
        found = client.workspace(str(root) if root is not None else None)
        if found is not None:
            final = client.exchange(found, req, tell, environ=environ, signals=signals)
            if final is not None:
                return final
    return local.run(root, op, req["args"], req["settings"], tell)


def answer(final: Frame) -> Any:
    """The value of a final frame; Refused (the node's line and exit code) for an error or a lost operation."""
    if "answer" in final:
        return final["answer"]
    said = final.get("error") or final.get("left") or final.get("lost") or "the node gave no answer"
    raise Refused(str(said), exit_code=int(final.get("exit", 1)), kind=str(final.get("kind") or ""))


def value(root: str | Path | None, op: str, args: dict[str, Any], **kw: Any) -> Any:
    """`answer(call(...))`: the operation's value, or Refused."""
    return answer(call(root, op, args, **kw))


def _ignore(_frame: Frame) -> None:
    pass


@dataclass(frozen=True)
class Delivered:
    """A `detach`ed delegation's answer: its brief is delivered (or its idempotency key named another call's
    job, `job_id`), and the job runs on in `state`."""

    job_id: str
    state: str


def delegation(
    root: str | Path | None,
    args: dict[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    on_job: Callable[[str], None] | None = None,
) -> Outcome | Delivered:
    """A `delegate` operation (`args`: mam.protocol DELEGATE's fields): the job's Outcome, or Delivered for a
    `detach`ed one that runs on; Refused when the node answered with an error. `on_job`: told the job the
    delegation drives (made, taken over or attached to) once the node names it."""

    def told(frame: Frame) -> None:
        if on_job is not None and isinstance(frame.get("job"), str):
            on_job(frame["job"])

    got = answer(call(root, "delegate", args, environ=environ, on_frame=told))
    if set(got) == {"id", "state"}:
        return Delivered(str(got["id"]), str(got["state"]))
    return outcome_from_dict(got)


def to_its_end(root: str | Path | None, args: dict[str, Any], **kw: Any) -> Outcome:
    """A `delegate` operation (not detached) to the job's end: its Outcome; Refused otherwise."""
    got = delegation(root, args, **kw)
    if isinstance(got, Delivered):
        raise Refused(f"the node answered before job {got.job_id} ended ({got.state})", exit_code=Exit.FAILED)
    return got
