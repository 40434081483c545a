"""Every MQTT topic mam uses, built in one place.

    <prefix>/jobs/<job>/events               signed job events (QoS 1)
    <prefix>/jobs/<job>/state                the job's latest state (retained, QoS 1)
    <prefix>/runners/<runner>/presence       a runner's presence (retained; last will says offline)
    <prefix>/runners/<runner>/dispatch/<job> a remote dispatch (retained until the runner takes it)
"""

from __future__ import annotations

import re

from mam.errors import UsageError
from mam.settings import Settings
from mam.workspace import Workspace

_SEGMENT = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")


def prefix_for(settings: Settings, ws: Workspace) -> str:
    configured = settings.get_str("MAM_TOPIC_PREFIX").strip().strip("/")
    if configured:
        if any(c in configured for c in "#+\0"):
            raise UsageError(f"MAM_TOPIC_PREFIX {configured!r} must not hold MQTT wildcards")
        return configured
    return f"mam/{ws.slug}"


def segment(value: str, what: str = "topic segment") -> str:
    if not _SEGMENT.match(value):
        raise UsageError(f"invalid {what} {value!r}: letters, digits, '.', '_' or '-' only")
    return value


class Topics:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def events(self, job: str) -> str:
        return f"{self.prefix}/jobs/{segment(job, 'job id')}/events"

    def state(self, job: str) -> str:
        return f"{self.prefix}/jobs/{segment(job, 'job id')}/state"

    def all_events(self) -> str:
        return f"{self.prefix}/jobs/+/events"

    def all_states(self) -> str:
        return f"{self.prefix}/jobs/+/state"

    def presence(self, runner: str) -> str:
        return f"{self.prefix}/runners/{segment(runner, 'runner name')}/presence"

    def all_presence(self) -> str:
        return f"{self.prefix}/runners/+/presence"

    def dispatch(self, runner: str, job: str) -> str:
        return f"{self.prefix}/runners/{segment(runner, 'runner name')}/dispatch/{segment(job, 'job id')}"

    def dispatch_all(self, runner: str) -> str:
        return f"{self.prefix}/runners/{segment(runner, 'runner name')}/dispatch/+"

    def job_of(self, topic: str) -> str | None:
        """The job id in an events/state topic, or None."""
        parts = topic[len(self.prefix) + 1 :].split("/") if topic.startswith(self.prefix + "/") else []
        return parts[1] if len(parts) == 3 and parts[0] == "jobs" else None
