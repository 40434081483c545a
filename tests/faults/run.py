"""Run the fault-injection schedule from the command line.

    .venv/bin/python -m tests.faults.run --jobs 200 --seed 1
    .venv/bin/python -m tests.faults.run --jobs 200 --seed 1 --governor   # caps + a token budget on
    .venv/bin/python -m tests.faults.run --jobs 200 --seed 1 --cluster    # NATS node kills, partitions (root)

Prints every invariant violation with its seed and schedule step, then a summary; exits 1 if
any invariant was violated. Re-run with the same --seed to replay the same schedule.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.faults.harness import run_schedule


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.faults.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--width", type=int, default=6, help="jobs run at once (on distinct sessions)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder for inspection")
    parser.add_argument(
        "--governor",
        action="store_true",
        help="MAM_MAX_RUNNING_JOBS and MAM_TOKEN_BUDGET on: also check peak running <= cap and no leaked slot or "
        "reservation (tests/faults/governor.py)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="a 3-node NATS cluster and the two hosts in network namespaces: also kill -9 NATS nodes and cut the "
        "remote host off for longer than the liveness window (tests/faults/cluster.py; needs root and ip netns)",
    )
    args = parser.parse_args(argv)
    if args.cluster:
        from tests.faults.cluster import unavailable

        why = unavailable()
        if why:
            print(f"--cluster cannot run here: {why}", file=sys.stderr)
            return 2
    root = Path(tempfile.mkdtemp(prefix=f"mam-faults-{args.seed}-"))
    report = run_schedule(
        root, seed=args.seed, jobs=args.jobs, width=args.width, governor=args.governor, cluster=args.cluster
    )
    for line in report.violations:
        print("VIOLATION", line)
    print(report.summary())
    if not args.keep:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
