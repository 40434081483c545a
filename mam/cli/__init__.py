"""The `mam` command line: click groups loaded lazily so `mam --help` stays fast.

Each command parses its options, calls one library function, prints the result and
maps MamError subclasses to exit codes. No command imports paho, amqtt or libtmux
until it runs.
"""

from __future__ import annotations

import gc
import importlib
import sys

import click

from mam import __version__
from mam.cli.common import App, run_cli

COMMANDS = {
    "broker": ("mam.cli.broker", "broker", "Start, stop or inspect the workspace's embedded MQTT broker."),
    "board": (
        "mam.cli.board",
        "board",
        "The workspace's blackboard: versioned keys shared and watched over the broker (set, get, list, watch).",
    ),
    "budget": (
        "mam.cli.budget",
        "budget",
        "Show the running-job caps and token budgets: committed, reserved, remaining; running and queued jobs.",
    ),
    "config": ("mam.cli.config", "config", "Print every setting, its value (secrets redacted) and where it came from."),
    "session": ("mam.cli.session", "session", "Create, stop, resume and inspect agent sessions."),
    "status": ("mam.cli.session", "status", "Short for `mam session status` (same options)."),
    "job": ("mam.cli.job", "job", "Delegate jobs to sessions and inspect them."),
    "event": ("mam.cli.event", "event", "Agent side: publish a signed event about the job you are working on."),
    "hook": ("mam.cli.hook", "hook", "Agent CLI side: turn one lifecycle hook call into activity (always exits 0)."),
    "routine": (
        "mam.cli.routine",
        "routine",
        "Delegations the node fires on a schedule (--every, --cron), on demand or on a signed webhook.",
    ),
    "role": (
        "mam.cli.org",
        "role",
        "The org's roles: the session that plays each, whom it reports to, daily run caps and circuit breakers.",
    ),
    "task": (
        "mam.cli.org",
        "task",
        "The org's tasks: work the node wakes on its role's session once its blockers are done (add, list, show...).",
    ),
    "pause": ("mam.cli.hold", "pause", "Hold the workspace: pause every open job, type nothing until `resume --all`."),
    "resume": ("mam.cli.hold", "resume", "Release the workspace's hold and resume every paused job."),
    "loop": ("mam.cli.loop", "loop", "Run planner / creator / reviewer rounds until every reviewer passes."),
    "worktree": ("mam.cli.worktree", "worktree", "Prepare and remove issue worktrees for creator sessions."),
    "monitor": ("mam.cli.monitor", "monitor", "Reconcile the registry with panes and job events (reconcile.sh)."),
    "node": (
        "mam.cli.node",
        "node",
        "The workspace's node: runs every job of this host (started on demand); status, stop, --name for remote jobs.",
    ),
    "runner": (
        "mam.cli.node",
        "runner",
        "Take remote jobs for this host's sessions (an alias of `mam node --name`).",
    ),
    "doctor": (
        "mam.cli.doctor",
        "doctor",
        "Check the workspace's files, owners, registry, mirror and broker; restore sessions from the mirror.",
    ),
    "demo": ("mam.cli.demo", "demo", "Run a self-contained demo: demo agents, jobs and a review loop."),
    "tail": ("mam.cli.tail", "tail", "Follow every job transition, event and loop step, live (never starts anything)."),
    "top": ("mam.cli.top", "top", "A live full-screen view of sessions, open jobs and loops (--snapshot: print one)."),
    "web": (
        "mam.cli.web",
        "web",
        "Serve a live page of sessions, jobs and loops to a browser (loopback; a token link; cancel a job).",
    ),
    "mcp": (
        "mam.cli.mcp",
        "mcp",
        "Serve sessions, jobs and loops to an MCP client (stdio, or --http with a bearer token).",
    ),
}


class LazyGroup(click.Group):
    """A group whose sub-commands are imported only when they are invoked or listed in detail."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module = importlib.import_module(spec[0])
        return getattr(module, spec[1])  # type: ignore[no-any-return]

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0]) if args else ""
        if args and name not in COMMANDS and not name.startswith("-"):
            import difflib  # a typo's suggestion only: every other command spares its import

            close = difflib.get_close_matches(name, COMMANDS, n=1, cutoff=0.6)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help from the table above, so `mam --help` imports no command module.
        rows = [(name, COMMANDS[name][2]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="mam")
@click.option(
    "--workspace",
    "-w",
    metavar="DIR",
    help="Workspace folder (default: $MAM_WORKSPACE, else the nearest folder up with .mam/ or .mam.env, "
    "else an error: run deploy/install.sh DIR first).",
)
@click.option("--env-file", metavar="PATH", help="Settings file to read instead of <workspace>/.mam.env.")
@click.pass_context
def cli(ctx: click.Context, workspace: str | None, env_file: str | None) -> None:
    """mam: run long-lived coding agents in panes and delegate signed, tracked jobs to them.

    Exit codes: 0 ok; 1 failure; 2 bad settings or usage (for `job delegate`: timeout);
    3 broker unavailable; 4 already running elsewhere; 5 not delivered / not found;
    6 refused or stopped by a token budget (`job delegate`).
    Each command's --help lists its own.
    """
    ctx.obj = App(workspace_arg=workspace, env_file_arg=env_file)


def main(argv: list[str] | None = None) -> None:

    code = run_cli(cli, argv)
    # The process ends here. Freezing the heap spares the interpreter collecting and freeing every
    # imported module's cycles on the way out (~10 ms of each `mam event`, which agents run once per
    # event); atexit handlers still run and files still close. Python never promised __del__ at exit.
    gc.freeze()
    sys.exit(code)
