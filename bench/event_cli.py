"""One `mam event progress` as a fresh process against `python -c pass` and a minimal paho publish script.

Usage: python bench/event_cli.py [--runs 21] [--venv .venv] [--node-only] [--no-bytecode-cache] [--json]

Set-up (not timed): a private Mosquitto on a free loopback port (started and stopped by this
script), a temporary workspace, and three jobs registered through `Ledger.register` in the running
state, whose registry this script keeps open for the whole run, as the wrapper of a delegated
job does while the agent reports. For the first and third jobs this script also listens for the
job's `events:<id>` pokes (mam.util.pokes) as that wrapper does, and counts the first one's wake-ups.
For the `node` case, a `mam node` of the workspace runs (started and stopped by this script).

Timed, interleaved, --runs times each (after untimed warm-up runs that also fill the bytecode cache):
  node      `<venv>/bin/mam event progress --job ID3 --message m` served by the workspace's node (the
            usual case): the thin client hands its argv, environment and streams to the node, which
            runs the command (the emitter: store, sign, poke the wrapper), and exits with its code.
            Its CPU is the client process's own; the node's share is in bench/node_profile.py.
  mam       the same command with no node (MAM_NODE=0 or none running), a wrapper listening: start,
            read the job record, store the event (allocating its seq) under the per-job lock, sign
            it, poke the wrapper's FIFO, exit.
  fallback  the same for the second job, whose wrapper does not listen (it died): as above, then
            read the settings, import paho, connect, publish QoS 1, wait for the broker's ack, exit.
  baseline  `<venv>/bin/python paho_once.py`: import paho, connect, publish one QoS 1 message
            of the same size, wait for the ack, exit.
  floor     `<venv>/bin/python -c pass`: the interpreter's own start-up.
When `<venv>/bin/mam` starts its Python with flags (deploy/install.sh adds -S), also:
  node_site `<venv>/bin/python <venv>/bin/mam event progress ...` (the node's job): the same client with
            Python's `site` step, as the script ran before install.sh added -S;
  floor_flags `<venv>/bin/python -S -c pass` (the script's flags).
--node-only times only the node's cases and the floors (many runs in little time: an A/B of -S).

Children cache their bytecode in a temporary PYTHONPYCACHEPREFIX even if this environment sets
PYTHONDONTWRITEBYTECODE (an installed mam has its .pyc files; `--no-bytecode-cache` measures
without). Prints the median wall and CPU time of each, mam/floor and mam/baseline (targets: the usual
command, `node`, at most 40 ms of wall and CPU, i.e. close to the floor), and fallback/baseline (<= 1.5x). Exits
non-zero only on an error (also when a wake-up did not arrive or an event is missing from the store).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # for `bench._support`; mam itself comes from the venv

from bench import _support as support  # noqa: E402

TARGET = 1.5  # fallback / baseline
TARGET_MS = 40.0  # mam (a wrapper listening), wall and CPU

PAHO_ONCE = '''\
"""Connect, publish one QoS 1 message, wait for the broker's ack, exit."""
import sys

import paho.mqtt.client as paho

