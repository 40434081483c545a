"""Settings: the one place that reads `.mam.env` and the process environment.

Everything else receives a frozen `Settings` object (or the piece it needs).
The environment wins over `.mam.env`, which wins over the defaults.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mam.envfile import parse_env_file
from mam.errors import ConfigError, UsageError
from mam.util.trust import check_path


@dataclass(frozen=True)
class Key:
    name: str
    default: str
    doc: str
    kind: str = "str"  # str | int | float | bool | path
    secret: bool = False
    attr: str = ""  # the Settings field holding the typed value ("": the name in lower case, without MAM_)

    @property
    def field(self) -> str:
        return self.attr or self.name.lower().removeprefix("mam_")


KEYS: tuple[Key, ...] = (
    Key(
        "MQTT_BROKER",
        "",
        "MQTT broker host, or a comma-separated list of host[:port] (a clustered broker's nodes: mam connects to the "
        "first that answers and moves to the next when the connection is lost; IPv6 in brackets, [::1]:1884). Empty: "
        "use this workspace's embedded broker on 127.0.0.1 (started on demand). Never a public broker.",
        attr="broker_host",
    ),
    Key("MQTT_PORT", "1883", "MQTT broker port (8883 is usual with TLS).", "int", attr="broker_port"),
    Key("MQTT_USERNAME", "", "Broker username (empty: anonymous)."),
    Key("MQTT_PASSWORD", "", "Broker password.", secret=True),
    Key("MQTT_TLS", "0", "1 to connect with TLS.", "bool"),
    Key("MQTT_TLS_CA", "", "CA certificate file that signed the broker's certificate.", "path"),
    Key("MQTT_TLS_CERT", "", "Client certificate file (mutual TLS).", "path"),
    Key("MQTT_TLS_KEY", "", "Client private key file (mutual TLS).", "path"),
    Key("MQTT_CLIENT_ID_PREFIX", "mam", "Prefix of every MQTT client id mam uses."),
    Key(
        "MAM_TOPIC_PREFIX",
        "",
        "Root of every mam topic. Empty: jobs under mam/<workspace slug>, runners under mam. If set, set it alike on "
        "every host.",
    ),
    Key(
        "MAM_DISPATCH_SECRET",
        "",
        "Shared secret that signs remote dispatch messages (needed for remote: jobs and runners).",
        secret=True,
    ),
    Key("MAM_JOB_TIMEOUT_S", "3600", "Wall-clock budget of a job, in seconds.", "float"),
    Key(
        "MAM_START_DEADLINE_S",
        "180",
        "Seconds an agent has to publish `started` after the brief is delivered.",
        "float",
    ),
    Key("MAM_HEARTBEAT_S", "30", "Default heartbeat interval N, in seconds.", "float"),
    Key("MAM_HEARTBEAT_K", "4", "A job with no event for K x N seconds is unresponsive (deadline_timeout).", "float"),
    Key(
        "MAM_DISPATCH_WAIT_S",
        "600",
        "How long a job waits for the session's earlier jobs before it is cancelled (session_busy).",
        "float",
    ),
    Key(
        "MAM_REMIND_AFTER_S",
        "5",
        "After the agent's turn ends (its Stop / notify hook) with its job still open: seconds before one reminder.",
        "float",
    ),
    Key(
        "MAM_REMINDERS",
        "2",
        "Reminders per job at most; one more turn end without a report then fails the job (ended_without_report).",
        "int",
    ),
    Key(
        "MAM_IDEMPOTENCY_TTL_S",
        "86400",
        "How long an idempotency key (`--idempotency-key`, `--dedup`) keeps naming its job, in seconds from the "
        "job's creation (never less than while the job is open); a later delegation with the key makes a new job.",
        "float",
    ),
    Key(
        "MAM_MAX_RUNNING_JOBS",
        "0",
        "Jobs delivered and not yet ended, workspace-wide, at most (0: no cap); a job over it waits `queued`. "
        "MAM_MAX_RUNNING_JOBS_<ROLE> (e.g. MAM_MAX_RUNNING_JOBS_REVIEWER=1) caps the sessions of one role.",
        "int",
    ),
    Key("MAM_TOKEN_BUDGET", "0", "Tokens the workspace's jobs may spend in all, ever (0: no budget).", "int"),
    Key("MAM_TOKEN_BUDGET_DAILY", "0", "Tokens the workspace's jobs may spend per UTC day (0: no budget).", "int"),
    Key(
        "MAM_ORG_DAILY_RUNS",
        "0",
        "Task jobs the node starts per local day, all roles together (0: no cap); a role's own cap is "
        "`mam role add --daily-runs N`. A task over it waits `todo` with queued_for daily_cap.",
        "int",
    ),
    Key(
        "MAM_DEFAULT_ESTIMATE_TOKENS",
        "20000",
        "Tokens reserved for a job with no --estimate-tokens while its role has no completed job to go by.",
        "int",
    ),
    Key(
        "MAM_NO_AUTOSTART",
        "0",
        "1: never start a broker, tmux or herdr server, or a node, on demand.",
        "bool",
    ),
    Key(
        "MAM_NODE",
        "1",
        "1: `mam job delegate`, `mam job wait` and `mam event` run in the workspace's node (`mam node`); "
        "0: in the calling process, with the same code (for debugging).",
        "bool",
    ),
    Key(
        "MAM_POLL_S",
        "0.25",
        "How often loops look at what no event announces (the store while the broker is down, a runner's), in seconds.",
        "float",
    ),
    Key("MAM_MONITOR_INTERVAL_S", "5", "How often the monitor reconciles panes and the registry, in seconds.", "float"),
    Key(
        "MAM_READY_TIMEOUT_S",
        "20",
        "Seconds `session create`, `resume` and `fork` wait for the agent's screen to take input; past it the "
        "session runs, noted not ready (a slow or loaded machine may need more).",
        "float",
    ),
    Key(
        "MAM_DISPATCH_FRESHNESS_S",
        "300",
        "A remote dispatch older than this (or from the future by as much) is rejected.",
        "float",
    ),
    Key(
        "MAM_BROKER_PORT",
        "0",
        "Port of the embedded broker (0: pick a free port on first start and keep it).",
        "int",
        attr="embedded_broker_port",
    ),
    Key("MAM_BACKEND", "tmux", "Default pane backend: tmux or herdr."),
    Key("MAM_TMUX_SERVER", "", "tmux socket name for this workspace's sessions. Empty: mam-<workspace slug>."),
    Key("HERDR_SESSION_NAME", "", "herdr session (server) name. Empty: mam-<workspace slug>."),
    Key("HERDR_BIN", "herdr", "The herdr executable."),
    Key("HERDR_CONFIG_DIR", "", "herdr's config folder. Empty: $XDG_CONFIG_HOME/herdr or ~/.config/herdr.", "path"),
    Key("AGENT_PYTHON_BIN", "", "Python interpreter for mam's helper processes. Empty: the one running mam.", "path"),
    Key(
        "MAM_MCP_TOKEN",
        "",
        "Bearer token `mam mcp --http` requires. Empty: generated once into .mam/mcp-token (0600).",
        secret=True,
    ),
    Key(
        "MAM_WEB_TOKEN",
        "",
        "Bearer token of the `mam web` page. Empty: generated once into .mam/web-token (0600).",
        secret=True,
    ),
    Key(
        "MAM_WEB_LOGIN_TTL_S",
        "43200",
        "How long a login to the `mam web` page lasts, in seconds (a new link, `mam web`, logs in again).",
        "float",
    ),
    Key(
        "MAM_NOTIFY",
        "",
        "Where to tell a person about ended jobs, loops and sessions: an http(s):// URL (POST of JSON) "
        "or a command (the JSON on its stdin). Empty: no notifications.",
        secret=True,
    ),
    Key("MAM_LOG_LEVEL", "WARNING", "Log level of mam's own diagnostics on stderr."),
)

KEYS_BY_NAME = {k.name: k for k in KEYS}
# How to make MAM_DISPATCH_SECRET, said wherever it is missing (the README's fleet paragraph says the same).
MAKE_SECRET = (
    "make one with `python3 -c 'import secrets; print(secrets.token_hex(32))'` and set MAM_DISPATCH_SECRET to it "
    "in .mam.env on every host (the same value)"
)
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Resolved configuration: one typed field per key of KEYS (the field is `Key.field`), plus the raw
    text and the source of every value. Built only by `_build` (through `load_settings`); never mutated."""

    values: Mapping[str, str]
    sources: Mapping[str, str]
    env_file: Path | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # e.g. an unknown key in .mam.env; the CLI prints them on stderr
    # MAM_MAX_RUNNING_JOBS_<ROLE>: the cap of each role (keyed by role_key(role)); not in KEYS, a family of names
    max_running_jobs_by_role: Mapping[str, int] = field(default_factory=dict)
    role_cap_sources: Mapping[str, str] = field(default_factory=dict)  # MAM_MAX_RUNNING_JOBS_<ROLE> -> its source

    # -- the broker
    broker_host: str  # MQTT_BROKER, stripped ("": the embedded broker); may be a list: see `brokers`
    broker_port: int  # MQTT_PORT: the port of every MQTT_BROKER entry that names none
    mqtt_username: str
    mqtt_password: str = field(repr=False)
    mqtt_tls: bool
    mqtt_tls_ca: str
    mqtt_tls_cert: str
    mqtt_tls_key: str
    mqtt_client_id_prefix: str
    topic_prefix: str
    dispatch_secret: str = field(repr=False)
    embedded_broker_port: int  # MAM_BROKER_PORT
    # -- jobs (seconds, except heartbeat_k)
    job_timeout_s: float
    start_deadline_s: float
    heartbeat_s: float
    heartbeat_k: float
    dispatch_wait_s: float
    remind_after_s: float
    reminders: int
    idempotency_ttl_s: float
    dispatch_freshness_s: float
    poll_s: float
    monitor_interval_s: float
    ready_timeout_s: float  # MAM_READY_TIMEOUT_S: a new or resumed agent's ready screen (mam/sessions)
    # -- the governor (mam/governor): 0 is no cap
    max_running_jobs: int
    token_budget: int
    token_budget_daily: int
    default_estimate_tokens: int
    org_daily_runs: int  # MAM_ORG_DAILY_RUNS: task jobs per local day, the whole org (mam/org)
    # -- panes, helpers, the rest
    no_autostart: bool
    node: bool
    backend: str
    tmux_server: str
    herdr_session_name: str
    herdr_bin: str
    herdr_config_dir: str
    agent_python_bin: str
    mcp_token: str = field(repr=False)
    web_token: str = field(repr=False)
    web_login_ttl_s: float
    notify: str = field(repr=False)  # MAM_NOTIFY: a webhook URL may hold a key
    log_level: str

    def raw(self, name: str) -> str:
        return self.values[name]

    def as_environ(self) -> dict[str, str]:
        """These settings as the variables that make them again (with `.mam.env`, as load_settings reads
        them): what a process mam starts for a job (the heartbeater) is handed, not anyone's environment."""
        roles = {ROLE_CAP_PREFIX + k.upper(): str(v) for k, v in self.max_running_jobs_by_role.items()}
        return {**{k: v for k, v in self.values.items() if self.sources.get(k) != "default"}, **roles}

    def with_overrides(self, **overrides: str) -> Settings:
        """A copy with some keys replaced (source 'override'), validated again."""
        values = dict(self.values)
        sources = dict(self.sources)
        for name, value in overrides.items():
            values[name] = value
            sources[name] = "override"
        roles = {ROLE_CAP_PREFIX + k: str(v) for k, v in self.max_running_jobs_by_role.items()}
        role_sources = dict(self.role_cap_sources)
        for k, v in overrides.items():
            if k.startswith(ROLE_CAP_PREFIX):
                roles[k], role_sources[k] = v, "override"
        for name in roles:
            values.pop(name, None)
            sources.pop(name, None)
        return _build(
            values,
            sources,
            env_file=self.env_file,
            extra_env=self.extra_env,
            warnings=self.warnings,
            role_caps=roles,
            role_sources=role_sources,
        )

    def max_running_for_role(self, role: str) -> int:
        """MAM_MAX_RUNNING_JOBS_<ROLE> for this role (0: no cap of its own)."""
        return self.max_running_jobs_by_role.get(role_key(role), 0)

    @property
    def brokers(self) -> tuple[BrokerAddress, ...]:
        """MQTT_BROKER's entries in order (empty: the embedded broker); validated when the settings were loaded."""
        return parse_broker_list(self.broker_host, self.broker_port)

    def describe(self) -> list[dict[str, str]]:
        """Every key with its value (secrets redacted) and where it came from."""
        rows = []
        for key in KEYS:
            value = self.values[key.name]
            shown = redact(value) if key.secret else value
            rows.append({"key": key.name, "value": shown, "source": self.sources[key.name], "doc": key.doc})
        for name, source in sorted(self.role_cap_sources.items()):
            cap = self.max_running_jobs_by_role.get(role_key(name.removeprefix(ROLE_CAP_PREFIX)), 0)
            rows.append({"key": name, "value": str(cap), "source": source, "doc": "Running jobs of one role, at most."})
        return rows


