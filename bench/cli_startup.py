"""CLI start-up: median wall time of `mam --help` against `python -c pass` in the same run.

Usage: python bench/cli_startup.py [--venv .venv] [--runs 21] [--json]

Both commands run through the venv's own files (the `mam` console script and the venv's
python), so the difference is what mam itself costs at start-up. Target: median < 250 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_MS = 250.0


def wall_times(argv: list[str], runs: int) -> list[float]:
    """Wall time in ms of each of `runs` runs of argv (plus one untimed warm-up run)."""
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--venv",
        type=Path,
        default=REPO / ".venv",
        help="venv holding the mam console script (default: the repo's .venv)",
    )
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)

    mam = args.venv / "bin" / "mam"
    python = args.venv / "bin" / "python"
    for path in (mam, python):
        if not path.exists():
            print(f"cli_startup: {path} not found (install mam into {args.venv} first)", file=sys.stderr)
            return 2

    baseline = statistics.median(wall_times([str(python), "-c", "pass"], args.runs))
    help_ms = statistics.median(wall_times([str(mam), "--help"], args.runs))
    result = {
        "runs": args.runs,
        "mam_help_median_ms": round(help_ms, 1),
        "python_pass_median_ms": round(baseline, 1),
        "ratio": round(help_ms / baseline, 2),
        "target_ms": TARGET_MS,
        "ok": help_ms < TARGET_MS,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"python -c pass : median {baseline:7.1f} ms over {args.runs} runs")
        print(f"mam --help     : median {help_ms:7.1f} ms over {args.runs} runs")
        print(
            f"ratio          : {help_ms / baseline:.2f}x   target: < {TARGET_MS:.0f} ms -> "
            f"{'ok' if result['ok'] else 'TOO SLOW'}"
        )
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
