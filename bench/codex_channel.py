"""A job's brief to the real codex through its own app-server (the channel) against the paste.

Usage: python bench/codex_channel.py [--jobs 100] [--broker mosquitto|amqtt] [--json]

Set-up (not timed): the pinned codex (tests/real/clis.py; `python3 -m tests.real.install_clis`
installs it) with a temporary HOME and CODEX_HOME, the scripted Responses API server of tests/real
on loopback (it asks codex to run the footer's `started`, `progress` and `completed`), a private
tmux server and broker, and two codex sessions: `chan` (its brief through the app-server mam
started for it) and `paste` (its channel folder removed, so mam pastes as it does for any CLI
without one; its app-server runs on, unused).

Timed, as in bench/opencode_channel.py (whose runner and summary this uses): after one untimed
warm-up job each, `--jobs` delegations per session, the two sessions side by side, each a fresh
`mam job delegate --json` process; per job `inject` = claim -> injected, `round trip` = claim ->
`started` applied. Per job afterwards, the brief's unique tag is counted in the user messages of
the session's rollout (codex's own record): 0 is a lost delivery, 2 or more a doubled one; the job
must also complete.

Prints medians and p90 per way and the lost / doubled / not-completed counts. Cleans up what it
started (the sessions, tmux through its own socket, the broker and model server by handle, the
temporary folder). Exits 1 if any delivery was lost or doubled or a job did not complete.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench import _support as support  # noqa: E402
from bench.opencode_channel import WAYS, _args, delegate, report, session_row, side_by_side  # noqa: E402


def one_job(session: str, i: int, env: dict[str, str], ws: Any, codex_home: Path) -> dict[str, Any]:
    from mam.agents import get_adapter
    from tests.real import _codex_home as cx

    out = delegate(session, i, env, ws)
    row = session_row(ws, session)
    conversation = row.conversation_id or get_adapter("codex").discover(cwd=row.cwd, since=0.0, env=row.agent_env)
    rollout = cx.rollout_of(codex_home, conversation or "-")
    out["count"] = 0 if rollout is None else cx.user_turns_holding(rollout, out["tag"])
    return out


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if not support.have_tmux("codex_channel"):
        return 2
    from mam.agents import codex_server
    from mam.workspace import Workspace
    from tests.real import _codex_home as cx
    from tests.real.clis import BY_NAME, cache_dir
    from tests.real.openai_server import ScriptedModel

    cli = BY_NAME["codex"]
    exe = cli.executable(cache_dir())
    if exe is None or not cli.ready(cache_dir()):
        print(f"codex_channel: error: codex {cli.version} is not in {cache_dir()}", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="mam-bench-cxchan-"))
    tmux_name = f"mam-bench-{uuid.uuid4().hex[:8]}"
    model = broker = None
    try:
        home, ws = root / "home", Workspace((root / "ws").resolve())
        for sub in ("", ".config", ".local/share", ".local/state", ".cache"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        ws.root.mkdir()
        model = ScriptedModel(log_path=str(root / "model.jsonl")).start()
        codex_home = home / ".codex"
        cx.write_config(codex_home, base_url=model.base_url)
        broker = (support.start_amqtt if args.broker == "amqtt" else support.start_mosquitto)(root)
        env = support.clean_environ(
            root / "pycache",
            PATH=f"{exe.parent}{os.pathsep}{os.environ['PATH']}",
            MAM_WORKSPACE=str(ws.root),
            MAM_TMUX_SERVER=tmux_name,
            MQTT_BROKER=broker.host,
            MQTT_PORT=str(broker.port),
            HOME=str(home),
            CODEX_HOME=str(codex_home),
            TERM="xterm-256color",
            LANG="C.UTF-8",
            SHELL="/bin/bash",
            **{cx.KEY_VAR: "dummy-key-for-bench"},
        )
        for way in WAYS:
            folder = ws.root / f"{way}-repo"
            folder.mkdir()
            subprocess.run(["git", "init", "-q", str(folder)], check=True)
            support.run_mam(
                ["session", "create", "--agent", "codex", "--role", "developer", "--session", way]
                + ["--cwd", str(folder), "--json"],
                env,
                ws.root,
                timeout=200,
            )
        shutil.rmtree(codex_server.channel_dir(ws.session_dir("paste")))
        results, wall = side_by_side(lambda way, i: one_job(way, i, env, ws, codex_home), args.jobs, args.json)
        for way in WAYS:
            support.run_mam(["session", "stop", "--session", way], env, ws.root, timeout=120)
    finally:
        support.kill_tmux(tmux_name)
        if broker is not None:
            broker.stop()
        if model is not None:
            model.stop()
        shutil.rmtree(root, ignore_errors=True)
    return report(results, args, wall)


if __name__ == "__main__":
    raise SystemExit(main())