ROLE_CAP_PREFIX = "MAM_MAX_RUNNING_JOBS_"


def role_key(role: str) -> str:
    """The <ROLE> of MAM_MAX_RUNNING_JOBS_<ROLE> for a session role: upper case, other characters as `_`."""
    return "".join(c if c.isalnum() else "_" for c in role.upper())


SECRET_SUFFIXES = ("_TOKEN", "_SECRET", "_PASSWORD")
SECRET_KEYS = frozenset(k.name for k in KEYS if k.secret)


def is_secret_name(name: str) -> bool:
    """True for an environment name that holds one of mam's secrets: a secret setting, or a
    MAM_* / MQTT_* name ending in _TOKEN, _SECRET or _PASSWORD (kept out of agent panes)."""
    return name in SECRET_KEYS or (name.startswith(("MAM_", "MQTT_")) and name.endswith(SECRET_SUFFIXES))


def redact(value: str) -> str:
    return "***" if value else ""


def load_settings(
    *,
    env_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    required_env_file: bool = False,
) -> Settings:
    """Build Settings from defaults, then `env_file` (if it exists), then `environ`."""
    environ = os.environ if environ is None else environ
    values = {k.name: k.default for k in KEYS}
    sources = {k.name: "default" for k in KEYS}
    extra: dict[str, str] = {}
    roles: dict[str, str] = {}
    role_sources: dict[str, str] = {}
    warnings: list[str] = []
    used_file: Path | None = None
    if env_file is not None and (required_env_file or os.path.lexists(env_file)):
        check_path(env_file, what="settings file")  # another user's file could name a program mam runs
        used_file = env_file
        for entry in parse_env_file(env_file):
            if entry.key in values:
                values[entry.key] = entry.value
                sources[entry.key] = f"{env_file}:{entry.line}"
            elif entry.key.startswith(ROLE_CAP_PREFIX):
                roles[entry.key] = entry.value
                role_sources[entry.key] = f"{env_file}:{entry.line}"
            else:
                extra[entry.key] = entry.value
                warnings.append(unknown_key_warning(entry.key, f"{env_file}:{entry.line}"))
    for key in KEYS:
        if key.name in environ:
            if key.name in CAP_KEYS and sources[key.name] != "default":
                values[key.name], sources[key.name] = lowered_only(
                    values[key.name], sources[key.name], environ[key.name]
                )
            else:
                values[key.name], sources[key.name] = environ[key.name], "environment"
    for name, value in environ.items():
        if name.startswith(ROLE_CAP_PREFIX) and len(name) > len(ROLE_CAP_PREFIX):
            if name in roles:
                roles[name], role_sources[name] = lowered_only(roles[name], role_sources[name], value)
            else:
                roles[name], role_sources[name] = value, "environment"
    return _build(
        values,
        sources,
        env_file=used_file,
        extra_env=extra,
        warnings=tuple(warnings),
        role_caps=roles,
        role_sources=role_sources,
    )


