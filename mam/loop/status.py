"""What a loop did so far, read from its log `.mam/loops/<id>/loop.jsonl` (the MCP tool `loop_status`).

Read-only: it opens no registry and starts nothing; a loop still running is `running`, one
whose approval gate waits (`--approve`) is `needs_approval` with the reviewed identity, and one
whose gate was approved after its `mam loop` process went away is `approved`.
"""

from __future__ import annotations

import json
from typing import Any

from mam.errors import LoopNotFound
from mam.ids import is_name
from mam.loop.approval import NEEDS_APPROVAL, read_gate
from mam.loop.files import loop_folder
from mam.loop.model import LoopState
from mam.sessions.common import check_name
from mam.workspace import Workspace


def loop_status(ws: Workspace, loop_id: str) -> dict[str, Any]:
    """{id, state, exit_code, reason, rounds, reviews per round, final, promoted, reports, folder, log}."""
    check_name(loop_id, "loop id")
    folder = loop_folder(ws, loop_id)
    path = folder / "loop.jsonl"
    if not path.is_file():
        raise LoopNotFound(f"no loop {loop_id!r} in workspace {ws.root}", loop_id=loop_id)
    entries: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                entries.append(json.loads(line))
            except ValueError:
                continue  # a torn last line while the loop writes
    start: dict[str, Any] = next((e for e in entries if e.get("event") == "start"), {})
    end: dict[str, Any] | None = next((e for e in entries if e.get("event") == "end"), None)
    rounds: dict[int, list[dict[str, Any]]] = {}
    for e in entries:
        if e.get("event") == "verdict":
            rounds.setdefault(int(e["round"]), []).append(
                {k: e.get(k) for k in ("reviewer", "verdict", "reason", "wellformed", "report", "job")}
            )
    history: list[dict[str, Any]] = [{"round": n, "reviews": rounds[n]} for n in sorted(rounds)]
    promoted: list[str] = list(end.get("promoted") or []) if end else []
    gate = read_gate(ws, loop_id)
    state = end["state"] if end else LoopState.RUNNING
    if end is None and gate is not None and gate.get("state") in (NEEDS_APPROVAL, LoopState.APPROVED.value):
        state = gate["state"]
    return {
        "id": loop_id,
        "state": state,
        "approval": _approval(gate),
        "exit_code": end["exit_code"] if end else None,
        "reason": end["reason"] if end else "",
        "task": start.get("task", ""),
        "started": start.get("ts"),
        "creator": start.get("creator"),
        "reviewers": start.get("reviewers", []),
        "rounds": len(history),
        "history": history,
        "final": history[-1]["reviews"] if history else [],
        "promoted": promoted,
        "reports": [r["report"] for r in (history[-1]["reviews"] if history else []) if r.get("report")],
        "folder": str(folder),
        "log": str(path),
        "last_event": entries[-1].get("event") if entries else None,
    }


def _approval(gate: dict[str, Any] | None) -> dict[str, Any] | None:
    """The gate as status shows it: state, round, identity, branches, reports, and the decision."""
    if gate is None:
        return None
    keys = ("state", "round", "identity", "branch", "base_branch", "reports", "since", "decision")
    return {k: gate.get(k) for k in keys}


def all_loops(ws: Workspace) -> list[dict[str, Any]]:
    """`loop_status` of every loop of the workspace, oldest first (none: an empty list; creates nothing)."""
    folder = ws.state / "loops"
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        if path.is_dir() and is_name(path.name) and (path / "loop.jsonl").is_file():
            found.append(loop_status(ws, path.name))
    return sorted(found, key=lambda r: (r.get("started") or 0, r["id"]))
