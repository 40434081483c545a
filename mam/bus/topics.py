"""Every MQTT topic mam uses, built in one place.

    <prefix>/jobs/<job>/events                       signed job events (QoS 1)
    <prefix>/jobs/<job>/state                        the job's latest state (retained, QoS 1)
    <runners prefix>/runners/<runner>/presence       a runner's presence (retained; last will says offline)
    <runners prefix>/runners/<runner>/dispatch/<job> a remote dispatch (retained until the runner takes it)
    <runners prefix>/runners/<runner>/probe/<tag>    a starting runner's echo to itself (name check)
    <prefix>/board/<board>/<key>                     a board key's latest write (retained, signed)

Both prefixes are MAM_TOPIC_PREFIX when it is set. When it is not, a workspace's jobs live
under `mam/<workspace slug>` and runners under `mam`, so an origin and a runner on another
host meet with no shared setting; the dispatch tells the runner the job's prefix.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mam.errors import UsageError

if TYPE_CHECKING:  # annotations only: `mam event` builds a topic without importing the settings
    from mam.settings import Settings
    from mam.workspace import Workspace

DEFAULT_ROOT = "mam"
_SEGMENT = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")


def _configured_prefix(settings: Settings) -> str:
    configured = settings.topic_prefix.strip().strip("/")
    if any(c in configured for c in "#+\0"):
        raise UsageError(f"MAM_TOPIC_PREFIX {configured!r} must not hold MQTT wildcards")
    return configured


def prefix_for(settings: Settings, ws: Workspace) -> str:
    """Where a workspace's jobs live: MAM_TOPIC_PREFIX, else `mam/<workspace slug>`."""
    return _configured_prefix(settings) or f"{DEFAULT_ROOT}/{ws.slug}"


def runners_prefix_for(settings: Settings) -> str:
    """Where runners announce themselves and take dispatches: MAM_TOPIC_PREFIX, else `mam`."""
    return _configured_prefix(settings) or DEFAULT_ROOT


def check_prefix(prefix: str) -> str:
    """A job prefix received from another host (a dispatch): non-empty, no wildcards, no empty levels."""
    if (
        not prefix
        or any(c in prefix for c in "#+\0")
        or "//" in prefix
        or prefix != prefix.strip("/ ")
        or len(prefix) > 256
    ):
        raise UsageError(f"invalid topic prefix {prefix!r}")
    return prefix


def segment(value: str, what: str = "topic segment") -> str:
    if not _SEGMENT.match(value):
        raise UsageError(f"invalid {what} {value!r}: letters, digits, '.', '_' or '-' only")
    return value


class Topics:
    def __init__(self, prefix: str, runners_prefix: str | None = None) -> None:
        self.prefix = prefix
        self.runners_prefix = runners_prefix or prefix

    @classmethod
    def of(cls, settings: Settings, ws: Workspace) -> Topics:
        return cls(prefix_for(settings, ws), runners_prefix_for(settings))

    def events(self, job: str) -> str:
        return f"{self.prefix}/jobs/{segment(job, 'job id')}/events"

    def state(self, job: str) -> str:
        return f"{self.prefix}/jobs/{segment(job, 'job id')}/state"

    def all_events(self) -> str:
        return f"{self.prefix}/jobs/+/events"

    def all_states(self) -> str:
        return f"{self.prefix}/jobs/+/state"

    def presence(self, runner: str) -> str:
        return f"{self.runners_prefix}/runners/{segment(runner, 'runner name')}/presence"

    def all_presence(self) -> str:
        return f"{self.runners_prefix}/runners/+/presence"

    def dispatch(self, runner: str, job: str) -> str:
        return f"{self.runners_prefix}/runners/{segment(runner, 'runner name')}/dispatch/{segment(job, 'job id')}"

    def probe(self, runner: str, tag: str) -> str:
        """A starting runner's own echo, to know the retained presence under its name has arrived."""
        return f"{self.runners_prefix}/runners/{segment(runner, 'runner name')}/probe/{segment(tag, 'probe tag')}"

    def dispatch_all(self, runner: str) -> str:
        return f"{self.runners_prefix}/runners/{segment(runner, 'runner name')}/dispatch/+"

    def board(self, board: str, key: str) -> str:
        """Where a board key's writes are published; `key` is checked by mam.board.keys (it may hold '/')."""
        return f"{self.prefix}/board/{segment(board, 'board name')}/{key}"

    def all_board(self) -> str:
        return f"{self.prefix}/board/#"

    def job_of(self, topic: str) -> str | None:
        """The job id in an events/state topic, or None."""
        parts = topic[len(self.prefix) + 1 :].split("/") if topic.startswith(self.prefix + "/") else []
        return parts[1] if len(parts) == 3 and parts[0] == "jobs" else None
