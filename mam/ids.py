"""The one validator for every id that names a file, a folder, a row or a topic level: job ids,
session, runner and role names, loop ids. Called where an id enters (the CLI, a dispatch's
intake, the MCP server) before anything is written, so no id can reach a path it does not name.

An id is 1 to `limit` characters from [A-Za-z0-9._-], starting with a letter or digit: never
`.` or `..`, never a path separator, an MQTT wildcard, a space or a control character.
"""

from __future__ import annotations

from mam.errors import UsageError

# [A-Za-z0-9][A-Za-z0-9._-]*, checked without `re`: the thin client
# (mam.node.client) may import this module, and `re` alone costs them a few milliseconds.
_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_REST = _FIRST | frozenset("._-")
_REST_COLON = _REST | {":"}
JOB_ID_MAX = 128  # also the envelope's and the topic level's limit
NAME_MAX = 64
SHOWN = 80  # how much of a refused id the message repeats


def check_id(value: object, what: str = "job id", *, limit: int = JOB_ID_MAX, colon: bool = False) -> str:
    """Return `value` if it is a valid id, else raise UsageError (exit 2) naming `what`. `colon`: ':' is
    allowed too (an idempotency key, which names a registry row only, never a file or a topic level)."""
    if isinstance(value, str) and len(value) <= limit and _well_formed(value, colon=colon):
        return value
    shown = value[:SHOWN] + "..." if isinstance(value, str) and len(value) > SHOWN else value
    chars = "'.', '_', '-' or ':'" if colon else "'.', '_' or '-'"
    raise UsageError(
        f"invalid {what} {shown!r}: use 1-{limit} letters, digits, {chars}, starting with a letter or digit"
    )


def _well_formed(value: str, *, colon: bool = False) -> bool:
    rest = _REST_COLON if colon else _REST
    return bool(value) and value[0] in _FIRST and rest.issuperset(value)


def is_name(value: object) -> bool:
    return isinstance(value, str) and len(value) <= NAME_MAX and _well_formed(value)


def check_job_id(value: object) -> str:
    return check_id(value, "job id")


def check_name(value: object, what: str = "session name") -> str:
    """A session, runner, role or server name."""
    return check_id(value, what, limit=NAME_MAX)


def check_loop_id(value: object) -> str:
    return check_id(value, "loop id")


NONCE_MAX = 64
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


def check_nonce(value: object) -> str:
    """A brief's nonce (typed back by the agent and by a reminder): 1-64 letters and digits."""
    if isinstance(value, str) and 0 < len(value) <= NONCE_MAX and _ALNUM.issuperset(value):
        return value
    raise UsageError(f"invalid nonce {str(value)[:SHOWN]!r}: use 1-{NONCE_MAX} letters or digits")
