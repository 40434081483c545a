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

import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench import _support as support  # noqa: E402
from bench.opencode_channel import _args, delegate, report, rig, session_row, side_by_side  # noqa: E402


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
    from tests.real import _codex_home as cx

    def configure(home: Path, model: Any) -> dict[str, str]:
        cx.write_config(home / ".codex", base_url=model.base_url)
        return {"CODEX_HOME": str(home / ".codex"), cx.KEY_VAR: "dummy-key-for-bench"}

    with rig("codex", args.broker, configure) as r:
        if r is None:
            return 2
        shutil.rmtree(codex_server.channel_dir(r.ws.session_dir("paste")))
        home = r.home / ".codex"
        results, wall = side_by_side(lambda way, i: one_job(way, i, r.env, r.ws, home), args.jobs, args.json)
    return report(results, args, wall)


if __name__ == "__main__":
    raise SystemExit(main())
