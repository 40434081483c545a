"""What every command shares: the lazily built workspace and settings, JSON output, error mapping."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from mam.errors import MamError, UsageError
from mam.outcomes import Exit
from mam.util.text import for_terminal, json_text

if TYPE_CHECKING:
    from mam.settings import Settings
    from mam.store.registry import Registry
    from mam.workspace import Workspace


@dataclass
class App:
    """The per-invocation context: resolves the workspace and settings once, on first use."""

    workspace_arg: str | None = None
    env_file_arg: str | None = None
    _ws: Workspace | None = field(default=None, repr=False)
    _settings: Settings | None = field(default=None, repr=False)

    @property
    def ws(self) -> Workspace:
        if self._ws is None:
            from mam.workspace import find_workspace

            self._ws = find_workspace(self.workspace_arg)
        return self._ws

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from mam.settings import load_settings

            if self.env_file_arg:
                self._settings = load_settings(env_file=Path(self.env_file_arg).absolute(), required_env_file=True)
            else:
                self._settings = load_settings(env_file=self.ws.env_file)
            _configure_logging(self._settings.log_level)
            for warning in self._settings.warnings:
                echo(f"mam: warning: {warning}", err=True)
        return self._settings


def _configure_logging(level: str) -> None:
    import logging

    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.WARNING), format="mam: %(levelname)s: %(message)s"
    )


def echo_json(obj: Any) -> None:
    """`--json` output: a control character in a string value (an agent's text) only as an escape."""
    click.echo(json_text(obj, indent=2))


def echo(text: object = "", *, err: bool = False, nl: bool = True) -> None:
    """How every command prints text: it may hold what an agent wrote (a result, a report, progress,
    an error), so escape sequences and control characters other than newline and tab are removed."""
    click.echo(for_terminal(text), err=err, nl=nl)


def run_cli(group: click.Group, argv: list[str] | None) -> int:
    """Run click in standalone=False mode and turn MamError into a message and an exit code."""
    try:
        rv = group.main(args=argv, prog_name="mam", standalone_mode=False)
    except MamError as e:
        echo(f"mam: error: {e}", err=True)
        return e.exit_code
    except click.exceptions.Abort:
        echo("mam: aborted", err=True)
        return Exit.INTERRUPTED
    except click.ClickException as e:
        e.show()
        return Exit.USAGE if isinstance(e, click.UsageError) else e.exit_code
    except click.exceptions.Exit as e:
        return e.exit_code
    except KeyboardInterrupt:
        echo("mam: interrupted", err=True)
        return Exit.INTERRUPTED
    except BrokenPipeError:
        # Output closed early (e.g. `mam ... | head`): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return Exit.OK
    except OSError as e:
        # The last net for a file mam could not write (disk full, read-only .mam/...): one line, no traceback.
        from mam.util.fs import describe_os_error

        echo(f"mam: error: {describe_os_error(e)}", err=True)
        return Exit.FAILED
    return rv if isinstance(rv, int) else Exit.OK


F = TypeVar("F", bound=Callable[..., Any])


def workspace_option(f: F) -> F:
    """`--workspace DIR` on a sub-command, same meaning as `mam --workspace DIR`."""

    def remember(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
        if value:
            ctx.ensure_object(App).workspace_arg = value
        return value

    return click.option(
        "--workspace",
        "-w",
        metavar="DIR",
        expose_value=False,
        callback=remember,
        is_eager=True,
        help="Workspace folder (same as `mam --workspace`).",
    )(f)


def brief_options(f: F) -> F:
    """`--brief TEXT` and `--brief-file F` ('-': stdin), as every command that hands out a brief takes them."""
    f = click.option(
        "--brief-file",
        type=click.Path(dir_okay=False, allow_dash=True),
        default=None,
        help="Read the brief from a file ('-': stdin).",
    )(f)
    return click.option("--brief", default=None, help="The brief text.")(f)


def open_registry(app: App) -> Registry:
    from mam.store.registry import Registry

    return Registry(app.ws)


def existing_registry(app: App, job_id: str) -> Registry:
    """For read-only job commands: the registry if the workspace has one (creates nothing), else JobNotFound."""
    from mam.ids import check_job_id
    from mam.jobs.queries import existing_registry as find

    check_job_id(job_id)
    return find(app.ws, job_id)


def read_brief(path: str) -> str:
    """`--brief-file PATH`'s text ('-': stdin); UsageError if it cannot be read."""
    if path == "-":
        return str(sys.stdin.read())
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read the brief file {path}: {e}") from e


def node_value(app: App, op: str, args: dict[str, Any], *, signals: bool = False) -> Any:
    """Run `op` of the node protocol for this command (mam.node.call: in the workspace's node, else here) and
    return its answer; its error as a MamError (the node's line and exit code), a bad field as UsageError.
    The settings' warnings the node sends are printed as every command prints them."""
    from mam.node.call import answer, call
    from mam.protocol import Invalid

    def said(frame: dict[str, Any]) -> None:
        if "warning" in frame:
            echo(f"mam: warning: {frame['warning']}", err=True)

    try:
        return answer(call(app.ws.root, op, args, on_frame=said, signals=signals))
    except Invalid as e:
        raise UsageError(str(e)) from None


def served_by_front() -> int:
    """The callback of a command the `mam` script runs in its lean front end (mam.node.front: `mam event`,
    `mam job delegate`, `mam job wait`): click declares its options for `--help` only. Reached only with a
    global option the front end does not take (`--env-file`): the node reads the workspace's `.mam.env`."""
    raise UsageError(
        "--env-file is not for this command: the node reads the workspace's .mam.env (set a variable in "
        "the environment instead)"
    )
