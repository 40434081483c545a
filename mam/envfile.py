"""Parser for `.mam.env` files: KEY=VALUE lines, comments, quoted values.

It owns the file syntax only; which keys mean what is `settings`' business.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mam.errors import ConfigError

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# The first word of a malformed line is named only if it looks like a key (upper case) and more
# follows it: a lone word, or a lower-case one, may be a password pasted on its own line.
_KEY_PREFIX = re.compile(r"[A-Z_][A-Z0-9_]*(?=\s+\S)")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "$": "$"}


@dataclass(frozen=True)
class EnvEntry:
    key: str
    value: str
    line: int


def parse_env_text(text: str, *, source: str = "<string>") -> list[EnvEntry]:
    """Parse the text of an env file; raise ConfigError naming `source` and the line."""
    entries: list[EnvEntry] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, rest = line.partition("=")
        key = key.strip()
        if not sep or not _KEY.match(key):
            # Never echo the line: past its first word it may hold a password ("MQTT_PASSWORD hunter2").
            raise ConfigError(f"{source}:{number}: {_malformed(line)}", path=source, line=number)
        try:
            value = _parse_value(rest)
        except ValueError as e:
            raise ConfigError(f"{source}:{number}: {e}", path=source, line=number) from e
        entries.append(EnvEntry(key, value, number))
    return entries


def _malformed(line: str) -> str:
    """What is wrong with a line that is not KEY=VALUE, naming its key (if it starts with one) and nothing else."""
    lead = _KEY_PREFIX.match(line)
    if lead is not None:
        return f"key {lead.group()}: expected KEY=VALUE, with '=' right after the key (the value is not shown)"
    if "=" not in line:
        return "expected KEY=VALUE (the line is not shown)"
    return "invalid key before '=': letters, digits and '_', not starting with a digit (the line is not shown)"


def parse_env_file(path: Path) -> list[EnvEntry]:
    """Read and parse an env file; a missing or unreadable file is a ConfigError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise ConfigError(f"env file not found: {path}", path=str(path)) from e
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read env file {path}: {e}", path=str(path)) from e
    return parse_env_text(text, source=str(path))


def _parse_value(raw: str) -> str:
    """The value after '='; error messages never include it (it may be a secret)."""
    rest = raw.strip()
    if not rest:
        return ""
    quote = rest[0]
    if quote in ("'", '"'):
        end = _closing_quote(rest, quote)
        if end < 0:
            raise ValueError(f"unterminated {quote} quote")
        trailing = rest[end + 1 :].strip()
        if trailing and not trailing.startswith("#"):
            raise ValueError("unexpected text after the closing quote")
        body = rest[1:end]
        return _unescape(body) if quote == '"' else body
    # Unquoted: an inline comment needs a space before '#', so 'a#b' stays whole
    # and 'KEY= # note' is empty (split the unstripped text: the space after '=' counts).
    value = re.split(r"\s#", raw, maxsplit=1)[0].strip()
    if any(c in value for c in "\"'"):
        raise ValueError("stray quote in unquoted value")
    return value


def _closing_quote(rest: str, quote: str) -> int:
    i = 1
    while i < len(rest):
        if quote == '"' and rest[i] == "\\":
            i += 2
            continue
        if rest[i] == quote:
            return i
        i += 1
    return -1


def _unescape(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body) and body[i + 1] in _ESCAPES:
            out.append(_ESCAPES[body[i + 1]])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)
