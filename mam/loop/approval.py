"""The approval gate (`mam loop --approve`): a passed loop waits for a person, who approves or rejects.

The gate is one file, `.mam/loops/<id>/approval.json` (0600, replaced atomically, changed under
`approval.lock`), so it survives the waiting `mam loop` process and any other process can act on
it: `mam loop approve` / `reject` (or the MCP tools) write the decision there and log it in the
loop's log, and poke the loop's wake key (`loop:<id>`, mam/util/pokes.py); the waiting loop sleeps on
that key (with no deadline: a person may take days; a gate changed by other means is looked at every
`LOOK_S`) and goes on from what it finds.

States of the gate: `needs_approval` (waiting); `approved` (merged: by, at, mode, merged
commit); `rejected` (a note for the creator's next fix); `review` (an approval found the branch
no longer holds the reviewed tree, so the loop reviews it again). Approve merges only when the
branch's tree is still the reviewed tree; it merges the branch into the base branch
(mam.loop.merge) and adds the approval to the promoted reports' identity sidecars.
"""

from __future__ import annotations

import getpass
import json
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mam.errors import ApprovalRefused, LoopNotFound, UsageError
from mam.ids import check_loop_id
from mam.loop.files import LoopLog, loop_folder
from mam.loop.merge import MODES, branch_tip, merge, tree_of
from mam.util import pokes
from mam.util.flock import FileLock
from mam.util.fs import atomic_write_json
from mam.util.git import git, git_env, maybe
from mam.workspace import Workspace

NEEDS_APPROVAL = "needs_approval"
APPROVED = "approved"
REJECTED = "rejected"
REVIEW = "review"
LOOK_S = 60.0  # a gate changed otherwise than by approve or reject (by hand) is seen within this


def gate_path(ws: Workspace, loop_id: str) -> Path:
    return loop_folder(ws, loop_id) / "approval.json"


