"""Agent-originated text on a terminal: what an agent reported (a result, a report, progress, an
error, a tool name) is printed by mam's commands, and a terminal obeys escape sequences in it (an
OSC 52 sets the clipboard, others retitle the window, move the cursor or rewrite what was shown).

`for_terminal` removes every escape sequence (7-bit and 8-bit CSI, OSC, DCS, SOS, PM, APC, and the
short ESC forms) and every other C0 or C1 control character, keeping only newline and tab.
`json_text` is JSON whose string values carry controls only as escapes (`\\u001b`, `\\u009b`): the
json module escapes C0 but writes DEL and C1 as they are when `ensure_ascii` is off.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SEQUENCES = re.compile(
    r"""
    \x1b\[[0-?]*[ -/]*[@-~]?                     # CSI ... final byte
  | \x1b[\]PX^_].*?(?:\x07|\x1b\\|\x9c|$)       # OSC, DCS, SOS, PM, APC ... BEL or ST
  | \x1b[ -/]*[0-~]?                             # the short forms (ESC 7, ESC ( B, ESC c ...)
  | \x9b[0-?]*[ -/]*[@-~]?                       # 8-bit CSI
  | [\x90\x98\x9d\x9e\x9f].*?(?:\x07|\x9c|\x1b\\|$)  # 8-bit OSC, DCS, SOS, PM, APC
    """,
    re.X | re.S,
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f]")


def for_terminal(text: object) -> str:
    """`text` without escape sequences or control characters other than newline and tab."""
    return _CONTROLS.sub("", _SEQUENCES.sub("", str(text)))


def json_text(obj: Any, *, indent: int | None = None, sort_keys: bool = True) -> str:
    """JSON of `obj` (non-ASCII text as is) with every control character written as an escape."""
    out = json.dumps(obj, indent=indent, sort_keys=sort_keys, ensure_ascii=False, default=str)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)
