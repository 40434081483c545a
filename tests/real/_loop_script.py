"""What the scripted models do in the real-CLI review loops (test_loop_real.py, test_loop_roles.py): the
creator writes feature.txt at 'version 1', the fix makes it 'version 2'; a reviewer writes its report
file with NOT PASS in round 1 and PASS after."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.real.openai_server import Step

RUN_LOOP = Path(__file__).resolve().parents[2] / "skills" / "multi-agent-mux-loop" / "scripts" / "run_loop.sh"
TASK = "Add feature.txt holding the line 'version 2' and commit it."
CREATE = "printf 'version 1\\n' > feature.txt && git add feature.txt && git commit -q -m 'add feature.txt'"
FIX = "printf 'version 2\\n' > feature.txt && git commit -q -am 'feature.txt: version 2'"
REPORT_FILE = re.compile(r"^Report file: (?P<path>\S.*?)\s*$", re.M)
ROUND = re.compile(r"^Loop \S+, round (?P<n>\d+)\.$", re.M)


def reviewer_steps(text: str) -> list[Step]:
    """A reviewer's model: write the report file the review brief names; NOT PASS in round 1, PASS later."""
    report, round_ = REPORT_FILE.search(text), ROUND.search(text)
    if "[mam-loop: review]" not in text or report is None or round_ is None:
        return []
    first = int(round_.group("n")) == 1
    lines = [
        "# Review",
        "",
        "- feature.txt holds 'version 1'; the task asks for 'version 2'." if first else "- feature.txt is right.",
        "",
        "[VERDICT: NOT PASS]" if first else "[VERDICT: PASS]",
    ]
    return [Step("printf '%s\\n' " + " ".join(shlex.quote(line) for line in lines) + " > " + report.group("path"))]
