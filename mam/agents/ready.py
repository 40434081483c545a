"""When an agent's pane takes input: its ready screen held for the adapter's settle time, and no dialog or
permission prompt on it (mam never answers one). Session create and resume wait here; a job's delivery checks
here right before each keystroke."""

from __future__ import annotations

import time
from collections.abc import Callable

from mam.agents.base import AgentAdapter
from mam.errors import AgentDialog
from mam.panes.base import PaneBackend
from mam.util.poll import Timeout, wait_for

# Each look at the screen runs two tmux clients; a CLI's start takes 1-15 s: looking every 50 ms at first and then
# at a tenth of the time waited (at most 0.5 s) sees the ready screen at most about a tenth late and takes about a
# third of the looks over a 5 s start.
READY_BACKOFF = 0.1


def wait_ready(
    backend: PaneBackend,
    pane_id: str,
    adapter: AgentAdapter,
    *,
    timeout: float,
    loading: Callable[[], bool] = lambda: False,
) -> bool:
    """Wait until the agent shows its ready marker (its input box accepts a paste); False on timeout or exit.
    Raises AgentDialog as soon as a dialog or permission prompt shows: mam never answers one. While
    `loading()` says yes (a resumed CLI still loading its conversation back) the screen is not ready,
    whatever it shows, and the settle time counts only from when it says no."""
    if adapter.ready_marker is None and not (adapter.trust_markers or adapter.prompt_markers):
        return True

    ready_since: list[float] = []  # when the ready screen started holding (empty: not ready now)

    def ready() -> bool:
        info = backend.pane(pane_id)
        if info is None or info.dead:
            raise Timeout("the agent exited")
        screen = backend.capture(pane_id, lines=200)
        check_no_dialog(adapter, screen, pane_id)
        if not adapter.is_ready(screen) or loading():
            ready_since.clear()
            return False
        if not ready_since:
            ready_since.append(time.monotonic())
        return time.monotonic() - ready_since[0] >= adapter.ready_settle_s

    try:
        return wait_for(ready, timeout=timeout, interval=0.05, backoff=READY_BACKOFF)
    except Timeout:
        return False


def check_no_dialog(adapter: AgentAdapter, screen: str, pane_id: str) -> None:
    """Raise AgentDialog if the screen shows a dialog or a permission prompt (checked right before any keystroke)."""
    shown = adapter.dialog(screen)
    if shown is not None:
        what = "a trust dialog" if shown.kind == "trust" else "a dialog or permission prompt"
        raise AgentDialog(
            f"{adapter.name} shows {what} in pane {pane_id}: {shown.named!r}: a person must answer it",
            pane_id=pane_id,
            kind=shown.kind,
            title=shown.named,
        )