# The workspace's caps and budgets (0: none). Set in `.mam.env`, they are the workspace's: a caller's
# environment may lower them for its own jobs, never raise or remove them (MAM_MAX_RUNNING_JOBS_<ROLE>
# too). Unset in `.mam.env`, the environment sets them as any other key.
CAP_KEYS = frozenset({"MAM_MAX_RUNNING_JOBS", "MAM_TOKEN_BUDGET", "MAM_TOKEN_BUDGET_DAILY", "MAM_ORG_DAILY_RUNS"})


def lowered_only(workspace: str, source: str, environment: str) -> tuple[str, str]:
    """The cap that holds when `.mam.env` says `workspace` (from `source`) and the environment says
    `environment`: the environment's if it is lower (0 is no cap, so never lower), else the workspace's."""
    try:
        mine, theirs = int(workspace.strip()), int(environment.strip())
    except ValueError:
        return environment, "environment"  # not a number: validation names it
    if mine == 0 or theirs < 0 or (theirs > 0 and theirs < mine):
        return environment, f"environment (lowers {source})" if mine else "environment"
    if theirs == mine:
        return workspace, source
    return workspace, f"{source} (the environment's {environment.strip()} ignored: a workspace cap can only be lowered)"


def _build(
    values: dict[str, str],
    sources: dict[str, str],
    *,
    env_file: Path | None,
    extra_env: Mapping[str, str],
    warnings: tuple[str, ...],
    role_caps: Mapping[str, str] | None = None,
    role_sources: Mapping[str, str] | None = None,
) -> Settings:
    """The one place Settings are made: validate every value, then give each key its typed field."""
    _validate(values, sources)
    typed: dict[str, Any] = {key.field: _typed(key, values[key.name]) for key in KEYS}  # checked by a test
    by_role: dict[str, int] = {}
    for name, raw in (role_caps or {}).items():
        try:
            cap = int(raw.strip())
            if cap < 0:
                raise ValueError("must not be negative")
        except ValueError as e:
            raise ConfigError(f"{name}={raw.strip()!r}: {e}", key=name) from e
        by_role[role_key(name.removeprefix(ROLE_CAP_PREFIX))] = cap
    return Settings(
        values=values,
        sources=sources,
        env_file=env_file,
        extra_env=extra_env,
        warnings=warnings,
        max_running_jobs_by_role=by_role,
        role_cap_sources=dict(role_sources or {}),
        **typed,
    )


