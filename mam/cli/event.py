"""`mam [--workspace DIR] [--env-file F] event ...` through click: handed to the lean mam.event_cli.

`mam event ...` itself never gets here (mam.entry routes it to mam.event_cli without importing
click); this command is for the global options before `event`, so both spellings behave alike.
"""

from __future__ import annotations

import click

from mam.cli.common import App


@click.command(
    "event",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def event(app: App, args: tuple[str, ...]) -> int:
    """Agent side: report on the job in your brief (the brief's footer shows the exact commands)."""
    from mam.event_cli import main

    return main(list(args), workspace=app.workspace_arg, env_file=app.env_file_arg)
