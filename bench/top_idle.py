"""Idle CPU of `mam top` with 10 demo sessions, against a do-nothing Textual app in the same run.

Usage: python bench/top_idle.py [--sessions 10] [--seconds 30] [--broker mosquitto|amqtt] [--json]

Both programs run in panes of one private tmux server (a real terminal each), the same size, for
the same measured window after both have drawn. CPU is utime + stime (+ their waited children:
the `tmux list-panes` calls of each reload) from /proc, so Linux only. The baseline is a Textual
app showing one line of text: what Textual itself costs while idle. Target: `mam top` under 1 %
of one core.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _support import clean_environ, kill_tmux, machine, start_amqtt, start_mosquitto, venv_python

MAM = str(Path(venv_python()).parent / "mam")
TARGET_PCT = 1.0
BASELINE = (
    "from textual.app import App\n"
    "from textual.widgets import Static\n"
    "class Idle(App):\n"
    "    def compose(self):\n"
    "        yield Static('baseline: a Textual app doing nothing')\n"
    "Idle().run()\n"
)


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15])  # utime stime cutime cstime


def pane_pid(server: str, target: str) -> int:
    out = subprocess.run(
        ["tmux", "-L", server, "display", "-p", "-t", target, "#{pane_pid}"], capture_output=True, text=True
    )
    return int(out.stdout.strip())


def screen(server: str, target: str) -> str:
    return subprocess.run(
        ["tmux", "-L", server, "capture-pane", "-p", "-t", target], capture_output=True, text=True
    ).stdout


def wait_screen(server: str, target: str, needle: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if needle in screen(server, target):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{needle!r} never appeared in pane {target}: {screen(server, target)[-500:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--broker", choices=("mosquitto", "amqtt"), default="mosquitto")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="mam-top-idle-"))
    (root / "home").mkdir()
    broker = start_mosquitto(root) if args.broker == "mosquitto" else start_amqtt(root)
    agents, viewer = f"mam-top-a-{uuid.uuid4().hex[:6]}", f"mam-top-v-{uuid.uuid4().hex[:6]}"
    env = clean_environ(
        **broker.env(),
        MAM_WORKSPACE=str(root / "ws"),
        MAM_TMUX_SERVER=agents,
        HOME=str(root / "home"),
        TERM="xterm-256color",
    )
    (root / "ws").mkdir()
    (root / "baseline.py").write_text(BASELINE)
    try:
        for i in range(args.sessions):
            subprocess.run(
                [MAM, "session", "create", "--agent", "demo", "--role", "dev", "--session", f"s{i:02d}"],
                env=env,
                check=True,
                capture_output=True,
            )
        envs = [f"{k}={v}" for k, v in env.items() if k.startswith(("MQTT_", "MAM_", "HOME", "PATH", "TERM"))]
        subprocess.run(["tmux", "-L", viewer, "new-session", "-d", "-x", "160", "-y", "45", "-s", "v"], check=True)
        subprocess.run(["tmux", "-L", viewer, "new-window", "-d", "-t", "v:1"], check=True)
        top_cmd = shlex.join(["env", *envs, MAM, "top"])
        base_cmd = shlex.join(["env", *envs, str(venv_python()), str(root / "baseline.py")])
        subprocess.run(["tmux", "-L", viewer, "respawn-pane", "-k", "-t", "v:0", top_cmd], check=True)
        subprocess.run(["tmux", "-L", viewer, "respawn-pane", "-k", "-t", "v:1", base_cmd], check=True)
        wait_screen(viewer, "v:0", f"s{args.sessions - 1:02d}")
        wait_screen(viewer, "v:1", "baseline")
        time.sleep(3)  # let both settle after drawing
        pids = {"top": pane_pid(viewer, "v:0"), "baseline": pane_pid(viewer, "v:1")}
        before = {k: cpu_ticks(p) for k, p in pids.items()}
        t0 = time.monotonic()
        time.sleep(args.seconds)
        elapsed = time.monotonic() - t0
        after = {k: cpu_ticks(p) for k, p in pids.items()}
        hz = os.sysconf("SC_CLK_TCK")
        pct = {k: 100.0 * (after[k] - before[k]) / hz / elapsed for k in pids}
    finally:
        kill_tmux(viewer)
        kill_tmux(agents)
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    result = {
        "sessions": args.sessions,
        "seconds": round(elapsed, 1),
        "broker": args.broker,
        "top_cpu_pct": round(pct["top"], 3),
        "baseline_cpu_pct": round(pct["baseline"], 3),
        "ratio": round(pct["top"] / pct["baseline"], 2) if pct["baseline"] else None,
        "target_pct": TARGET_PCT,
        "ok": pct["top"] < TARGET_PCT,
        "machine": machine(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{args.sessions} sessions, {elapsed:.0f} s idle, {args.broker}")
        print(f"  baseline (idle Textual app): {pct['baseline']:.2f} % of a core")
        print(f"  mam top                    : {pct['top']:.2f} % of a core  (ratio {result['ratio']}x)")
        print(f"  target < {TARGET_PCT:.0f} % -> {'met' if result['ok'] else 'MISSED'}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
