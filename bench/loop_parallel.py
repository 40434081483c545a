"""Review loop: one round with 1 reviewer against one round with 3, reviewers working in parallel.

Usage: python bench/loop_parallel.py [--venv .venv] [--runs 3] [--review-s 2] [--json]

Everything runs in a throwaway workspace (a git repo) under the OS temp dir, with its own HOME,
a private tmux server and the workspace's embedded broker, all stopped at the end. Each
reviewer is a demo agent whose review takes --review-s seconds (behaviour `slow`). A round
is timed from the loop log: the first `snapshot` event to the `passed` event (which follows
the post-review snapshot). Target: the 3-reviewer round takes <= 1.5x the 1-reviewer round.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO))  # for `bench._support`
TARGET_RATIO = 1.5

from bench import _support as support  # noqa: E402


def run(
    argv: list[str], env: dict[str, str], cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(
            f"loop_parallel: {' '.join(argv[:4])} exited {proc.returncode}:\n{proc.stderr.strip()[-2000:]}"
        )
    return proc


def setup(root: Path, mam: str, review_s: float) -> dict[str, str]:
    ws, home = root / "ws", root / "home"
    ws.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAM_", "MQTT_", "TMUX"))}
    env.update(
        HOME=str(home),
        SHELL="/bin/sh",
        MAM_WORKSPACE=str(ws),
        MAM_TMUX_SERVER=f"mam-bench-{uuid.uuid4().hex[:8]}",
        MAM_POLL_S="0.05",
        PATH=f"{Path(mam).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.name", "bench"],
        ["config", "user.email", "bench@mam.invalid"],
    ):
        run(["git", *args], env, cwd=ws)
    (ws / ".gitignore").write_text(".mam/\n.agents/\n")
    (ws / "code.txt").write_text("the code under review\n")
    run(["git", "add", "-A"], env, cwd=ws)
    run(["git", "commit", "-q", "-m", "initial"], env, cwd=ws)
    run([mam, "broker", "start"], env)
    run([mam, "session", "create", "--agent", "demo", "--role", "developer", "--session", "creator"], env)
    for n in (1, 2, 3):
        run(
            [mam, "session", "create", "--agent", "demo", "--role", "reviewer", "--session", f"rev-{n}"],
            {**env, "MAM_DEMO_BEHAVIOUR": "slow", "MAM_DEMO_SLEEP_S": str(review_s)},
        )
    return env


def round_seconds(mam: str, env: dict[str, str], reviewers: str) -> float:
    proc = subprocess.run(
        [
            mam,
            "loop",
            "--json",
            "--quiet",
            "--creator",
            "creator",
            "--reviewer",
            reviewers,
            "--review-only",
            "--max-loop",
            "1",
            "--task",
            "Review the code.",
            "--heartbeat",
            "1",
            "--start-deadline",
            "30",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"loop_parallel: the loop exited {proc.returncode}:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
        )
    log = [json.loads(line) for line in Path(json.loads(proc.stdout)["log"]).read_text().splitlines()]
    first = next(e["ts"] for e in log if e["event"] == "snapshot")
    passed = next(e["ts"] for e in log if e["event"] == "passed")
    return float(passed - first)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--venv",
        type=Path,
        default=REPO / ".venv",
        help="venv holding the mam console script (default: the repo's .venv)",
    )
    parser.add_argument("--runs", type=int, default=3, help="rounds of each kind (the median is reported)")
    parser.add_argument("--review-s", type=float, default=2.0, help="seconds each demo review takes")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    mam = str(args.venv / "bin" / "mam")
    if not Path(mam).exists() or shutil.which("tmux") is None:
        print(f"loop_parallel: needs {mam} and tmux", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="mam-bench-loop-"))
    env: dict[str, str] = {}
    try:
        env = setup(root, mam, args.review_s)
        one = [round_seconds(mam, env, "rev-1") for _ in range(args.runs)]
        three = [round_seconds(mam, env, "rev-1,rev-2,rev-3") for _ in range(args.runs)]
    finally:
        if env:
            subprocess.run([mam, "broker", "stop"], env=env, capture_output=True, timeout=60)
            support.kill_tmux(env["MAM_TMUX_SERVER"])
        shutil.rmtree(root, ignore_errors=True)
    m1, m3 = statistics.median(one), statistics.median(three)
    result = {
        "runs": args.runs,
        "review_s": args.review_s,
        "one_reviewer_s": round(m1, 2),
        "three_reviewers_s": round(m3, 2),
        "ratio": round(m3 / m1, 2),
        "target_ratio": TARGET_RATIO,
        "ok": m3 / m1 <= TARGET_RATIO,
        "one_reviewer_runs_s": [round(x, 2) for x in one],
        "three_reviewers_runs_s": [round(x, 2) for x in three],
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"round with 1 reviewer:  {m1:.2f} s (median of {args.runs})")
        print(f"round with 3 reviewers: {m3:.2f} s (median of {args.runs})")
        print(f"ratio: {m3 / m1:.2f}x (target <= {TARGET_RATIO}x): {'ok' if result['ok'] else 'MISSED'}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
