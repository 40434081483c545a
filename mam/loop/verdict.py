"""Strict review verdicts: pure parsing, no I/O.

A report passes only when its last non-empty line is exactly `[VERDICT: PASS]` (surrounding
whitespace allowed) and it holds no other verdict line. Anything else is NOT PASS, with a
reason a person can act on: the loop logs it and shows it in the summary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PASS_TOKEN = "[VERDICT: PASS]"
NOT_PASS_TOKEN = "[VERDICT: NOT PASS]"
TOKENS = (PASS_TOKEN, NOT_PASS_TOKEN)
# A line that looks like a verdict on its own (any case, any spacing), and a verdict mention anywhere.
_LOOKS_LIKE = re.compile(r"\[\s*verdict\s*:[^\]\n]*\]", re.I)
_MENTION = re.compile(r"\[\s*verdict\s*:", re.I)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str  # why it is NOT PASS ('' for PASS)
    wellformed: bool  # False: the verdict line is missing or malformed (the report counts as NOT PASS)

    @property
    def label(self) -> str:
        return "PASS" if self.passed else "NOT PASS"

    def as_dict(self) -> dict[str, object]:
        return {"verdict": self.label, "reason": self.reason, "wellformed": self.wellformed}


def _malformed(reason: str) -> Verdict:
    return Verdict(False, reason, False)


def parse_verdict(text: str) -> Verdict:
    """The verdict of one report; never raises."""
    lines = [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        return _malformed("the report is empty")
    standalone = [(n, s) for n, s in lines if _LOOKS_LIKE.fullmatch(s)]
    last_number, last = lines[-1]
    if len(standalone) > 1:
        where = ", ".join(str(n) for n, _ in standalone)
        return _malformed(f"{len(standalone)} verdict lines (lines {where}); exactly one is allowed, on the last line")
    if last in TOKENS:
        if last == PASS_TOKEN:
            return Verdict(True, "", True)
        return Verdict(False, "the reviewer's verdict is NOT PASS", True)
    if standalone:
        number, line = standalone[0]
        if number == last_number:
            return _malformed(
                f"malformed verdict line {_show(line)}: it must be exactly {PASS_TOKEN} or {NOT_PASS_TOKEN}"
            )
        return _malformed(f"the verdict line (line {number}) is not the last non-empty line of the report")
    inline = next((n for n, s in lines if _MENTION.search(s)), None)
    if inline is not None:
        return _malformed(f"the verdict is inline in a sentence (line {inline}); it must stand alone on the last line")
    return _malformed(f"no verdict line: the last non-empty line must be exactly {PASS_TOKEN} or {NOT_PASS_TOKEN}")


def _show(line: str, limit: int = 60) -> str:
    return repr(line if len(line) <= limit else line[:limit] + "...")
