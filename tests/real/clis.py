"""The pinned real agent CLIs of tests/real/: their versions and where the cache keeps them.

Layout under `${MAM_REAL_CLIS:-~/.cache/mam/real-clis}` (what install_clis.py writes):
`npm-<name>/node_modules/.bin/<cmd>` for npm packages, a venv `py-<name>/` for PyPI ones
(hermes needs Python >= 3.12). One table, read by the installer and by the test fixtures.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Cli:
    name: str  # mam's agent name, and the cache folder's suffix
    registry: str  # "npm" or "pypi"
    package: str
    version: str
    command: str  # the executable
    python: str = ""  # pypi only: the interpreter the venv is built with ("" = the installer's own)
    bin_glob: str = ""  # pypi only: where the executable is, if not the venv's bin/
    # npm only: a package the CLI installs from the network into its config folder on its first launch in a
    # HOME (opencode: `@opencode-ai/plugin` at its own version, ~7 CPU-s of every fresh HOME's first start).
    # Installed here once, at the CLI's version; each test HOME gets a copy (tests/real/_opencode_home.py).
    config_package: str = ""

    def folder(self, cache: Path) -> Path:
        return cache / f"{'npm' if self.registry == 'npm' else 'py'}-{self.name}"

    def executable(self, cache: Path) -> Path | None:
        """The installed executable, or None when it is missing."""
        root = self.folder(cache)
        if self.registry == "npm":
            path = root / "node_modules" / ".bin" / self.command
            return path if os.access(path, os.X_OK) else None
        if self.bin_glob:
            found = sorted(root.glob(self.bin_glob))
            return found[0] if found and os.access(found[0], os.X_OK) else None
        path = root / "bin" / self.command
        return path if os.access(path, os.X_OK) else None

    def config_folder(self, cache: Path) -> Path:
        """Where `config_package` is installed: a folder laid out as the CLI's own config folder."""
        return self.folder(cache) / "config-deps"

    def installed_version(self, cache: Path) -> str | None:
        """The version the cache holds (from the package's own metadata), or None; with a `config_package`,
        None too while that package is missing or at another version."""
        root = self.folder(cache)
        if self.registry == "npm":
            version = npm_version(root / "node_modules" / self.package)
            if (
                self.config_package
                and npm_version(self.config_folder(cache) / "node_modules" / self.config_package) != version
            ):
                return None
            return version
        dist = self.package.replace("-", "_")
        for info in root.glob(f"lib/python*/site-packages/{dist}-*.dist-info"):
            return info.name[len(dist) + 1 : -len(".dist-info")]
        return None

    def ready(self, cache: Path) -> bool:
        return self.executable(cache) is not None and self.installed_version(cache) == self.version


PINS: tuple[Cli, ...] = (
    Cli("claude", "npm", "@anthropic-ai/claude-code", "2.1.332", "claude"),
    Cli("codex", "npm", "@openai/codex", "0.171.0", "codex"),
    Cli("opencode", "npm", "opencode-ai", "1.18.33", "opencode", config_package="@opencode-ai/plugin"),
    Cli("gemini", "npm", "@google/gemini-cli", "0.61.0", "gemini"),
    Cli("hermes", "pypi", "hermes-agent", "0.19.0", "hermes", python="python3.12"),
    Cli("grok", "pypi", "grok-cli-bin", "0.2.111", "grok", bin_glob="lib/python*/site-packages/grok_cli_bin/bin/grok"),
)
BY_NAME = {cli.name: cli for cli in PINS}


def npm_version(package: Path) -> str | None:
    """The version in an installed npm package's package.json, or None."""
    try:
        return str(json.loads((package / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def cache_dir(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    value = env.get("MAM_REAL_CLIS")
    if value:
        return Path(value).expanduser()
    # The user's real home, not a test's temporary HOME: the cache outlives every test.
    return Path(os.path.expanduser("~")) / ".cache" / "mam" / "real-clis"
