"""`mam job send`'s checks that need no pane (mam/jobs/send.py): what is refused before a registry is
opened, which pane a job is typed into, and a remote or not-running job refused with nothing written.
The pane itself (the text typed once, a box not empty, a prompt) is tests/e2e/test_job_send.py's."""

from __future__ import annotations

from typing import Any, NoReturn

import pytest

from mam.errors import JobRefused, UsageError
from mam.jobs.ledger import Ledger, new_owner
from mam.jobs.model import JobState
from mam.jobs.record import now_ms, read_audit
from mam.jobs.send import pane_target, send_text
from mam.jobs.target import Target
from mam.outcomes import Exit
from mam.settings import load_settings
from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.jobs import delivered_job_at


def register(ws: Workspace, registry: Registry, *, state: JobState, **meta: Any) -> str:
    now = now_ms()
    job = delivered_job_at(now, session="w", state=state, started_ms=now if state is JobState.RUNNING else None)
    fields = {"target": "w", "kind": "job", "topic_prefix": "t", **meta}
    return Ledger.register(ws, registry, job, owner=new_owner(), meta=fields).job.id


def no_registry() -> NoReturn:
    raise AssertionError("the registry was opened before the input was checked")


@pytest.mark.parametrize(
    ("job_id", "text", "by", "says"),
    [
        ("..", "hi", None, "invalid job id"),
        ("job-1", "hi \x1b[201~ keys", None, "the text holds a control character (U+001B)"),
        ("job-1", "bell\x07", None, "control character (U+0007)"),
        ("job-1", " \n\t", None, "the text is empty"),
        ("job-1", "x" * (256 * 1024 + 1), None, "the text is 262145 bytes"),
        ("job-1", "hi", "me\nyou", "--by must be printable"),
    ],
)
def test_bad_input_is_refused_before_anything_is_opened(tmp_path, job_id, text, by, says):  # type: ignore[no-untyped-def]
    ws = Workspace(tmp_path)
    with pytest.raises(UsageError) as e:
        send_text(ws, load_settings(env_file=None), job_id, text, by=by, registry_of=no_registry)
    assert says in str(e.value) and e.value.exit_code == Exit.USAGE
    assert not ws.state.exists()


def test_the_pane_of_a_local_job_of_a_runners_copy_and_none_for_a_remote_one(store):  # type: ignore[no-untyped-def]
    ws, registry = store
    local = registry.job(register(ws, registry, state=JobState.RUNNING, target="tmux:w"))
    assert pane_target(local) == Target("tmux:w", "w", backend="tmux")
    copy = registry.job(register(ws, registry, state=JobState.RUNNING, target="r1/w", kind="remote", relay="runner"))
    assert pane_target(copy) == Target("w", "w")  # the runner's copy: the session is on this host
    remote = registry.job(register(ws, registry, state=JobState.RUNNING, target="remote:r1/w", runner="r1"))
    with pytest.raises(UsageError, match="runs on the host of runner r1 ") as e:
        pane_target(remote)
    assert e.value.exit_code == Exit.USAGE


@pytest.mark.parametrize(
    ("state", "meta", "error", "code", "says"),
    [
        (JobState.RUNNING, {"target": "remote:r1/w", "runner": "r1"}, UsageError, Exit.USAGE, "nothing sent; run"),
        (JobState.DELIVERED, {}, JobRefused, Exit.REFUSED, "is delivered, not running: nothing sent"),
        (JobState.RUNNING, {}, JobRefused, Exit.REFUSED, "nothing sent: no session named 'w'"),
    ],
)
def test_a_job_that_cannot_take_a_text_gets_no_audit_line(store, state, meta, error, code, says):  # type: ignore[no-untyped-def]
    ws, registry = store
    job_id = register(ws, registry, state=state, **meta)
    before = read_audit(ws, job_id)
    with pytest.raises(error) as e:
        send_text(ws, load_settings(env_file=None), job_id, "hello", registry_of=lambda: registry)
    assert says in str(e.value) and e.value.exit_code == code
    assert read_audit(ws, job_id) == before