def read_gate(ws: Workspace, loop_id: str) -> dict[str, Any] | None:
    try:
        data = json.loads(gate_path(ws, loop_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _lock(ws: Workspace, loop_id: str) -> FileLock:
    return FileLock(str(loop_folder(ws, loop_id) / "approval.lock"))


def open_gate(ws: Workspace, loop_id: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """Write the gate as `needs_approval` with what was reviewed (identity, reports, branches)."""
    gate = {**record, "state": NEEDS_APPROVAL, "since": time.time(), "decision": None}
    with _lock(ws, loop_id):
        atomic_write_json(gate_path(ws, loop_id), gate, mode=0o600)
    return gate


def wait_decision(ws: Workspace, loop_id: str) -> dict[str, Any]:
    """Wait, without a deadline, until the gate leaves `needs_approval`; return it. Woken by the poke of each
    decision written here."""
    with pokes.Waiter(ws, [pokes.loop_key(loop_id)]) as waiter:  # listening before the first look
        while True:
            gate = read_gate(ws, loop_id)
            if gate is not None and gate.get("state") != NEEDS_APPROVAL:
                return gate
            waiter.wait(LOOK_S)


def _decide(ws: Workspace, loop_id: str, gate: Mapping[str, Any]) -> None:
    """Write a decision to the gate (its log line follows; then `_wake`)."""
    atomic_write_json(gate_path(ws, loop_id), dict(gate), mode=0o600)


def _wake(ws: Workspace, loop_id: str) -> None:
    """Wake the loop waiting for the decision, once its log line is written (the loop's next lines follow it)."""
    pokes.poke(ws, [pokes.loop_key(loop_id)])


def who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _existing(ws: Workspace, loop_id: str) -> None:
    """LoopNotFound (exit 5) unless the loop was started here; checked before its lock file is made."""
    check_loop_id(loop_id)
    if not (loop_folder(ws, loop_id) / "loop.jsonl").is_file():
        raise LoopNotFound(f"no loop {loop_id!r} in workspace {ws.root}", loop_id=loop_id)


def _waiting_gate(ws: Workspace, loop_id: str) -> dict[str, Any]:
    gate = read_gate(ws, loop_id)
    if gate is None:
        raise ApprovalRefused(f"loop {loop_id} was not started with --approve: there is nothing to approve")
    if gate.get("state") != NEEDS_APPROVAL:
        raise ApprovalRefused(f"loop {loop_id} is not waiting for approval (its gate is {gate.get('state')})")
    return gate


def approve(
    ws: Workspace,
    loop_id: str,
    *,
    mode: str = "ff",
    via: str = "cli",
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Merge the reviewed head into the base branch if the branch still holds the reviewed tree.

    A branch that moved: ApprovalRefused (exit 5) naming what changed, and the loop reviews again.
    """
    if mode not in MODES:
        raise UsageError(f"--merge {mode!r}: use ff, merge or squash")
    env = git_env(environ)
    _existing(ws, loop_id)
    log = LoopLog(loop_folder(ws, loop_id) / "loop.jsonl", loop_id)
    with _lock(ws, loop_id):
        gate = _waiting_gate(ws, loop_id)
        identity = gate["identity"]
        repo, branch, base_branch = Path(gate["repo"]), gate["branch"], gate["base_branch"]
        tip = branch_tip(repo, branch, env)
        now_tree = tree_of(repo, tip, env) if tip else ""
        if now_tree != identity["tree"]:
            why = _what_changed(identity, branch, tip, now_tree)
            gate.update(state=REVIEW, decision={"by": who(), "at": time.time(), "via": via, "refused": why})
            _decide(ws, loop_id, gate)
            log("approval-refused", by=gate["decision"]["by"], via=via, reason=why, review_again=True)
            _wake(ws, loop_id)
            raise ApprovalRefused(f"loop {loop_id}: not approved: {why}; the loop reviews it again", loop_id=loop_id)
        assert tip is not None
        landing = _unreviewed(repo, base_branch, tip, identity["base"], env)
        if landing:
            log("approval-refused", by=who(), via=via, reason=landing, review_again=False)
            raise ApprovalRefused(f"loop {loop_id}: not approved: {landing}", loop_id=loop_id)
        by = who()
        message = f"mam loop {loop_id}: {branch} into {base_branch}, approved by {by}\n\nReviewed tree {now_tree}."
        try:
            merged, done = merge(repo, base_branch=base_branch, head=tip, mode=mode, message=message, env=env)
        except ApprovalRefused as e:
            log("approval-refused", by=by, via=via, reason=str(e), review_again=False)
            raise
        decision = {
            "by": by,
            "at": time.time(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "via": via,
            "mode": mode,
            "merged": merged,
            "head": tip,
            "tree": now_tree,
            "base_branch": base_branch,
            "message": done,
        }
        gate.update(state=APPROVED, decision=decision)
        _decide(ws, loop_id, gate)
        _stamp_sidecars(gate.get("promoted") or [], decision)
        log("approved", **decision)
        _wake(ws, loop_id)
    return gate


def _unreviewed(repo: Path, base_branch: str, head: str, reviewed_base: str, env: Mapping[str, str]) -> str:
    """Why merging `head` into `base_branch` would land commits the review did not cover ('' if none would):
    what lands is merge-base(base_branch, head)..head, the review covered reviewed_base..head."""
    tip = branch_tip(repo, base_branch, env)
    meet = maybe(["merge-base", tip, head], cwd=repo, env=env) if tip else None
    covered = ["merge-base", "--is-ancestor", reviewed_base, meet or ""]
    if meet and git(covered, cwd=repo, env=env, check=False).returncode == 0:
        return ""
    return (
        f"{base_branch} and the reviewed head {head[:12]} meet at {(meet or 'no common commit')[:12]}, so merging "
        f"would land commits the review did not cover (it covered {reviewed_base[:12]}..{head[:12]}); run the loop "
        f"with --base {base_branch}"
    )


def reject(ws: Workspace, loop_id: str, *, note: str, via: str = "cli") -> dict[str, Any]:
    """Send the loop back to its creator with `note` in the fix brief."""
    if not note.strip():
        raise UsageError("--note is empty: say what the creator should change")
    _existing(ws, loop_id)
    log = LoopLog(loop_folder(ws, loop_id) / "loop.jsonl", loop_id)
    with _lock(ws, loop_id):
        gate = _waiting_gate(ws, loop_id)
        decision = {"by": who(), "at": time.time(), "via": via, "note": note[:20000]}
        gate.update(state=REJECTED, decision=decision)
        _decide(ws, loop_id, gate)
        log("rejected", by=decision["by"], via=via, note=note[:2000])
        _wake(ws, loop_id)
    return gate


def reject_line(gate: Mapping[str, Any]) -> str:
    """What a reject does, in words: the creator gets the note and another round runs, or (the last round of
    --max-loop) the loop ends not passed."""
    by = (gate.get("decision") or {}).get("by")
    number, last = gate.get("round"), gate.get("max_loop")
    if isinstance(number, int) and isinstance(last, int) and number >= last:
        return (
            f"loop {gate.get('loop')}: rejected by {by}; round {number} was the last of --max-loop {last}, so the "
            "loop ends not passed (exit 1) and the note is kept in its log"
        )
    return f"loop {gate.get('loop')}: rejected by {by}; the creator gets the note in a fix brief, then another round"


def _what_changed(identity: Mapping[str, Any], branch: str, tip: str | None, tree: str) -> str:
    head = str(identity.get("head") or "")
    if tip is None:
        return f"branch {branch} is gone (reviewed head {head[:12]})"
    if tip == head:
        return (
            f"the reviewed tree {str(identity['tree'])[:12]} held uncommitted changes on top of head {head[:12]} "
            f"(tree {tree[:12]}); commit them on {branch}"
        )
    return (
        f"branch {branch} moved from the reviewed head {head[:12]} to {tip[:12]}; its tree is now {tree[:12]}, "
        f"the reviewed tree was {str(identity['tree'])[:12]}"
    )


def _stamp_sidecars(promoted: list[str], decision: Mapping[str, Any]) -> None:
    """Add who approved, when and the merged commit to each promoted report's identity sidecar."""
    for report in promoted:
        sidecar = Path(report).with_suffix(".identity.json")
        try:
            data = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        data["approval"] = {k: decision[k] for k in ("by", "when", "mode", "merged", "base_branch")}
        atomic_write_json(sidecar, data)
