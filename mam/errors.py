"""The one error tree of mam.

Library code raises these; the CLI maps them to exit codes and one-line messages.
Messages never contain secrets (tokens, passwords, the dispatch secret).
"""

from __future__ import annotations

from mam.outcomes import Exit, Rejected


class MamError(Exception):
    """Raised when mam cannot do what it was asked; the root of every mam error."""

    exit_code: int = Exit.FAILED

    def __init__(self, message: str, **context: object) -> None:
        super().__init__(message)
        self.context = context
        for key, value in context.items():
            setattr(self, key, value)


class ConfigError(MamError):
    """Raised when settings, `.mam.env` or a command's options are invalid."""

    exit_code: int = Exit.USAGE


class UsageError(ConfigError):
    """Raised when a command's input is malformed (a bad name, an empty brief...)."""


class NotAWorkspace(UsageError):
    """Raised when no `--workspace`, no `MAM_WORKSPACE` and no `.mam/` or `.mam.env` here or above names one."""


class UntrustedFile(ConfigError):
    """Raised when `.mam.env`, `.mam/` or a pid file belongs to another user or others may write it."""


class WorkspaceError(MamError):
    """Raised when the workspace or its `.mam/` folder cannot be used."""


class StoreError(MamError):
    """Raised when the SQLite registry cannot be read or written."""


class RegistryDamaged(StoreError):
    """Raised when the registry file is empty, not a mam registry, or corrupt (never treated as new)."""


class BrokerError(MamError):
    """Raised when no MQTT broker can be reached or the embedded one cannot run."""

    exit_code: int = Exit.BROKER_UNAVAILABLE


class Unacknowledged(BrokerError):
    """A QoS 1 publish whose ack did not come in time after the message left: maybe sent (paho sends it
    again after a reconnect), so the receiver may still act on it."""


class PaneError(MamError):
    """Raised when a pane backend (tmux or herdr) fails or refuses a request."""


class HerdrProtocolError(PaneError):
    """Raised when a herdr server speaks a protocol version or shape mam does not know."""


class AgentError(MamError):
    """Raised when an agent CLI cannot be launched, found, stopped or resumed."""


class AgentNotInstalled(AgentError):
    """Raised when an agent's program is not on the pane's PATH (checked before anything starts)."""

    exit_code: int = Exit.USAGE


class AgentExited(AgentError):
    """Raised when an agent's program ended while its session was starting."""


class AgentDialog(AgentError):
    """Raised when the agent shows a dialog or permission prompt where mam would type: a person must answer it."""


class SessionError(MamError):
    """Raised when a session operation does not fit the session's state."""


class SessionNotFound(SessionError):
    """Raised when no session of that name is in the registry."""

    exit_code: int = Exit.NOT_FOUND


class SessionRefused(SessionError):
    """Raised when a session's state refuses the request (remove while running, resume with its worktree gone)."""

    exit_code: int = Exit.REFUSED


class JobError(MamError):
    """Raised when a job cannot be registered, found or driven."""


class Refused(MamError):
    """Raised for a library caller (the CLI's commands, the MCP server, a loop) when the node answered an
    operation with an error: its one line (`message`), exit code (`exit_code=`) and the name of the error
    it raised (`kind=`: "JobNotFound"...), as the node said them."""

    kind: str = ""


class EventTooLarge(JobError):
    """Raised when an event's signed envelope would exceed the wire's size limit even after cutting what may be cut."""


class JobNotFound(JobError):
    """Raised when no job of that id exists in this workspace."""

    exit_code: int = Exit.NOT_FOUND


class JobRefused(JobError):
    """Raised when a job's state refuses the request (`mam job send` to a job that is not running, or
    into an agent's input box that is not empty or under a dialog): nothing was typed."""

    exit_code: int = Exit.REFUSED


class FanoutInterrupted(JobError):
    """Raised when `mam job fanout` is interrupted: its jobs stay open, each to be re-attached by its id."""

    exit_code: int = Exit.INTERRUPTED


class DecodeError(MamError):
    """Raised when a wire message is not a well-formed, signed mam envelope."""

    def __init__(self, message: str, reason: Rejected, **context: object) -> None:
        super().__init__(message, **context)
        self.reason = reason


class LoopError(MamError):
    """Raised when a review loop cannot start or continue."""


class LoopNotFound(LoopError):
    """Raised when no loop of that id was started in this workspace."""

    exit_code: int = Exit.NOT_FOUND


class ApprovalRefused(LoopError):
    """Raised when a loop cannot be approved or rejected as asked (not waiting, or its branch moved since review)."""

    exit_code: int = Exit.REFUSED


class LockBusy(MamError):
    """Raised when a single-instance lock (loop, monitor, runner) is already held."""

    exit_code: int = Exit.LOCK_BUSY


class BoardError(MamError):
    """Raised when the board cannot read, write or publish a key."""


class BoardKeyNotFound(BoardError):
    """Raised when a board key was never written or has been deleted."""

    exit_code: int = Exit.NOT_FOUND


class StaleVersion(BoardError):
    """Raised when a board compare-and-set (`--if-version N`) names a version other than the key's current one."""

    exit_code: int = Exit.STALE_VERSION


class RoutineError(MamError):
    """Raised when a routine cannot be added, changed or fired."""


class RoutineNotFound(RoutineError):
    """Raised when no routine has the name given."""

    exit_code: int = Exit.NOT_FOUND


class RoutineExists(RoutineError):
    """Raised when `mam routine add` names a routine that exists already."""

    exit_code: int = Exit.USAGE


class OrgError(MamError):
    """Raised when a role or a task of the workspace's organisation cannot be added or changed (mam/org)."""


class RoleNotFound(OrgError):
    """Raised when no role has the name given."""

    exit_code: int = Exit.NOT_FOUND


class RoleExists(OrgError):
    """Raised when `mam role add` names a role that exists already."""

    exit_code: int = Exit.USAGE


class TaskNotFound(OrgError):
    """Raised when no task has the id given."""

    exit_code: int = Exit.NOT_FOUND


class OrgRefused(OrgError):
    """Raised when a role or task is not in a state that allows what was asked (a running task marked done, a
    role removed while it has open tasks)."""

    exit_code: int = Exit.REFUSED
