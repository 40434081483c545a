"""The delegate request's options, declared once in the node protocol (mam.protocol `DELEGATE`), and
their checks.

`mam job delegate`'s options (mam/node/front.py, mam/cli/request_options.py for its help), the MCP tool
`job_delegate`'s parameters (mam/mcp/server.py) and the request `delegate_request` builds
(mam/jobs/delegate.py) all come from `OPTIONS`; tests/unit/test_request_options.py holds them to it. A field
of `DelegateRequest` that is not an option (`follow_s`) is set by the node only. `kind` is on the CLI and
not offered over MCP.

Options that only change what the CLI prints or where the brief is read from stay declared in the CLI:
`--brief-file` (another way to give `brief`), `--follow/--quiet` and `--json` (presentation). `wait` is
the MCP tool's own (whether the call returns at delivery or at the end; `--detach` is the CLI's).
"""

from __future__ import annotations

import math

from mam.errors import UsageError
from mam.protocol import DELEGATE, Field
from mam.settings import positive_seconds

Option = Field
OPTIONS: tuple[Field, ...] = DELEGATE
BY_NAME = {o.name: o for o in OPTIONS}


def check_values(values: dict[str, object]) -> None:
    """UsageError naming the CLI flag for a number outside what its option allows (None: unset)."""
    for name, value in values.items():
        opt = BY_NAME.get(name)
        if opt is None or value is None:
            continue
        if opt.kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < (opt.least or 0)):
            raise UsageError(f"{opt.flag} must be a whole number of tokens, {opt.least or 0} or more")
        if opt.kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UsageError(f"{opt.flag} must be a number of seconds (got {value!r})")
            if opt.least is None:
                positive_seconds(float(value), opt.flag)
            elif not (math.isfinite(value) and value >= opt.least):
                raise UsageError(f"{opt.flag} must be a finite number of seconds, {opt.least} or more (got {value})")
