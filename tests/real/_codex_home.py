"""A throwaway Codex home for the real `codex` CLI: a config.toml that points it at the scripted
model server, and readers for what Codex writes there (rollouts, the trust table).

Nothing here reads or writes the real user's `~/.codex`: every path comes from the caller.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PROVIDER = "scripted"
KEY_VAR = "SCRIPTED_MODEL_API_KEY"  # a dummy key: the server never checks it
# What Codex 0.171 shows: its approval prompt, and its first-run question in an unseen repository.
APPROVAL_TEXT = "Would you like to run the following command?"
TRUST_TEXT = "Trust this folder?"


def write_config(codex_home: Path, *, base_url: str, model: str = "scripted-model") -> Path:
    """The user's own config.toml: only the model provider (no trust, no approval settings: those
    are what mam must add or leave alone)."""
    codex_home.mkdir(parents=True, exist_ok=True)
    path = codex_home / "config.toml"
    path.write_text(
        f'model = "{model}"\n'
        f'model_provider = "{PROVIDER}"\n'
        "check_for_update_on_startup = false\n"
        "\n"
        f"[model_providers.{PROVIDER}]\n"
        'name = "scripted model (tests)"\n'
        f'base_url = "{base_url}"\n'
        'wire_api = "responses"\n'
        f'env_key = "{KEY_VAR}"\n',
        encoding="utf-8",
    )
    return path


def rollouts(codex_home: Path) -> list[Path]:
    return sorted((codex_home / "sessions").glob("*/*/*/rollout-*.jsonl"))


def rollout_of(codex_home: Path, conversation_id: str) -> Path | None:
    found = sorted((codex_home / "sessions").glob(f"*/*/*/rollout-*-{conversation_id}.jsonl"))
    return found[0] if found else None


def records(path: Path, *, end: int | None = None) -> list[dict[str, Any]]:
    """The JSON lines of a rollout (its first `end` bytes only, when given)."""
    out = []
    for line in path.read_bytes()[:end].decode("utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def user_turns_holding(path: Path, needle: str) -> int:
    """How many user messages of the conversation hold `needle` (the model saw each one as a turn)."""
    return turns_holding(records(path), needle)


def history(codex_home: Path, conversation_id: str) -> list[dict[str, Any]]:
    """A thread's whole conversation as Codex 0.171 reads it: a fork's rollout starts with a
    `session_meta` whose `history_base` names the thread it was forked from and how many bytes of
    that thread's rollout come first (the source's messages are not copied into the fork's file)."""
    path = rollout_of(codex_home, conversation_id)
    assert path is not None, f"no rollout for {conversation_id}"
    own = records(path)
    base = ((own[0].get("payload") or {}).get("history_base") or {}) if own else {}
    if not base:
        return own
    parent = rollout_of(codex_home, str(base["thread_id"]))
    assert parent is not None, f"the rollout {conversation_id} was forked from is gone: {base}"
    return records(parent, end=int(base["end_byte_offset"])) + own


def turns_holding(recs: list[dict[str, Any]], needle: str) -> int:
    """How many user messages among `recs` hold `needle`."""
    count = 0
    for rec in recs:
        p = rec.get("payload") or {}
        if rec.get("type") == "response_item" and p.get("type") == "message" and p.get("role") == "user":
            if any(needle in str(c.get("text", "")) for c in p.get("content") or [] if isinstance(c, dict)):
                count += 1
    return count


def total_input_tokens(path: Path) -> int | None:
    """The conversation's input tokens so far, as Codex last recorded them (None if never)."""
    total = None
    for rec in records(path):
        p = rec.get("payload") or {}
        if rec.get("type") == "event_msg" and p.get("type") == "token_count" and isinstance(p.get("info"), dict):
            total = int((p["info"].get("total_token_usage") or {}).get("input_tokens") or 0)
    return total


@contextmanager
def module_rig(tmp_path_factory: Any, real_broker: Any) -> Iterator[Any]:
    """A test module's codex rig (tests/real/_scenario.module_rig): its CODEX_HOME, with config.toml written
    for the rig's scripted model server."""
    from tests.real import _scenario as sc
    from tests.real.openai_server import ScriptedModel

    with sc.module_rig(
        "codex",
        tmp_path_factory,
        real_broker,
        ScriptedModel,
        env=lambda root, model: {"CODEX_HOME": str(root / "home" / ".codex"), KEY_VAR: "dummy-key-for-tests"},
    ) as r:
        write_config(r.home / ".codex", base_url=r.model.base_url)
        yield r
