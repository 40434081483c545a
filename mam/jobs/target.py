"""Delegation targets: `tmux:NAME`, `herdr:NAME`, `remote:RUNNER/NAME`, or a bare session NAME."""

from __future__ import annotations

from dataclasses import dataclass

from mam.errors import UsageError
from mam.ids import check_name


@dataclass(frozen=True)
class Target:
    text: str
    session: str
    backend: str | None = None  # tmux / herdr; None: whatever the session uses
    runner: str | None = None  # set for remote targets

    @property
    def remote(self) -> bool:
        return self.runner is not None


def parse_target(text: str) -> Target:
    kind, sep, rest = text.partition(":")
    if not sep:
        return Target(text, check_name(text))
    if kind in ("tmux", "herdr"):
        return Target(text, check_name(rest), backend=kind)
    if kind == "remote":
        runner, slash, session = rest.partition("/")
        if not slash:
            raise UsageError(f"remote target {text!r} must be remote:RUNNER/SESSION")
        return Target(text, check_name(session), runner=check_name(runner, "runner name"))
    raise UsageError(f"unknown target kind {kind!r} in {text!r}: use tmux:NAME, herdr:NAME or remote:RUNNER/NAME")
