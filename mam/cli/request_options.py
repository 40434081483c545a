"""The click options of a delegation, made from its one declaration (mam/jobs/request.py `OPTIONS`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from mam.cli.common import F, brief_options
from mam.jobs.request import BY_NAME, OPTIONS, Option


def request_options(*names: str) -> Callable[[F], F]:
    """A decorator adding the CLI options of the named request options (none named: every one with a flag),
    in declaration order, each passed to the command under its request field name (`--timeout` as
    `timeout_s`). `brief` adds `--brief` and `--brief-file` (brief_options)."""
    chosen = [BY_NAME[n] for n in names] if names else [o for o in OPTIONS if o.flag]

    def apply(f: F) -> F:
        for opt in reversed(chosen):  # click lists options in the order their decorators are written
            f = brief_options(f) if opt.name == "brief" else click_option(opt)(f)
        return f

    return apply


def click_option(opt: Option) -> Any:
    """One option as click declares it."""
    if opt.kind is bool:
        return click.option(opt.flag, opt.name, is_flag=True, help=opt.help_text)
    kind: Any = {str: None, float: float, int: click.IntRange(min=opt.least)}[opt.kind]
    return click.option(opt.flag, opt.name, type=kind, default=None, required=opt.required, help=opt.help_text)