def _typed(key: Key, value: str) -> str | int | float | bool:
    if key.kind == "int":
        return int(value)
    if key.kind == "float":
        return float(value)
    if key.kind == "bool":
        return value.strip().lower() in _TRUE
    return value.strip() if key.name == "MQTT_BROKER" else value


@dataclass(frozen=True)
class BrokerAddress:
    """One MQTT_BROKER entry."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def parse_broker_list(value: str, default_port: int) -> tuple[BrokerAddress, ...]:
    """MQTT_BROKER's `host[:port]` entries, comma-separated ("" gives none); ValueError names a bad entry."""
    if not value.strip():
        return ()
    out: list[BrokerAddress] = []
    for raw in value.split(","):
        entry = raw.strip()
        if not entry:
            raise ValueError("an empty entry (two commas, or a comma at an end)")
        host, port_text = _split_host_port(entry)
        if port_text is None:
            port = default_port
        else:
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise ValueError(f"entry {entry!r}: the port must be 1-65535")
            port = int(port_text)
        address = BrokerAddress(host, port)
        if address in out:
            raise ValueError(f"entry {entry!r} is listed twice")
        out.append(address)
    return tuple(out)


def _split_host_port(entry: str) -> tuple[str, str | None]:
    if "://" in entry:
        raise ValueError(f"entry {entry!r}: give host[:port], without a scheme (MQTT_TLS=1 selects TLS)")
    if entry.startswith("["):
        inside, bracket, rest = entry[1:].partition("]")
        if not bracket or not inside or not all(c in "0123456789abcdefABCDEF:." for c in inside) or ":" not in inside:
            raise ValueError(f"entry {entry!r}: an IPv6 address goes in brackets, [::1] or [::1]:1884")
        if rest and not rest.startswith(":"):
            raise ValueError(f"entry {entry!r}: only :port may follow the brackets")
        return inside, rest[1:] if rest else None
    if entry.count(":") > 1:
        raise ValueError(f"entry {entry!r}: put an IPv6 address in brackets, [{entry}] or [ADDRESS]:PORT")
    host, colon, port = entry.partition(":")
    if not host or not all(c in _HOST_CHARS for c in host):
        raise ValueError(f"entry {entry!r}: a host is a name or an address (letters, digits, '.', '-', '_')")
    return host, port if colon else None


