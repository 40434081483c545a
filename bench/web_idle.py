"""Idle CPU of the workspace's node serving `mam web`, with its page open in a browser and 10 demo sessions.

Usage: python bench/web_idle.py [--sessions 10] [--seconds 30] [--broker mosquitto|amqtt] [--foreground] [--json]

It creates the demo sessions in a temporary workspace (a private tmux server, a private broker),
runs `mam web --port 0` (the workspace's node, started for it, serves the page; --foreground: the
command serves it itself, as before the node), opens the printed link in Debian's Chromium
(/usr/bin/chromium, headless, driven by Playwright), waits until the page shows every session and
lets it settle, then measures the serving process's CPU over the window (the node's: its monitor,
its socket and the page's threads): utime + stime of the process and of the children it waited
for (the `tmux list-panes` of each re-read), from /proc, so Linux only. The page's event stream
stays open the whole time. Target: at most 1 % of one core.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _support import clean_environ, kill_tmux, machine, start_amqtt, start_mosquitto, venv_python

from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS

MAM = str(Path(venv_python()).parent / "mam")
TARGET_PCT = 1.0
SETTLE_S = 3.0


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15])  # utime stime cutime cstime


def login_link(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    assert proc.stdout is not None
    deadline, buf = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            chunk = os.read(proc.stdout.fileno(), 4096).decode()
            buf += chunk
            for line in buf.splitlines():
                if "/login#code=" in line:
                    return line.strip()
            if not chunk:
                break  # it ended without printing the link
    raise RuntimeError(f"mam web printed no link: {buf[-500:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--broker", choices=("mosquitto", "amqtt"), default="mosquitto")
    parser.add_argument("--foreground", action="store_true", help="`mam web --foreground`: no node")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    root = Path(tempfile.mkdtemp(prefix="mam-web-idle-"))
    (root / "home").mkdir()
    (root / "ws").mkdir()
    broker = start_mosquitto(root) if args.broker == "mosquitto" else start_amqtt(root)
    agents = f"mam-web-a-{uuid.uuid4().hex[:6]}"
    env = clean_environ(**broker.env(), MAM_WORKSPACE=str(root / "ws"), MAM_TMUX_SERVER=agents, HOME=str(root / "home"))
    web = None
    try:
        for i in range(args.sessions):
            subprocess.run(
                [MAM, "session", "create", "--agent", "demo", "--role", "dev", "--session", f"s{i:02d}"],
                env=env,
                check=True,
                capture_output=True,
            )
        command = [MAM, "web", "--port", "0", *(["--foreground"] if args.foreground else [])]
        web = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        link = login_link(web)
        server = web.pid
        if not args.foreground:
            web.wait(timeout=60)
            status = subprocess.run([MAM, "node", "status", "--json"], env=env, capture_output=True, text=True)
            server = int(json.loads(status.stdout)["pid"])
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.goto(link)
                page.wait_for_function(
                    f"() => document.querySelectorAll('#sessions tbody tr').length === {args.sessions}",
                    timeout=60_000,
                )
                time.sleep(SETTLE_S)  # a measurement window, not a wait for something
                before = cpu_ticks(server)
                t0 = time.monotonic()
                time.sleep(args.seconds)
                elapsed = time.monotonic() - t0
                after = cpu_ticks(server)
                still_open = page.evaluate("document.querySelector('#offline').hidden")
            finally:
                browser.close()
        pct = 100.0 * (after - before) / os.sysconf("SC_CLK_TCK") / elapsed
    finally:
        if not args.foreground:
            subprocess.run([MAM, "node", "stop"], env=env, capture_output=True, timeout=60)
        elif web is not None:
            web.send_signal(signal.SIGINT)
            try:
                web.wait(timeout=20)
            except subprocess.TimeoutExpired:
                web.kill()
                web.wait()
        kill_tmux(agents)
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    result = {
        "sessions": args.sessions,
        "seconds": round(elapsed, 1),
        "broker": args.broker,
        "served_by": "mam web --foreground" if args.foreground else "node",
        "web_cpu_pct": round(pct, 3),
        "page_connected": bool(still_open),
        "target_pct": TARGET_PCT,
        "ok": pct <= TARGET_PCT and bool(still_open),
        "machine": machine(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{args.sessions} sessions, {elapsed:.0f} s idle with the page open, {args.broker}")
        print(f"  {result['served_by']} serving the page: {pct:.2f} % of a core (page connected: {still_open})")
        print(f"  target <= {TARGET_PCT:.0f} % -> {'met' if result['ok'] else 'MISSED'}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
