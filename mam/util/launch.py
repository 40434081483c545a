"""The pane launcher: `python -c RUN_MODULE mam.util.launch SPEC.json` (mam.util.proc) reads a 0600
spec file, deletes it, sets exactly the environment it holds, changes to its folder and execs the agent.

Backends start this instead of the agent so that argv and environment never pass through a
shell or a tmux command line, and so the pane's process *is* the agent (same pid after exec).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from mam.outcomes import Exit
from mam.util.proc import module_argv

INHERITED_PREFIXES = ("TMUX", "HERDR")


def write_spec(folder: Path, *, argv: Sequence[str], cwd: str, env: Mapping[str, str]) -> Path:
    """Write a launch spec (0600) that the launcher reads once and deletes."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"launch-{uuid.uuid4().hex}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"argv": list(argv), "cwd": cwd, "env": dict(env)}, f)
    return path


def launcher_argv(python: str, spec: Path) -> list[str]:
    return module_argv(python, "mam.util.launch", str(spec))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m mam.util.launch SPEC.json", file=sys.stderr)
        return Exit.USAGE
    spec_path = Path(argv[0])
    try:
        with open(spec_path, encoding="utf-8") as f:
            spec = json.load(f)
    except (OSError, ValueError) as e:
        print(f"mam launch: cannot read {spec_path}: {e}", file=sys.stderr)
        return Exit.USAGE
    finally:
        try:
            spec_path.unlink()
        except OSError:
            pass
    env = {str(k): str(v) for k, v in spec["env"].items()}
    # Keep what the multiplexer told this pane about itself (TMUX_PANE, HERDR_PANE_ID...).
    env.update({k: v for k, v in os.environ.items() if k.startswith(INHERITED_PREFIXES)})
    env["MAM_AGENT_PID"] = str(os.getpid())
    try:
        os.chdir(spec["cwd"])
    except OSError as e:
        print(f"mam launch: cannot enter {spec['cwd']}: {e}", file=sys.stderr)
        return Exit.USAGE
    program = spec["argv"]
    try:
        os.execvpe(program[0], program, env)
    except OSError as e:
        print(f"mam launch: cannot run {program[0]}: {e}", file=sys.stderr)
        return Exit.NO_EXECUTABLE
    return Exit.OK  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