def unknown_key_warning(name: str, where: str) -> str:
    """`where: unknown key NAME (did you mean CLOSEST?)`; the value is never shown."""
    close = difflib.get_close_matches(name.upper(), KEYS_BY_NAME, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else " (mam ignores it; `mam config` lists the known keys)"
    return f"{where}: unknown key {name}{hint}"


def positive_seconds(value: float, what: str) -> float:
    """`value` if it is a finite number of seconds that stays above 0 when counted in whole milliseconds."""
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{what} must be a positive, finite number of seconds (got {value})", key=what)
    if int(value * 1000) == 0:
        raise UsageError(f"{what} {value} rounds to 0 ms; give at least 0.001 seconds", key=what)
    return value


def _validate(values: Mapping[str, str], sources: Mapping[str, str]) -> None:
    for key in KEYS:
        value = values[key.name].strip()
        where = sources[key.name]
        try:
            if key.kind == "int":
                number = int(value)
                if number < 0:
                    raise ValueError("must not be negative")
            elif key.kind == "float":
                fnumber = float(value)
                if not (math.isfinite(fnumber) and fnumber > 0):
                    raise ValueError("must be a positive, finite number")
                if key.name.endswith("_S") and int(fnumber * 1000) == 0:
                    raise ValueError("rounds to 0 ms; give at least 0.001 seconds")
            elif key.kind == "bool" and value.lower() not in _TRUE | _FALSE:
                raise ValueError("must be 1/0, true/false, yes/no or on/off")
        except ValueError as e:
            shown = "***" if key.secret else repr(value)
            raise ConfigError(f"{key.name}={shown} ({where}): {e}", key=key.name) from e
    if values["MAM_BACKEND"].strip() not in ("tmux", "herdr"):
        raise ConfigError(f"MAM_BACKEND must be tmux or herdr ({sources['MAM_BACKEND']})", key="MAM_BACKEND")
    port = int(values["MQTT_PORT"])
    if not 0 < port < 65536:
        raise ConfigError(f"MQTT_PORT={port} is not a TCP port ({sources['MQTT_PORT']})", key="MQTT_PORT")
    try:
        parse_broker_list(values["MQTT_BROKER"], port)
    except ValueError as e:
        raise ConfigError(f"MQTT_BROKER ({sources['MQTT_BROKER']}): {e}", key="MQTT_BROKER") from e
    broker_port = int(values["MAM_BROKER_PORT"])
    if not 0 <= broker_port < 65536:
        raise ConfigError(
            f"MAM_BROKER_PORT={broker_port} is not a TCP port, 1-65535 or 0 for any free one "
            f"({sources['MAM_BROKER_PORT']})",
            key="MAM_BROKER_PORT",
        )
    tls_files = [values[n].strip() for n in ("MQTT_TLS_CERT", "MQTT_TLS_KEY")]
    if bool(tls_files[0]) != bool(tls_files[1]):
        raise ConfigError("MQTT_TLS_CERT and MQTT_TLS_KEY go together: set both or neither", key="MQTT_TLS_CERT")


def example_env_text() -> str:
    """The text of `.mam.env.example`: every key, its meaning and its default, each commented out, so a
    `.mam.env` made from it holds only what the user sets (`mam config` shows those as set in the file)."""
    lines = [
        "# mam settings for this workspace. Copy to .mam.env (deploy/generate-env.sh does it).",
        "# The process environment wins over this file. Lines are KEY=VALUE; '#' starts a comment;",
        "# values may be quoted with '...' or \"...\".",
        "# Every key is listed commented out, at its default: to set one, remove its '# ' and change",
        "# the value (`mam config` then shows it as set here, every other as its default).",
        "",
    ]
    for key in KEYS:
        lines.append(f"# {key.doc}")
        lines.append(f"# {key.name}={_quote(key.default)}")
        lines.append("")
    return "\n".join(lines)


def _quote(value: str) -> str:
    return value if value and all(c.isalnum() or c in "._-/:" for c in value) else (f'"{value}"' if value else "")
