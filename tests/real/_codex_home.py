"""A throwaway Codex home for the real `codex` CLI: a config.toml that points it at the scripted
model server, and readers for what Codex writes there (rollouts, the trust table).

Nothing here reads or writes the real user's `~/.codex`: every path comes from the caller.
"""

from __future__ import annotations

import json
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


def records(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def user_turns_holding(path: Path, needle: str) -> int:
    """How many user messages of the conversation hold `needle` (the model saw each one as a turn)."""
    count = 0
    for rec in records(path):
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
