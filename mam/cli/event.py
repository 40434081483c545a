"""`mam [--workspace DIR] [--env-file F] event ...` through click: handed to the lean mam.event_cli.

`mam event ...` itself never gets here (mam.entry routes it to mam.fast_event and mam.event_cli
without importing click); this command is for the global options before `event` (and for a `mam`
script installed before mam.entry existed), so every spelling behaves alike.
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
    from mam.fast_event import run

    argv = list(args)
    if not app.env_file_arg:  # (the lean path reads no settings file: only its broker fallback would)
        code = run([*argv[:1], "--workspace", app.workspace_arg, *argv[1:]] if app.workspace_arg and argv else argv)
        if code is not None:
            return code
    return main(argv, workspace=app.workspace_arg, env_file=app.env_file_arg)
