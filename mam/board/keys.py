"""What a board key and value may be, checked before anything is read or written."""

from __future__ import annotations

import re

from mam.errors import UsageError

KEY_MAX = 200
VALUE_MAX_BYTES = 64 * 1024
_KEY = re.compile(rf"[a-z0-9._/-]{{1,{KEY_MAX}}}\Z")
_PREFIX = re.compile(rf"[a-z0-9._/-]{{0,{KEY_MAX}}}\Z")


def check_key(key: object) -> str:
    if not isinstance(key, str) or not _KEY.match(key):
        raise UsageError(f"invalid board key {key!r}: 1 to {KEY_MAX} characters of a-z, 0-9, '.', '_', '/' or '-'")
    # A key reads like a path (plan/step): `plan/../secret` would name `secret` to any tool that normalises it.
    if any(part in (".", "..") for part in key.split("/")):
        raise UsageError(f"invalid board key {key!r}: no '.' or '..' between slashes")
    return key


def check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise UsageError(f"invalid board prefix {prefix!r}: a-z, 0-9, '.', '_', '/' or '-' only")
    return prefix


def check_value(value: object) -> str:
    if not isinstance(value, str):
        raise UsageError("a board value is text")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise UsageError("the board value is not valid text (a lone surrogate)") from e
    if size > VALUE_MAX_BYTES:
        raise UsageError(f"the board value is {size} bytes; the limit is {VALUE_MAX_BYTES} (64 KiB)")
    if "\x00" in value:
        raise UsageError("the board value holds a NUL character")
    return value
