"""Install the pinned real agent CLIs into the cache tests/real/ uses, skipping what is there.

    python3 -m tests.real.install_clis [--only claude,codex] [--check]

From the repository root. Idempotent: a CLI whose executable exists and whose installed
version is the pin is left alone. When something is missing and its registry cannot be
reached, it prints one line saying so and exits 0 (the real suite then skips itself with its
own reason line); an install that fails with the registry reachable exits 1. `--check` installs
nothing: exit 0 when every chosen CLI is ready, 1 if not.
Each install's output goes to `<cache>/<folder>.log`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.real.clis import PINS, Cli, cache_dir

REGISTRIES = {"npm": "https://registry.npmjs.org/", "pypi": "https://pypi.org/simple/pip/"}
PROBE_TIMEOUT_S = 8.0


def reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=PROBE_TIMEOUT_S):
            return True
    except urllib.error.HTTPError:
        return True  # it answered
    except (OSError, ValueError):
        return False


def _run(argv: list[str], log: Path, cwd: Path | None = None) -> int:
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        proc = subprocess.run(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, check=False
        )
        out.write(f"rc={proc.returncode}\n")
    return proc.returncode


def find_python(name: str) -> str | None:
    """A `pythonX.Y` that runs: on PATH (a pyenv shim there may name a version that is not selected, and then
    exits 127), else the newest pyenv-installed one of that version."""
    found = [shutil.which(name)]
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    version = name.removeprefix("python")
    found += [str(p) for p in sorted(root.glob(f"versions/{version}*/bin/{name}"), reverse=True)]
    for candidate in filter(None, found):
        ok = subprocess.run([candidate, "-c", "pass"], stdin=subprocess.DEVNULL, capture_output=True, check=False)
        if ok.returncode == 0:
            return candidate
    return None


def toolchain_missing(cli: Cli) -> str:
    """The program this CLI's install needs that is not here ("" when all are there)."""
    if cli.registry == "npm":
        return "npm" if shutil.which("npm") is None else ""
    return cli.python if cli.python and find_python(cli.python) is None else ""


def install_npm(cli: Cli, cache: Path, log: Path) -> int:
    npm = shutil.which("npm")
    if npm is None:
        return 127
    folder = cli.folder(cache)
    folder.mkdir(parents=True, exist_ok=True)
    rc = _run(
        [
            npm,
            "install",
            "--prefix",
            str(folder),
            "--no-audit",
            "--no-fund",
            "--save-exact",
            f"{cli.package}@{cli.version}",
        ],
        log,
    )
    if rc == 0 and cli.executable(cache) is None:
        # Some npm set-ups skip install scripts; the package's own installer puts the binary in place.
        script = folder / "node_modules" / cli.package / "install.cjs"
        node = shutil.which("node")
        if script.is_file() and node:
            rc = _run([node, str(script)], log, cwd=script.parent)
    if rc == 0 and cli.config_package:
        # What the CLI writes into its config folder on a first launch (package.json naming the package at
        # its own version, then an install): done once here, copied into each test HOME.
        deps = cli.config_folder(cache)
        deps.mkdir(parents=True, exist_ok=True)
        manifest = {"dependencies": {cli.config_package: cli.version}}
        (deps / "package.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        rc = _run([npm, "install", "--prefix", str(deps), "--no-audit", "--no-fund"], log)
    return rc


def install_pypi(cli: Cli, cache: Path, log: Path) -> int:
    python = find_python(cli.python) if cli.python else sys.executable
    if python is None:
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{cli.python} not found\n")
        return 127
    folder = cli.folder(cache)
    if not (folder / "bin" / "python").exists():
        rc = _run([python, "-m", "venv", str(folder)], log)
        if rc:
            return rc
    return _run(
        [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{cli.package}=={cli.version}"], log
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="comma-separated CLI names (default: all)")
    parser.add_argument("--check", action="store_true", help="install nothing; exit 1 if a chosen CLI is not ready")
    args = parser.parse_args(argv)
    cache = cache_dir()
    chosen = [c for c in PINS if not args.only or c.name in args.only.split(",")]
    missing = [c for c in chosen if not c.ready(cache)]
    if args.check:
        for c in chosen:
            print(f"{c.name} {c.version}: {'ready' if c not in missing else 'missing'} ({c.folder(cache)})")
        return 1 if missing else 0
    if not missing:
        print(f"real CLIs: all {len(chosen)} pinned CLIs already in {cache}")
        return 0
    for c in [c for c in missing if toolchain_missing(c)]:
        print(
            f"real CLIs: {toolchain_missing(c)} not found; not installing {c.name} {c.version} (tests/real will skip "
            "it)"
        )
        missing.remove(c)
    if not missing:
        return 0
    kinds = sorted({c.registry for c in missing})
    down = [k for k in kinds if not reachable(REGISTRIES[k])]
    if down:
        names = ", ".join(f"{c.name} {c.version}" for c in missing)
        print(
            f"real CLIs: {' and '.join(down)} registry unreachable; not installing {names} (tests/real will skip them)"
        )
        return 0
    cache.mkdir(parents=True, exist_ok=True)
    failed = []
    for c in missing:
        started = time.monotonic()
        log = cache / f"{c.folder(cache).name}.log"
        rc = install_npm(c, cache, log) if c.registry == "npm" else install_pypi(c, cache, log)
        ok = rc == 0 and c.ready(cache)
        print(
            f"real CLIs: {c.name} {c.version} {'installed' if ok else f'FAILED (rc={rc}, see {log})'} in "
            f"{time.monotonic() - started:.0f}s"
        )
        if not ok:
            failed.append(c.name)
    if failed:  # the registry answered, so this is a real failure (a pin gone, a broken package)
        print(f"real CLIs: not installed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
