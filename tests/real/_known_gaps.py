"""Gaps in mam found by the real-program runs, each detected from mam's own code (not assumed),
so that a test held back by one is marked xfail (and not run: its outcome is known) only while
the gap is there, and runs as a normal test as soon as it is fixed.
"""

from __future__ import annotations

import types

from mam.agents import get_adapter


class _BlankPane:
    """A pane whose agent runs but has drawn nothing yet."""

    def pane(self, pane_id: str) -> object:
        return types.SimpleNamespace(dead=False, pid=None)

    def capture(self, pane_id: str, lines: int = 0) -> str:
        return ""


def opencode_ready_without_looking() -> bool:
    """wait_ready returns True at once for an adapter with no ready_marker and no dialog markers,
    never calling its own is_ready: opencode gets its brief pasted before its input box exists."""
    from mam.agents.ready import wait_ready

    return bool(wait_ready(_BlankPane(), "%0", get_adapter("opencode"), timeout=0.3))


def hermes_terminal_loses_pane_path() -> bool:
    """Hermes 0.19's `terminal` tool runs commands with the environment of a login-shell snapshot
    (`bash -l`), and a login profile (Debian's /etc/profile) resets PATH: unless mam's hermes
    launch options keep the pane's PATH there, the footer's bare `mam` exits 127. Checked by
    running such a login shell with the environment mam gives a hermes pane."""
    import os
    import subprocess
    import tempfile
    from pathlib import Path

    from mam.agents.base import LaunchContext

    with tempfile.TemporaryDirectory(prefix="mam-gap-") as tmp:
        home, keep = Path(tmp) / "home", Path(tmp) / "pane-bin"
        home.mkdir()
        keep.mkdir()
        (home / ".profile").write_text("PATH=/usr/bin:/bin\nexport PATH\n", encoding="utf-8")
        pane = {"HOME": str(home), "PATH": f"{keep}{os.pathsep}/usr/bin{os.pathsep}/bin"}
        ctx = LaunchContext(session="gap", cwd=tmp, state_dir=Path(tmp) / "state", env=pane)
        env = {**pane, **get_adapter("hermes").session_options(ctx).env}
        run = subprocess.run(
            ["bash", "-l", "-c", 'printf %s "$PATH"'], env=env, cwd=tmp, capture_output=True, text=True, timeout=60
        )
        return str(keep) not in run.stdout.split(os.pathsep)
