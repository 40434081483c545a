"""Debian's Chromium as the web view's tests and benches start it (headless, through Playwright)."""

from __future__ import annotations

CHROMIUM = "/usr/bin/chromium"
# As root, on a machine whose network is closed: no sandbox, and none of Chromium's own connections
# (without the background-networking flags it tries many at every start, each refused).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