host, port, topic, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
client = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv311)
client.connect(host, port)
client.loop_start()
info = client.publish(topic, b"x" * size, qos=1)
info.wait_for_publish(5)
client.disconnect()
client.loop_stop()
sys.exit(0 if info.is_published() else 1)
'''


def timed(argv: list[str], env: dict[str, str], cwd: Path, expect: str = "") -> float:
    """Wall ms of one run of argv; raises RuntimeError if it fails or `expect` is not in its output."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = proc.communicate(timeout=60)
    wall = (time.perf_counter() - start) * 1000
    if proc.returncode != 0 or expect not in out.decode(errors="replace"):
        raise RuntimeError(
            f"{' '.join(argv[:4])} ... exited {proc.returncode}: {err.decode(errors='replace').strip()[-500:]}"
        )
    return wall


def children_cpu_ms() -> float:
    """CPU time of the reaped children so far (the difference around one run is that run's CPU)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (ru.ru_utime + ru.ru_stime) * 1000


def imports(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, float]:
    """(modules imported, ms of import time) of one run of argv under `python -X importtime`."""
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )
    rows = [line.split("|") for line in proc.stderr.splitlines() if line.startswith("import time:")]
    rows = [r for r in rows if len(r) == 3 and r[1].strip().isdigit()]
    top = sum(int(r[1]) for r in rows if not r[2].startswith("  "))  # cumulative us of the top-level imports
    return len(rows), top / 1000


def script_flags(script: Path) -> list[str]:
    """The interpreter flags on the first line of `script` (`#!/venv/bin/python -S` -> ["-S"])."""
    with open(script, "rb") as f:
        first = f.readline().decode(errors="replace")
    return first[2:].split()[1:] if first.startswith("#!") else []


def register_job(ws: Any, prefix: str) -> tuple[Any, str]:
    """A running job in `ws`, as a wrapper would have it after `started`; returns (open registry, job id)."""
    from mam.jobs.ledger import Ledger, new_job_id, new_owner
    from mam.jobs.model import Job, JobState
    from mam.jobs.record import now_ms
    from mam.store.registry import Registry

    registry = Registry(ws)
    now = now_ms()
    job = Job(
        id=new_job_id(),
        session="bench",
        nonce="0" * 16,
        created_ms=now,
        start_deadline_ms=600_000,
        heartbeat_ms=600_000,
        heartbeat_k=4,
        budget_ms=3_600_000,
        state=JobState.RUNNING,
        claimed_ms=now,
        delivered_ms=now,
        started_ms=now,
    )
    Ledger.register(
        ws, registry, job, owner=new_owner(), meta={"target": "bench", "kind": "job", "topic_prefix": prefix}
    )
    return registry, job.id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"Target: mam <= {TARGET}x the baseline.",
    )
    parser.add_argument("--runs", type=int, default=21, help="timed runs of each command, interleaved (default 21)")
    parser.add_argument(
        "--venv",
        type=Path,
        default=support.REPO / ".venv",
        help="venv holding mam and paho (default: the repo's .venv)",
    )
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="let the children run without cached bytecode when PYTHONDONTWRITEBYTECODE is set (default: cache it in "
        "a temp dir)",
    )
    parser.add_argument(
        "--node-only",
        action="store_true",
        help="time only the client served by the node (and its `site` twin) and the floors",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.runs <= 0:
        parser.error("--runs must be positive")
    mam, python = args.venv / "bin" / "mam", args.venv / "bin" / "python"
    for path in (mam, python):
        if not path.exists():
            print(f"event_cli: error: {path} not found (install mam into {args.venv} first)", file=sys.stderr)
            return 2

    flags = script_flags(mam)

    from mam.store import jobs as jobs_table
    from mam.util import pokes
    from mam.workspace import Workspace

    root = Path(tempfile.mkdtemp(prefix="mam-bench-event-cli-"))
    broker = None
    registry = None
    node: subprocess.Popen[bytes] | None = None
    try:
        broker = support.start_mosquitto(root)
        ws = Workspace((root / "ws").resolve())
        ws.root.mkdir()
        prefix = "bench/event-cli"
        registry, job_id = register_job(ws, prefix)
        _registry2, orphan_id = register_job(ws, prefix)
        _registry2.close()
        _registry3, node_id = register_job(ws, prefix)
        _registry3.close()
        woken = threading.Semaphore(0)
        listener = pokes.Waiter(ws, [pokes.events_key(job_id)])
        listener.relay(woken.release)
        node_listener = pokes.Waiter(ws, [pokes.events_key(node_id)])  # the node job's wrapper, as it were
        pycache = None if args.no_bytecode_cache else root / "pycache"
        env = support.clean_environ(
            pycache, MAM_WORKSPACE=str(ws.root), MQTT_BROKER=broker.host, MQTT_PORT=str(broker.port)
        )
        script = root / "paho_once.py"
        script.write_text(PAHO_ONCE)
        node = subprocess.Popen(
            [str(mam), "node"], env=env, cwd=ws.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        node_env = {**env}
        env = {**env, "MAM_NODE": "0"}  # the other cases run in the command's own process
        sock = ws.run_dir / "node.sock"
        deadline = time.monotonic() + 30
        while not sock.exists():
            if time.monotonic() > deadline or node.poll() is not None:
                raise RuntimeError("mam node did not start")
            time.sleep(0.05)
        node_argv = [str(mam), "event", "progress", "--job", node_id, "--message", "m"]
        mam_argv = [str(mam), "event", "progress", "--job", job_id, "--message", "m"]
        orphan_argv = [str(mam), "event", "progress", "--job", orphan_id, "--message", "m"]

        timed(mam_argv, env, ws.root, expect="handed to the wrapper")  # warm-up; gives the size of a real event
        with registry.read() as conn:
            size = len(jobs_table.events_after(conn, job_id)[-1].raw.encode("utf-8"))
        base_argv = [str(python), str(script), broker.host, str(broker.port), f"{prefix}/baseline", str(size)]
        pass_argv = [str(python), "-c", "pass"]
        cases = {
            "node": (node_argv, "handed to the wrapper"),
            **({"node_site": ([str(python), *node_argv], "handed to the wrapper")} if flags else {}),
            **(
                {}
                if args.node_only
                else {
                    "mam": (mam_argv, "handed to the wrapper"),
                    "fallback": (orphan_argv, "published"),
                    "baseline": (base_argv, ""),
                }
            ),
            "floor": (pass_argv, ""),
            **({"floor_flags": ([str(python), *flags, "-c", "pass"], "")} if flags else {}),
        }
        envs = {name: node_env if name.startswith("node") else env for name in cases}
        for name, (argv_, expect) in cases.items():  # warm-up (fills the bytecode cache)
            timed(argv_, envs[name], ws.root, expect)

        wall: dict[str, list[float]] = {k: [] for k in cases}
        cpu: dict[str, list[float]] = {k: [] for k in cases}
        order = list(cases)
        for i in range(args.runs):
            for name in order if i % 2 == 0 else order[::-1]:
                argv_, expect = cases[name]
                before = children_cpu_ms()
                wall[name].append(timed(argv_, envs[name], ws.root, expect))
                cpu[name].append(children_cpu_ms() - before)
        with registry.read() as conn:
            stored = tuple(len(jobs_table.events_after(conn, j)) for j in (job_id, orphan_id, node_id))
        expected = (
            1 + (args.runs + 1 if "mam" in cases else 0),
            args.runs + 1 if "fallback" in cases else 0,
            (args.runs + 1) * (2 if flags else 1),
        )
        if stored != expected:
            raise RuntimeError(f"{stored} events stored, expected {expected}")
        mam_script = [str(python), *flags, str(mam), *mam_argv[1:]]
        counted = {"mam": imports(mam_script, env, ws.root), "floor": imports(pass_argv, env, ws.root)}
        most = args.runs + 3 if "mam" in cases else 1
        wakes = sum(1 for _ in range(most) if woken.acquire(timeout=5))
        if not wakes:  # (pokes that arrive together wake the waiter once)
            raise RuntimeError(f"no wake-up arrived, expected up to {most}")
        listener.close()
        node_listener.close()
        subprocess.run([str(mam), "node", "stop"], env=node_env, cwd=ws.root, capture_output=True, timeout=60)
        node.wait(60)
    except Exception as e:  # noqa: BLE001 - one line on stderr, exit 1
        print(f"event_cli: error: {e}", file=sys.stderr)
        return 1
    finally:
        if node is not None and node.poll() is None:
            node.terminate()
            node.wait(30)
        if registry is not None:
            registry.close()
        if broker is not None:
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)

    med = {k: support.median(v) for k, v in wall.items()}
    cmed = {k: support.median(v) for k, v in cpu.items()}
    result = {
        "runs": args.runs,
        "event_bytes": size,
        "median_ms": {k: round(v, 1) for k, v in med.items()},
        "cpu_median_ms": {k: round(v, 1) for k, v in cmed.items()},
        "node_over_floor": round(med["node"] / med["floor"], 2),
        "cpu_node_over_floor": round(cmed["node"] / cmed["floor"], 2),
        **(
            {}
            if args.node_only
            else {
                "mam_over_floor": round(med["mam"] / med["floor"], 2),
                "mam_over_baseline": round(med["mam"] / med["baseline"], 2),
                "fallback_over_baseline": round(med["fallback"] / med["baseline"], 2),
                "cpu_mam_over_floor": round(cmed["mam"] / cmed["floor"], 2),
                "cpu_mam_over_baseline": round(cmed["mam"] / cmed["baseline"], 2),
            }
        ),
        "imports": {k: {"modules": n, "ms": round(ms, 1)} for k, (n, ms) in counted.items()},
        "target_ms": TARGET_MS,
        "target_fallback": TARGET,
        "wall_min_ms": {k: round(min(v), 1) for k, v in wall.items()},
        "bytecode_cache": not args.no_bytecode_cache,
        "script_flags": flags,
        "machine": support.machine(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"median of {args.runs} interleaved runs each (event of {size} B, Mosquitto on "
        f"127.0.0.1:{broker.port if broker else '?'})"
    )
    print(f"  {'':44} {'wall ms':>8} {'min ms':>8} {'CPU ms':>8} {'/floor':>7} {'/paho':>7}")
    labels = {
        "node": f"mam event progress (served by the node){' ' + ' '.join(flags) if flags else ''}",
        "node_site": "  the same with `site` (python SCRIPT, no -S)",
        "mam": "mam event progress (no node, wrapper woken)",
        "fallback": "mam event progress (no wrapper: paho)",
        "baseline": "paho connect+publish QoS 1+ack",
        "floor": "python -c pass",
        "floor_flags": f"python {' '.join(flags)} -c pass",
    }
    for k, label in labels.items():
        if k not in wall:
            continue
        paho = f"{med[k] / med['baseline']:6.2f}x" if "baseline" in med else f"{'-':>7}"
        print(f"  {label:44} {med[k]:8.1f} {min(wall[k]):8.1f} {cmed[k]:8.1f} {med[k] / med['floor']:6.2f}x {paho}")
    (n_mam, ms_mam), (n_floor, ms_floor) = counted["mam"], counted["floor"]
    print(
        f"imports (python -X importtime, one run): mam event {n_mam} modules, {ms_mam:.1f} ms; "
        f"python -c pass {n_floor} modules, {ms_floor:.1f} ms"
    )
    met = med["node"] <= TARGET_MS and cmed["node"] <= TARGET_MS
    print(
        f"the usual command (served by the node): {med['node']:.1f} ms wall, {cmed['node']:.1f} ms CPU   target: "
        f"<= {TARGET_MS:g} ms -> {'met' if met else 'MISSED'}"
    )
    if "fallback" in med:
        ratio = med["fallback"] / med["baseline"]
        verdict = "met" if ratio <= TARGET else "MISSED"
        print(f"fallback/baseline: {ratio:.2f}x wall   target: <= {TARGET}x -> {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
