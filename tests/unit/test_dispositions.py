"""A task's disposition as its job completes (issue 42): the event's fields as the protocol declares them, the
body the node signs, and the footer of a task's job, whose every command line runs as printed
(tests/e2e/test_footer_runs.py runs them)."""

from __future__ import annotations

import shlex

import pytest

from mam.errors import UsageError
from mam.jobs.brief import footer
from mam.node.front import EVENT_OPTIONS
from mam.node.service import event_body
from mam.protocol import Invalid, check_args


def test_the_event_takes_a_disposition_from_the_three_and_a_task_id_to_wait_on() -> None:
    args = check_args("event", {"job": "j", "type": "completed", "disposition": "blocked", "waiting_on": "t-2"})
    assert (args["disposition"], args["waiting_on"]) == ("blocked", "t-2")
    with pytest.raises(Invalid, match="--disposition must be one of done, blocked, review"):
        check_args("event", {"job": "j", "type": "completed", "disposition": "maybe"})
    with pytest.raises(Invalid, match="invalid task id"):
        check_args("event", {"job": "j", "type": "completed", "disposition": "blocked", "waiting_on": "../x"})
    assert {"disposition", "waiting_on"} <= set(EVENT_OPTIONS["completed"])


def test_the_signed_body_holds_the_disposition_and_refuses_a_wait_without_blocked() -> None:
    body, _fit = event_body("completed", {"message": "m", "disposition": "blocked", "waiting_on": "t-2"}, {})
    assert body == {"message": "m", "disposition": "blocked", "waiting_on": "t-2"}
    assert event_body("completed", {"message": "m"}, {})[0] == {"message": "m"}
    assert event_body("completed", {"disposition": "review"}, {})[0] == {"message": "", "disposition": "review"}
    with pytest.raises(UsageError, match="--waiting-on goes with --disposition blocked"):
        event_body("completed", {"disposition": "review", "waiting_on": "t-2"}, {})
    with pytest.raises(UsageError, match="--disposition blocked needs --waiting-on"):
        event_body("completed", {"disposition": "blocked"}, {})


def test_a_tasks_footer_adds_the_review_command_and_says_the_blocked_one_in_words() -> None:
    plain, task = footer("t-1-r1", "n0nce", 30), footer("t-1-r1", "n0nce", 30, task=True)
    assert "--disposition" not in plain
    commands = [shlex.split(line) for line in task.splitlines() if line.startswith("  ")]
    assert ["mam", "event", "completed", "--job", "t-1-r1", "--disposition", "review", "--message",
            "what to review"] in commands  # fmt: skip
    prose = [line for line in task.splitlines() if line and not line.startswith("  ")]
    assert any("--disposition blocked --waiting-on" in line for line in prose)
    assert not any(line.lstrip().startswith("mam ") or "[" in line for line in prose)


def test_the_org_settles_the_dispositions_the_protocol_declares() -> None:
    from mam.protocol import DISPOSITIONS
    from mam.store import org

    assert org.DISPOSITIONS == DISPOSITIONS
