"""The click options of a request, made from its one declaration: a delegation's (mam/jobs/request.py
`OPTIONS`), a session's creation (mam/sessions/options.py), a loop's (mam/loop/options.py), a routine's
(mam/protocol.py `ROUTINE_ADD`). The MCP tools take their parameters from the same declarations
(mam/mcp/server.py `signature`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import click

from mam.cli.common import F, brief_options
from mam.jobs.request import BY_NAME, OPTIONS, Option
from mam.protocol import Field


def request_options(*names: str) -> Callable[[F], F]:
    """A decorator adding the CLI options of the named request options (none named: every one with a flag),
    in declaration order, each passed to the command under its request field name (`--timeout` as
    `timeout_s`). `brief` adds `--brief` and `--brief-file` (brief_options)."""
    chosen = [BY_NAME[n] for n in names] if names else [o for o in OPTIONS if o.flag]
    return field_options(chosen)


def field_options(fields: Iterable[Field], *, skip: Iterable[str] = ()) -> Callable[[F], F]:
    """A decorator adding the CLI option of each field with a flag (but those named in `skip`), in declaration
    order, each passed to the command under its field name. `brief` adds `--brief` and `--brief-file`."""
    chosen = [f for f in fields if f.flag and f.name not in set(skip)]

    def apply(f: F) -> F:
        for opt in reversed(chosen):  # click lists options in the order their decorators are written
            f = brief_options(f) if opt.name == "brief" else click_option(opt)(f)
        return f

    return apply


def click_option(opt: Option) -> Any:
    """One option as click declares it."""
    if opt.kind is bool:
        return click.option(opt.flag, opt.name, is_flag=True, help=opt.help_text)
    kind: Any = {str: None, float: float, int: int if opt.least is None else click.IntRange(min=opt.least)}[opt.kind]
    if opt.choices:
        kind = click.Choice(opt.choices)
    extra: dict[str, Any] = {"metavar": opt.metavar} if opt.metavar else {}
    if opt.value is not None:
        # Only a real default: click (8.2 on) takes an explicit `default=None` as a value that satisfies
        # `required`, so a missing required option reached the command as None ("invalid role None").
        extra["default"] = opt.value
    return click.option(opt.flag, opt.name, type=kind, required=opt.required, help=opt.help_text, **extra)
