"""A throwaway opencode home for the real `opencode` CLI: the user's own opencode.json pointing it
at the scripted model server, and readers for its SQLite store (`opencode.db`).

Every path comes from the caller; the real user's folders are never read or written.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from tests.real.clis import BY_NAME, cache_dir

PROVIDER = "scripted"
MODEL = "scripted-model"
# What opencode 1.18.33 shows: its permission question, and its input box once it is ready.
PROMPT_TEXT = "Permission required"
READY_TEXT = "Ask anything"
# Its launch without the network: no models.dev fetch, no self-update.
ENV = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"}


def write_config(config_home: Path, *, base_url: str, permission: dict[str, Any] | None = None) -> Path:
    """The user's opencode.json: a custom OpenAI-compatible provider on loopback and, if given,
    the user's own permission rules (mam's `report` must add to them, not replace them)."""
    folder = config_home / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Scripted model (tests)",
                "options": {"baseURL": base_url, "apiKey": "dummy-key-for-tests"},
                "models": {MODEL: {"name": "Scripted model"}},
            }
        },
        "model": f"{PROVIDER}/{MODEL}",
        "small_model": f"{PROVIDER}/{MODEL}",
        "autoupdate": False,
        "share": "disabled",
    }
    if permission is not None:
        config["permission"] = permission
    copy_plugin(folder)
    path = folder / "opencode.json"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


def copy_plugin(folder: Path) -> None:
    """What opencode installs into its config folder on its first launch in a HOME (`@opencode-ai/plugin`,
    from the network, ~7 CPU-s), from the copy tests/real/install_clis.py made: hard links where the cache
    shares the file system, else copies. Without that copy opencode installs it itself, as for a new user."""
    cli = BY_NAME["opencode"]
    source = cli.config_folder(cache_dir())
    if not (source / "node_modules" / cli.config_package).is_dir():
        return

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    for name in ("package.json", "package-lock.json"):
        link(str(source / name), str(folder / name))
    shutil.copytree(source / "node_modules", folder / "node_modules", symlinks=True, copy_function=link)


def db_path(data_home: Path) -> Path:
    return data_home / "opencode" / "opencode.db"


def _rows(db: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def user_texts(db: Path, session_id: str) -> list[str]:
    """The text parts of the session's user messages, in order (what was submitted as prompts)."""
    rows = _rows(
        db,
        "SELECT m.data, p.data FROM part p JOIN message m ON m.id = p.message_id "
        "WHERE p.session_id = ? ORDER BY p.time_created, p.id",
        (session_id,),
    )
    out = []
    for mdata, pdata in rows:
        m, p = json.loads(mdata), json.loads(pdata)
        if m.get("role") == "user" and p.get("type") == "text":
            out.append(str(p.get("text", "")))
    return out


def step_input_tokens(db: Path, session_id: str) -> list[int]:
    """The input tokens opencode recorded per model step (`step-finish` parts), in order."""
    rows = _rows(db, "SELECT data FROM part WHERE session_id = ? ORDER BY time_created, id", (session_id,))
    parts = [json.loads(d) for (d,) in rows]
    return [int((p.get("tokens") or {}).get("input") or 0) for p in parts if p.get("type") == "step-finish"]
