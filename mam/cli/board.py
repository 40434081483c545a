"""`mam board set|get|list|watch|delete`."""

from __future__ import annotations

import getpass
import json
import os

import click

from mam.board.keys import check_key, check_prefix, check_value
from mam.cli.common import App, echo, echo_json, open_registry, workspace_option
from mam.outcomes import Exit
from mam.util import interrupts
from mam.util.text import for_terminal

BOARD_HELP = """The workspace's blackboard: versioned text values that agents and people share.

\b
Keys: 1-200 characters of a-z 0-9 . _ / -; values: text up to 64 KiB.
Every write raises the key's version, is recorded (who: $MAM_SESSION or your user name; when)
and is published retained and signed, so `mam board watch` here and in every workspace sharing
the broker and MAM_TOPIC_PREFIX sees it (see MESSAGING.md, Board messages).
A session's agent may use the board only if the session was created with --board.

\b
Exit codes: 0 ok; 2 bad key, value or option (nothing written); 3 broker unavailable (watch);
5 no such key, or --if-version is not the key's current version (nothing written).
"""


@click.group("board", help=BOARD_HELP)
def board() -> None:
    pass


def _writer() -> str:
    return os.environ.get("MAM_SESSION", "") or getpass.getuser()


def _open(app: App):  # type: ignore[no-untyped-def]
    """The registry, for a write (made if the workspace has none yet)."""
    from mam.board.store import check_writer

    registry = open_registry(app)
    check_writer(registry, os.environ.get("MAM_SESSION", ""))
    return registry


def _look(app: App):  # type: ignore[no-untyped-def]
    """The registry if the workspace has one, for a read (looking creates nothing); else None."""
    from mam.board.store import check_writer
    from mam.store.registry import Registry

    registry = Registry.open_existing(app.ws)
    if registry is not None:
        check_writer(registry, os.environ.get("MAM_SESSION", ""))
    return registry


@board.command("set")
@workspace_option
@click.argument("key")
@click.argument("value")
@click.option(
    "--if-version",
    type=int,
    default=None,
    help="Compare-and-set: write only if the key is at version N (0: only if it does not exist); else exit 5.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the written entry as JSON.")
@click.pass_obj
def set_(app: App, key: str, value: str, if_version: int | None, as_json: bool) -> None:
    """Set KEY to VALUE at the next version (exit 5 on a stale --if-version)."""
    from mam.board.store import write

    check_key(key)
    check_value(value)
    out = write(app.ws, app.settings, _open(app), key, value, writer=_writer(), if_version=if_version)
    _report(out, as_json)


@board.command("delete")
@workspace_option
@click.argument("key")
@click.option("--if-version", type=int, default=None, help="Delete only if the key is at version N; else exit 5.")
@click.option("--json", "as_json", is_flag=True, help="Print the deletion (its new version) as JSON.")
@click.pass_obj
def delete(app: App, key: str, if_version: int | None, as_json: bool) -> None:
    """Delete KEY (a write: its version is raised; exit 5 if there is no such key)."""
    from mam.board.store import write

    check_key(key)
    out = write(app.ws, app.settings, _open(app), key, None, writer=_writer(), if_version=if_version)
    _report(out, as_json)


def _report(out, as_json: bool) -> None:  # type: ignore[no-untyped-def]
    if as_json:
        echo_json(out.as_dict())
    else:
        what = "deleted" if out.entry.deleted else "set"
        echo(f"{out.entry.key}: {what}, version {out.entry.version}")
    if not out.published:
        echo(f"mam: warning: written but not published (watchers did not see it): {out.detail}", err=True)


@board.command("get")
@workspace_option
@click.argument("key")
@click.option("--json", "as_json", is_flag=True, help="Print {key, value, version, writer, ts}.")
@click.pass_obj
def get(app: App, key: str, as_json: bool) -> None:
    """Print KEY's value (exit 5 if there is no such key)."""
    from mam.board.store import get as get_entry

    check_key(key)
    entry = get_entry(_look(app), key)
    if as_json:
        echo_json(entry.as_dict())
    else:
        echo(for_terminal(entry.value))


@board.command("list")
@workspace_option
@click.option("--prefix", default="", help="Only keys that start with P.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {key, value, version, writer, ts}.")
@click.pass_obj
def list_(app: App, prefix: str, as_json: bool) -> None:
    """List the board's keys, in key order."""
    from mam.board.store import list_keys

    check_prefix(prefix)
    entries = list_keys(_look(app), prefix)
    if as_json:
        echo_json([e.as_dict() for e in entries])
        return
    for e in entries:
        first = for_terminal(e.value.splitlines()[0] if e.value else "")
        echo(f"{e.key}  v{e.version}  {for_terminal(e.writer)}  {first}")


@board.command("watch")
@workspace_option
@click.option("--prefix", default="", help="Only keys that start with P.")
@click.option("--count", type=click.IntRange(min=1), default=None, help="Exit after N writes were shown.")
@click.option("--timeout", type=float, default=None, help="Exit after S seconds (default: run until interrupted).")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object a line: {board, key, value, version, writer, ts, deleted, remote}.",
)
@click.pass_obj
def watch(app: App, prefix: str, count: int | None, timeout: float | None, as_json: bool) -> int:
    """Print every board write as it is published: this workspace's and, as read-only copies (remote),
    those of every workspace sharing the broker and MAM_TOPIC_PREFIX. The latest write of each key
    is shown first. A message whose signature does not check is rejected: reported on stderr and in
    .mam/board-rejected.log, never shown. Never starts a broker (exit 3 if none is running)."""
    from mam.board.watch import watch as follow
    from mam.bus.connect import open_client

    check_prefix(prefix)
    registry = _look(app)
    if registry is not None:
        registry.close()
    client = open_client(app.settings, app.ws, role="board-watch", autostart=False)

    def shown(msg, remote: bool) -> None:  # type: ignore[no-untyped-def]
        if as_json:
            echo(json.dumps({**msg.as_dict(), "remote": remote}, sort_keys=True, ensure_ascii=False))
        else:
            where = f"{msg.board}:" if remote else ""
            value = "(deleted)" if msg.deleted else for_terminal(msg.value)
            echo(f"{where}{msg.key} v{msg.version} {for_terminal(msg.writer)}: {value}")

    def rejected(r) -> None:  # type: ignore[no-untyped-def]
        echo(f"mam: board: rejected a message on {for_terminal(r.topic)} ({r.reason})", err=True)

    def ready(topic: str) -> None:
        echo(f"mam: board: watching {for_terminal(topic)}", err=True)

    try:
        with interrupts.noted() as ctrl_c:  # the loop ends at its next look (mam.util.interrupts: why)
            follow(
                app.ws,
                app.settings,
                client,
                prefix=prefix,
                on_write=shown,
                on_reject=rejected,
                on_ready=ready,
                count=count,
                timeout_s=timeout,
                stop=lambda: ctrl_c.interrupted,
            )
    finally:
        client.close()
    return Exit.INTERRUPTED if ctrl_c.interrupted else Exit.OK  # as `mam tail`: Ctrl-C is 130, no "aborted" line
