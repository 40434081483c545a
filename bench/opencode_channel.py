"""A job's brief to the real opencode through its own server (the channel) against the paste.

Usage: python bench/opencode_channel.py [--jobs 100] [--broker mosquitto|amqtt] [--json]

Set-up (not timed): the pinned opencode (tests/real/clis.py; `python3 -m tests.real.install_clis`
installs it) with a temporary HOME, the scripted Chat Completions server of tests/real on loopback
(it asks opencode to run the footer's `started`, `progress` and `completed`), a private tmux server
and broker, and two opencode sessions: `chan` (its brief through the channel) and `paste` (its
channel file removed, so mam pastes as it does for any CLI without one).

Timed, after one untimed warm-up job each: `--jobs` delegations per session, the two sessions side
by side (one thread each, so both see the same machine load), each a fresh `mam job delegate
--json` process. Per job, from its audit
log: `inject` = claim -> injected (the delivery itself), `round trip` = claim -> `started` applied
(delivered, the model asked, opencode ran `mam event started`, the wrapper took it). Per job
afterwards, the brief's unique tag is counted in the user messages of opencode's own store
(opencode.db): 0 is a lost delivery, 2 or more a doubled one; the job must also complete.

Prints medians and p90 per way and the lost / doubled / not-completed counts. Cleans up what it
started (the sessions, tmux through its own socket, the broker and model server by handle, the
temporary folder). Exits 1 if any delivery was lost or doubled or a job did not complete.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench import _support as support  # noqa: E402

WAYS = ("chan", "paste")


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100, help="jobs per way (default 100)")
    parser.add_argument("--broker", choices=("mosquitto", "amqtt"), default="mosquitto")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.jobs <= 0:
        parser.error("--jobs must be positive")
    return args


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def delegate(session: str, i: int, env: dict[str, str], ws: Any) -> dict[str, Any]:
    """One `mam job delegate --json` with a tagged brief: its tag, state, way in and timings (audit log)."""
    from mam.jobs.record import read_audit

    tag = f"BRIEF-{uuid.uuid4().hex[:12]}"
    run = subprocess.run(
        [str(support.VENV_BIN / "mam"), "job", "delegate", "--target", f"tmux:{session}", "--brief"]
        + [f"Bench job {i}, say hello. {tag}", "--json", "--timeout", "300", "--start-deadline", "150"]
        + ["--heartbeat", "30"],
        env=env,
        cwd=ws.root,
        capture_output=True,
        text=True,
        timeout=400,
    )
    record = json.loads(run.stdout) if run.stdout.strip().startswith("{") else {}
    out: dict[str, Any] = {"tag": tag, "state": record.get("state"), "via": None, "inject": None, "round_trip": None}
    if record.get("id"):
        at: dict[str, float] = {}
        for line in read_audit(ws, record["id"]):
            if line["kind"] == "injected":
                out["via"] = line.get("via")
                at.setdefault("injected", line["ts_ms"])
            elif line["kind"] == "input":
                inp = line["input"]
                name = inp.get("type") if inp["input"] == "event" else inp["input"]
                at.setdefault(str(name), inp["at"])
        if {"claim", "injected"} <= at.keys():
            out["inject"] = at["injected"] - at["claim"]
        if {"claim", "started"} <= at.keys():
            out["round_trip"] = at["started"] - at["claim"]
    return out


def session_row(ws: Any, session: str) -> Any:
    from mam.store.registry import Registry

    registry = Registry(ws)
    try:
        row = registry.find_session(session)
    finally:
        registry.close()
    assert row is not None
    return row


def one_job(session: str, i: int, env: dict[str, str], ws: Any, db: Path) -> dict[str, Any]:
    from mam.agents import get_adapter
    from tests.real import _opencode_home as oc

    out = delegate(session, i, env, ws)
    row = session_row(ws, session)
    conversation = row.conversation_id or get_adapter("opencode").discover(cwd=row.cwd, since=0.0, env=row.agent_env)
    out["count"] = sum(out["tag"] in t for t in oc.user_texts(db, conversation or ""))
    return out


def side_by_side(one: Callable[[str, int], dict[str, Any]], jobs: int, quiet: bool) -> tuple[dict[str, Any], float]:
    """Each way in its own thread: an untimed warm-up job, then `jobs` jobs; the results and the wall time."""
    results: dict[str, list[dict[str, Any]]] = {w: [] for w in WAYS}
    started = time.perf_counter()

    def run(way: str) -> None:
        warm = one(way, 0)  # untimed: the session's first turn, caches
        if warm["count"] != 1 or warm["state"] != "completed":
            results[way].append(warm)  # still counted as lost, doubled or not completed
        for i in range(1, jobs + 1):
            results[way].append(one(way, i))
            if not quiet:
                r = results[way][-1]
                print(
                    f"{way:5} {i:3}: {r['state']} via {r['via']} inject {r['inject']} ms "
                    f"round trip {r['round_trip']} ms, told {r['count']}x",
                    flush=True,
                )

    threads = [threading.Thread(target=run, args=(w,)) for w in WAYS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.perf_counter() - started


def report(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace, wall: float) -> int:
    """Print the summary; 1 if any delivery was lost or doubled or a job did not complete."""
    summary: dict[str, Any] = {"machine": support.machine(), "jobs_per_way": args.jobs, "wall_s": round(wall, 1)}
    bad = 0
    for way in WAYS:
        rows = results[way]
        trips = [float(r["round_trip"]) for r in rows if r["round_trip"] is not None]
        injects = [float(r["inject"]) for r in rows if r["inject"] is not None]
        lost = sum(r["count"] == 0 for r in rows)
        doubled = sum(r["count"] > 1 for r in rows)
        unfinished = sum(r["state"] != "completed" for r in rows)
        bad += lost + doubled + unfinished
        summary[way] = {
            "jobs": len(rows),
            "via": sorted({str(r["via"]) for r in rows}),
            "lost": lost,
            "doubled": doubled,
            "not_completed": unfinished,
            "inject_ms_median": round(support.median(injects), 1) if injects else None,
            "round_trip_ms_median": round(support.median(trips), 1) if trips else None,
            "round_trip_ms_p90": round(_p90(trips), 1) if trips else None,
        }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for way in WAYS:
            s = summary[way]
            print(
                f"{way}: {s['jobs']} jobs via {s['via']}: lost {s['lost']}, doubled {s['doubled']}, "
                f"not completed {s['not_completed']}; inject median {s['inject_ms_median']} ms; round trip "
                f"median {s['round_trip_ms_median']} ms, p90 {s['round_trip_ms_p90']} ms"
            )
        print(f"wall {summary['wall_s']} s")
    return 1 if bad else 0


@dataclass
class Rig:
    env: dict[str, str]
    ws: Any  # mam.workspace.Workspace
    home: Path


@contextmanager
def rig(agent: str, broker_kind: str, configure: Callable[[Path, Any], dict[str, str]]) -> Iterator[Rig | None]:
    """The two sessions of a channel bench (`chan`, `paste`, each in a git folder of its own) of the pinned
    real `agent` (None when it is not installed) with a private HOME, the scripted model server of
    tests/real, a private tmux server and broker; `configure(home, model)` writes the CLI's config and
    returns its environment. Afterwards the sessions are stopped and everything is gone."""
    from mam.workspace import Workspace
    from tests.real.clis import BY_NAME, cache_dir
    from tests.real.openai_server import ScriptedModel

    cli = BY_NAME[agent]
    exe = cli.executable(cache_dir())
    if exe is None or not cli.ready(cache_dir()):
        print(f"{agent}_channel: error: {agent} {cli.version} is not in {cache_dir()}", file=sys.stderr)
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix=f"mam-bench-{agent}-chan-"))
    tmux_name = f"mam-bench-{uuid.uuid4().hex[:8]}"
    model = broker = None
    try:
        home, ws = root / "home", Workspace((root / "ws").resolve())
        for sub in ("", ".config", ".local/share", ".local/state", ".cache"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        ws.root.mkdir()
        model = ScriptedModel(log_path=str(root / "model.jsonl")).start()
        extra = configure(home, model)
        broker = (support.start_amqtt if broker_kind == "amqtt" else support.start_mosquitto)(root)
        env = support.clean_environ(
            root / "pycache",
            PATH=f"{exe.parent}{os.pathsep}{os.environ['PATH']}",
            MAM_WORKSPACE=str(ws.root),
            MAM_TMUX_SERVER=tmux_name,
            MQTT_BROKER=broker.host,
            MQTT_PORT=str(broker.port),
            HOME=str(home),
            TERM="xterm-256color",
            LANG="C.UTF-8",
            SHELL="/bin/bash",
            **extra,
        )
        for way in WAYS:
            folder = ws.root / f"{way}-repo"
            folder.mkdir()
            subprocess.run(["git", "init", "-q", str(folder)], check=True)
            support.run_mam(
                ["session", "create", "--agent", agent, "--role", "developer", "--session", way]
                + ["--cwd", str(folder), "--json"],
                env,
                ws.root,
                timeout=200,
            )
        yield Rig(env, ws, home)
        for way in WAYS:
            support.run_mam(["session", "stop", "--session", way], env, ws.root, timeout=120)
    finally:
        support.kill_tmux(tmux_name)
        if broker is not None:
            broker.stop()
        if model is not None:
            model.stop()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if not support.have_tmux("opencode_channel"):
        return 2
    from mam.agents import opencode_server
    from tests.real import _opencode_home as oc

    def configure(home: Path, model: Any) -> dict[str, str]:
        oc.write_config(home / ".config", base_url=model.base_url)
        xdg = {"CONFIG": ".config", "DATA": ".local/share", "STATE": ".local/state", "CACHE": ".cache"}
        return {**{f"XDG_{k}_HOME": str(home / v) for k, v in xdg.items()}, **oc.ENV}

    with rig("opencode", args.broker, configure) as r:
        if r is None:
            return 2
        (r.ws.session_dir("paste") / opencode_server.CHANNEL_FILE).unlink()
        db = oc.db_path(r.home / ".local" / "share")
        results, wall = side_by_side(lambda way, i: one_job(way, i, r.env, r.ws, db), args.jobs, args.json)
    return report(results, args, wall)


if __name__ == "__main__":
    raise SystemExit(main())
