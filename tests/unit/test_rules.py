"""The rules docs/architecture.md states about the code, each checked by reading every file's syntax tree,
each with a probe (a planted violation in a temporary module) showing the check can fail. The package
graph itself (the layers, the upward imports) is tests/unit/test_layers.py's."""

from __future__ import annotations

import ast
from pathlib import Path

MAM = Path(__file__).resolve().parents[2] / "mam"


def rel(path: Path) -> str:
    return str(path.relative_to(MAM))


def all_files() -> list[Path]:
    return sorted(p for p in MAM.rglob("*.py") if "__pycache__" not in p.parts)


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


# -- SQL: only mam/store/ executes it ---------------------------------------------------------------------------

SQL_CALLS = {"execute", "executemany", "executescript"}
# Files outside mam/store/ that run SQL, each with its reason. None of them touches mam's registry.
SQL_ELSEWHERE: dict[str, str] = {
    "agents/codex.py": "reads codex's own state database (its threads) to find a session's conversation",
    "agents/hermes.py": "reads hermes's own session database to find and purge a session's conversation",
    "agents/opencode.py": "reads opencode's own database to find and purge a session's conversation",
    "agents/convo.py": "the adapters' shared purge of a conversation's rows from the agent's own database",
    "usage/readers.py": "reads token usage from an agent CLI's own database",
}


def sql_lines(path: Path) -> list[int]:
    """The lines of a file that call .execute/.executemany/.executescript (on a connection or cursor)."""
    return sorted(
        n.lineno
        for n in ast.walk(tree(path))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in SQL_CALLS
    )


def runs_sql() -> set[str]:
    return {rel(p) for p in all_files() if rel(p).split("/")[0] != "store" and sql_lines(p)}


def test_only_the_store_executes_sql() -> None:
    assert runs_sql() - set(SQL_ELSEWHERE) == set(), "move the SQL into a mam/store/ module"


def test_the_sql_allow_list_holds_only_what_is_still_there() -> None:
    assert set(SQL_ELSEWHERE) - runs_sql() == set()


def test_the_sql_check_can_fail(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f(conn):\n    with conn:\n        return conn.cursor().execute('SELECT 1')\n")
    assert sql_lines(probe) == [3]
