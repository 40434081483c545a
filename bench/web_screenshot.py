"""The picture in the README: the `mam web` page during `mam demo`, taken by headless Chromium.

Usage: python bench/web_screenshot.py [--out docs/web.png] [--size 1100x760]

It runs `mam demo` (its own temporary workspace, embedded broker and private tmux server), reads
where the demo put them from its first line, serves that workspace with `mam web --port 0 --foreground`
(no node outlives the demo's temporary workspace), opens
the printed link in Debian's Chromium (/usr/bin/chromium, driven by Playwright; never `playwright
install`) and waits until the page shows the demo's sessions and its slow job running with its progress;
then it saves the page as a PNG. The demo removes everything it started when it ends; the server
is stopped with Ctrl-C (SIGINT) through its own handle.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from _support import REPO, clean_environ, venv_python

from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS

MAM = str(Path(venv_python()).parent / "mam")
FIRST = re.compile(r"workspace (\S+); embedded broker on [\d.]+:\d+; tmux server (\S+)")
READY = """() => {
  const running = document.querySelector("#jobs tbody tr[data-state='running'] td.message");
  return !!(running && running.textContent.startsWith('working (')
    && document.querySelectorAll('#sessions tbody tr').length >= 3);
}"""


def read_line(proc: subprocess.Popen[str], needle: str, timeout: float) -> str:
    """The first line of `proc`'s stdout holding `needle`."""
    assert proc.stdout is not None
    deadline, buf = time.monotonic() + timeout, ""
    while time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            buf += os.read(proc.stdout.fileno(), 4096).decode()
            for line in buf.splitlines():
                if needle in line:
                    return line
    raise RuntimeError(f"no line with {needle!r} within {timeout} s: {buf[-500:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "web.png")
    parser.add_argument("--size", default="1100x760")
    args = parser.parse_args(argv)
    width, height = (int(x) for x in args.size.split("x"))
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # The demo takes about 5 s, its slow job about 2 s of it: the browser is up before it starts.
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": height})
        demo = subprocess.Popen([MAM, "demo"], env=clean_environ(), stdout=subprocess.PIPE, text=True)
        web = None
        try:
            match = FIRST.search(read_line(demo, "embedded broker on", 120))
            assert match is not None
            env = clean_environ(MAM_WORKSPACE=match.group(1).rstrip(";"), MAM_TMUX_SERVER=match.group(2))
            web = subprocess.Popen(
                [MAM, "web", "--port", "0", "--foreground"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            page.goto(read_line(web, "/login#code=", 60).strip())
            page.wait_for_function(READY, timeout=60_000)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out), full_page=False)
        finally:
            browser.close()
            if web is not None:
                web.send_signal(signal.SIGINT)
                try:
                    web.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    web.kill()
                    web.wait()
            demo.wait(timeout=300)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
