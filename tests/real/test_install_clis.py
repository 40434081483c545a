"""The real-CLI installer without the network: offline it says so in one line and writes nothing;
with the pinned versions in place it touches nothing; `--check` tells ready from missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.brokers import free_port
from tests.real.clis import BY_NAME, PINS, Cli

REPO = Path(__file__).resolve().parents[2]


def run(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there: every registry is unreachable
    env = {
        **os.environ,
        "MAM_REAL_CLIS": str(cache),
        "https_proxy": dead,
        "HTTPS_PROXY": dead,
        "http_proxy": dead,
        "HTTP_PROXY": dead,
        "no_proxy": "",
        "NO_PROXY": "",
    }
    return subprocess.run(
        [sys.executable, "-m", "tests.real.install_clis", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def fake_install(cli: Cli, cache: Path, version: str) -> None:
    """What a finished install leaves: the executable and the package's own version record (and its config
    package's, at the same version)."""
    root = cli.folder(cache)
    if cli.registry == "npm":
        meta = root / "node_modules" / cli.package / "package.json"
        meta.parent.mkdir(parents=True)
        meta.write_text(json.dumps({"name": cli.package, "version": version}))
        if cli.config_package:
            extra = cli.config_folder(cache) / "node_modules" / cli.config_package / "package.json"
            extra.parent.mkdir(parents=True)
            extra.write_text(json.dumps({"name": cli.config_package, "version": version}))
        exe = root / "node_modules" / ".bin" / cli.command
    else:
        site = root / "lib" / "python3.12" / "site-packages"
        (site / f"{cli.package.replace('-', '_')}-{version}.dist-info").mkdir(parents=True)
        exe = root / cli.bin_glob.replace("python*", "python3.12") if cli.bin_glob else root / "bin" / cli.command
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)


def test_offline_it_installs_nothing_says_so_in_one_line_and_exits_0(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    proc = run(cache)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and "unreachable" in lines[0] and "claude 2.1.332" in lines[0], proc.stdout
    assert not cache.exists()
    check = run(cache, "--check")
    assert check.returncode == 1 and check.stdout.count("missing") == len(PINS), check.stdout


def test_pinned_versions_in_place_are_left_alone(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for cli in PINS:
        fake_install(cli, cache, cli.version)
    before = sorted(str(p) for p in cache.rglob("*"))
    proc = run(cache)
    assert proc.returncode == 0 and "already" in proc.stdout, proc.stdout
    assert sorted(str(p) for p in cache.rglob("*")) == before
    assert run(cache, "--check").returncode == 0


def test_opencode_without_its_config_package_is_not_ready(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    opencode = BY_NAME["opencode"]
    fake_install(opencode, cache, opencode.version)
    shutil.rmtree(opencode.config_folder(cache))
    proc = run(cache, "--check", "--only", "opencode")
    assert proc.returncode == 1 and f"opencode {opencode.version}: missing" in proc.stdout, proc.stdout


def test_another_version_in_the_cache_is_not_the_pin(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    claude = next(c for c in PINS if c.name == "claude")
    fake_install(claude, cache, "2.0.0")
    proc = run(cache, "--check", "--only", "claude")
    assert proc.returncode == 1 and "claude 2.1.332: missing" in proc.stdout, proc.stdout
