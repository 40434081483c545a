"""`mam session create`'s options, declared once: the CLI's options (mam/cli/session.py) and the MCP tool
session_create's parameters (mam/mcp/server.py) are made from `CREATE`, and both hand them to
mam.sessions.create.start_session. `mcp=False`: the command line's only."""

from __future__ import annotations

from mam.agents import known_agents
from mam.outcomes import Exit
from mam.protocol import Field

AGENTS = ", ".join(known_agents())

CREATE: tuple[Field, ...] = (
    Field("agent", str, f"Agent CLI: {AGENTS}", flag="--agent", required=True),
    Field("role", str, "Role of the session (developer, reviewer, planner...)", flag="--role", required=True),
    Field("name", str, "Unique session name (letters, digits, . _ -)", flag="--session", required=True),
    Field("backend", str, "Pane backend", flag="--backend", choices=("tmux", "herdr"), default="MAM_BACKEND, tmux"),
    Field(
        "server", str, "tmux socket / herdr session name", flag="--server", mcp=False, default="mam-<workspace slug>"
    ),
    Field(
        "herdr_session",
        str,
        "herdr session (server) to use; implies --backend herdr",
        flag="--herdr-session",
        mcp=False,
    ),
    Field("cwd", str, "Folder the agent works in", flag="--cwd", default="the workspace"),
    Field(
        "permissions",
        str,
        "report: the agent may run `mam event ...` without a prompt, nothing more, except codex: it has no "
        "per-command rule, so every command in its sandbox may use the network and write under .mam/ (job records "
        "with their tokens), as `session status --json` says (`beyond_reporting`); full: the CLI's own "
        "skip-every-approval flag; ask: no permission option passed (the CLI asks for each tool call; for codex, "
        "the narrower mode)",
        flag="--permissions",
        choices=("ask", "report", "full"),
        value="report",
        default="report",
    ),
    Field(
        "board",
        bool,
        "Also let the agent run `mam board ...` without a prompt (adds it to the allow rule of --permissions "
        "report; `mam board` refuses a session created without it)",
        flag="--board",
    ),
    Field(
        "no_trust",
        bool,
        "Do not record the folder as trusted for the CLI; if the agent then asks whether to trust it, the create "
        "fails (mam never answers a dialog). A folder you marked untrusted in the CLI's own file is left so, and the "
        "create fails saying so",
        flag="--no-trust",
    ),
    Field(
        "token_budget",
        int,
        "Tokens this session's jobs may spend in all (0: no budget of its own); see `mam budget --help`",
        flag="--token-budget",
        mcp=False,
        least=0,
        value=0,
    ),
    Field(
        "onboard",
        bool,
        f"Send an onboarding job and wait for it (exit {Exit.ONBOARD_FAILED} failed, {Exit.ONBOARD_LATE} not ended "
        "in time)",
        flag="--onboard",
    ),
    Field(
        "onboard_timeout",
        float,
        "Seconds the onboarding job may take",
        flag="--onboard-timeout",
        mcp=False,
        default="MAM_START_DEADLINE_S",
    ),
    Field(
        "worktree",
        bool,
        "Start the agent in a new git worktree .mam/worktrees/NAME/ on its own branch (see --branch, --base)",
        flag="--worktree",
    ),
    Field("branch", str, "With --worktree: the new branch", flag="--branch", default="mam/NAME"),
    Field(
        "base",
        str,
        "With --worktree: the commit or branch the new branch starts from",
        flag="--base",
        metavar="REF",
        default="the branch checked out now, recorded by name so an approval merges back into it",
    ),
)
