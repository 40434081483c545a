"""The node serves typed requests and imitates no caller (issue 38, docs/node-protocol.md): nothing under mam/node
imports mam.cli or reads the process's environment, folder or standard streams on a caller's behalf; and the one
attempt, `mam.jobs.delegate.delegate`, is called from the node's service only (every delegation, whoever asks, is a
`delegate` operation). Read from the syntax trees, so a call or an import hidden in a function counts."""

from __future__ import annotations

import ast
from pathlib import Path

MAM = Path(__file__).resolve().parents[2] / "mam"


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def imported(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return found


def callers_of_delegate(root: Path) -> set[str]:
    """Files that call `delegate(...)` having imported it from mam.jobs.delegate (under any name)."""
    out = set()
    for path in sorted(root.rglob("*.py")):
        t = tree(path)
        names = {
            a.asname or a.name
            for n in ast.walk(t)
            if isinstance(n, ast.ImportFrom) and n.module == "mam.jobs.delegate"
            for a in n.names
            if a.name == "delegate"
        }
        calls = any(isinstance(n, ast.Call) and getattr(n.func, "id", "") in names for n in ast.walk(t))
        if names and calls:
            out.add(str(path.relative_to(root.parent)))
    return out


def test_the_node_imports_no_command_line() -> None:
    bad = {
        str(p.relative_to(MAM)): sorted(m for m in imported(p) if m == "mam.cli" or m.startswith("mam.cli."))
        for p in sorted((MAM / "node").glob("*.py"))
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_node_reads_nothing_of_a_caller_process() -> None:
    """No `os.getcwd()`, `os.getppid()` or `sys.stdin`/`sys.stdout` read in the node's server and service: what a
    caller may vary comes in the request (the client side, mam/node/front.py and client.py, reads its own)."""
    for name in ("server.py", "service.py", "local.py", "call.py"):
        for node in ast.walk(tree(MAM / "node" / name)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                used = f"{node.value.id}.{node.attr}"
                assert used not in {"os.getcwd", "os.getppid", "sys.stdin", "sys.stdout"}, (name, used)
    assert not (MAM / "util" / "caller.py").exists()


def test_the_attempt_is_called_from_the_node_only(tmp_path: Path) -> None:
    assert callers_of_delegate(MAM) == {"mam/node/service.py"}
    # The check can fail: a module elsewhere that calls it is found.
    probe = tmp_path / "mam" / "routines" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("from mam.jobs.delegate import delegate as run\n\ndef f(req):\n    return run(req)\n")
    assert callers_of_delegate(tmp_path / "mam") == {"mam/routines/probe.py"}
