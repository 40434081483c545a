"""The herdr backend: one named herdr session (server) per workspace, driven through its socket API.

Each mam session is one tab of the herdr workspace labelled `mam`, made with `layout.apply` whose
pane runs the launcher as an argv command (no shell), which execs the agent. Briefs go in with
`pane.send_input` (sent as a bracketed paste when the program enabled it), keys with
`pane.send_keys`, screens come from `pane.read`, and pids from `pane.process_info`.

Every operation starts with a `ping` that refuses protocols mam does not know (`server_running`
only asks whether something answers). One request per connection, as herdr's protocol has it.
Looking (`server_running`, `pane`, `panes`, `capture`) never starts a server and creates no socket.
herdr closes a pane when its process exits, so an exited agent's pane is gone (`pane()` is None)
rather than listed dead as with tmux.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mam.errors import HerdrProtocolError, PaneError
from mam.panes.base import PaneInfo
from mam.panes.herdr_client import UNIX_PATH_MAX, HerdrClient, accepts_connections
from mam.panes.herdr_config import (
    check_session_name,
    config_dir,
    leftover_sockets,
    socket_path,
    user_config_path,
    write_session_config,
)
from mam.settings import Settings
from mam.util.launch import launcher_argv, write_spec
from mam.util.poll import Timeout, wait_for
from mam.util.proc import find_program, python_bin, spawn_detached
from mam.workspace import Workspace

log = logging.getLogger(__name__)

WORKSPACE_LABEL = "mam"
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0
PASTE_TIMEOUT_S = 120.0
READ_MAX_LINES = 1000  # pane.read caps `lines` at 1000
NAMED_KEYS = {
    "enter": "enter",
    "escape": "esc",
    "esc": "esc",
    "tab": "tab",
    "btab": "shift+tab",
    "bspace": "backspace",
    "backspace": "backspace",
    "space": "space",
    "up": "up",
    "down": "down",
    "left": "left",
    "right": "right",
    "-": "minus",
    "+": "plus",
}
MODIFIERS = {"C": "ctrl", "M": "alt", "S": "shift"}


class HerdrBackend:
    kind = "herdr"

    def __init__(self, server: str, *, settings: Settings, ws: Workspace, socket: str = "") -> None:
        """`socket`: the API socket a session's row recorded (`<config dir>/sessions/<name>/herdr.sock`),
        used whatever this process's XDG_CONFIG_HOME, HOME or HERDR_CONFIG_DIR say; "" to find it from them."""
        self.server = check_session_name(server)
        self.settings = settings
        self.ws = ws
        if socket:
            self.socket_path = Path(socket)
            self.config_dir = self.socket_path.parent.parent.parent
        else:
            self.config_dir = config_dir(settings)
            self.socket_path = socket_path(self.config_dir, server).absolute()
        self.client = HerdrClient(self.socket_path, server=server)
        self._proc: subprocess.Popen[bytes] | None = None  # a server this object started

    @property
    def socket(self) -> str:
        return str(self.socket_path)

    # -- server -------------------------------------------------------------------------------
    def server_running(self) -> bool:
        return self.client.answers()

    def ensure_server(self) -> None:
        if self._live():
            return
        if self.settings.no_autostart:
            raise PaneError(f"herdr server {self.server!r} is not running and MAM_NO_AUTOSTART=1", server=self.server)
        self._start()

    def _start(self) -> None:
        if self.config_dir.name != "herdr":
            raise PaneError(
                f"HERDR_CONFIG_DIR={self.config_dir} must be a folder named 'herdr': herdr puts session sockets "
                "under $XDG_CONFIG_HOME/herdr",
                server=self.server,
            )
        if len(os.fsencode(self.socket_path)) > UNIX_PATH_MAX:
            raise PaneError(f"herdr socket path too long for a Unix socket: {self.socket_path}", server=self.server)
        cfg = write_session_config(self.ws, self.server, user_config_path(self.config_dir))
        logfile = self.ws.state / "herdr" / f"{self.server}.server.log"
        program = self.settings.herdr_bin or "herdr"
        # By absolute path: never a `herdr` a relative PATH entry finds in a working folder.
        argv = [find_program(program) or program, "--session", self.server, "server"]
        try:
            if not os.path.isabs(argv[0]):
                raise FileNotFoundError(f"{program} is not on PATH")
            proc = spawn_detached(argv, log=logfile, env=_server_env(self.config_dir, cfg), cwd=self.ws.root)
        except OSError as e:
            raise PaneError(
                f"cannot run herdr ({argv[0]}): {e}; install herdr or set HERDR_BIN", server=self.server
            ) from e
        self._proc = proc

        def up() -> bool:
            if proc.poll() is not None:
                tail = logfile.read_text(errors="replace")[-1500:] if logfile.exists() else ""
                raise PaneError(
                    f"herdr server {self.server!r} exited ({proc.returncode}) before answering: {tail}",
                    server=self.server,
                )
            return self.client.answers()

        try:
            wait_for(
                up,
                timeout=START_TIMEOUT_S,
                message=f"herdr server {self.server!r} did not answer on {self.socket_path}",
            )
            self.client.check_protocol()
        except (Timeout, HerdrProtocolError) as e:
            self._stop_started()
            if isinstance(e, Timeout):
                raise PaneError(str(e), server=self.server) from e
            raise

    def _stop_started(self) -> None:
        """Stop the server this object started, by its own process handle."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self._remove_leftovers()

    def _remove_leftovers(self) -> None:
        for path in leftover_sockets(self.config_dir, self.server):
            if path.exists() and not accepts_connections(path):
                path.unlink(missing_ok=True)

    # -- panes --------------------------------------------------------------------------------
    def create_pane(self, *, name: str, argv: Sequence[str], cwd: str, env: Mapping[str, str]) -> PaneInfo:
        self.ensure_server()
        spec = write_spec(self.ws.run_dir, argv=argv, cwd=cwd, env=env)
        command = launcher_argv(python_bin(self.settings.agent_python_bin), spec)
        label = _label(name)
        try:
            workspace_id, first_tab = self._workspace(cwd)
            root = {"type": "pane", "label": label, "cwd": cwd, "command": command}
            result = self.client.call(
                "layout.apply", {"workspace_id": workspace_id, "tab_label": label, "focus": False, "root": root}
            )
        except PaneError:
            spec.unlink(missing_ok=True)
            raise
        pane_id = _pane_id_of(result)
        if first_tab:
            try:  # the shell tab workspace.create made; only tidiness is lost if it stays
                self.client.call("tab.close", {"tab_id": first_tab})
            except PaneError as e:
                log.info("could not close herdr tab %s: %s", first_tab, e)
        info = self._info_by_id(pane_id)
        # herdr closes a pane whose program exits; one that ended already is reported gone.
        return info or PaneInfo(pane_id=pane_id, pid=None, dead=True, command="", cwd=cwd, name=label)

    def _workspace(self, cwd: str) -> tuple[str, str | None]:
        """The id of the `mam` workspace, creating it if needed (then also the id of its shell tab)."""
        for workspace in _items(self.client.call("workspace.list"), "workspaces"):
            if workspace.get("label") == WORKSPACE_LABEL:
                return str(workspace["workspace_id"]), None
        created = self.client.call("workspace.create", {"cwd": cwd, "label": WORKSPACE_LABEL, "focus": False})
        new, tab = created.get("workspace"), created.get("tab")
        if not isinstance(new, dict) or "workspace_id" not in new:
            raise HerdrProtocolError(
                f"herdr workspace.create answered without a workspace: {created!r}", server=self.server
            )
        return str(new["workspace_id"]), (str(tab["tab_id"]) if isinstance(tab, dict) and "tab_id" in tab else None)

    def pane(self, pane_id: str) -> PaneInfo | None:
        return self._info_by_id(pane_id) if self._live() else None

    def panes(self) -> list[PaneInfo]:
        if not self._live():
            return []
        found = (self._info(p) for p in _items(self.client.call("pane.list"), "panes"))
        return [info for info in found if info is not None]

    def paste(self, pane_id: str, text: str) -> None:
        # send_input's text goes in as one paste, bracketed when the program enabled mode 2004.
        self._pane_call("pane.send_input", {"pane_id": pane_id, "text": text}, timeout=PASTE_TIMEOUT_S)

    def paste_and_capture(self, pane_id: str, text: str, lines: int = 200) -> str:
        self.paste(pane_id, text)  # one request per connection: two requests
        return self.capture(pane_id, lines)

    def send_keys(self, pane_id: str, *keys: str) -> None:
        if keys:
            self._pane_call("pane.send_keys", {"pane_id": pane_id, "keys": [herdr_key(k) for k in keys]})

    def type_text(self, pane_id: str, text: str) -> None:
        if text:
            self._pane_call("pane.send_text", {"pane_id": pane_id, "text": text})

    def exit_status(self, pane_id: str) -> int | None:
        return None  # herdr removes a pane whose program exited: no status is kept

    def capture(self, pane_id: str, lines: int = 200) -> str:
        if not self._live():
            return ""
        params = {
            "pane_id": pane_id,
            "source": "recent",
            "lines": max(1, min(lines, READ_MAX_LINES)),
            "format": "text",
            "strip_ansi": True,
        }
        try:
            read = self.client.call("pane.read", params).get("read")
        except PaneError as e:
            if _not_found(e):
                return ""
            raise
        return str(read.get("text", "")) if isinstance(read, dict) else ""

    def kill_pane(self, pane_id: str) -> None:
        if self._live():
            self._close_quietly("pane.close", {"pane_id": pane_id})

    def kill_server(self) -> None:
        if self._live():
            try:
                self.client.call("server.stop")
            except PaneError as e:
                if getattr(e, "code", "") not in ("unreachable", "connection"):
                    raise  # a server may drop the connection as it stops; anything else is a real failure
            try:
                wait_for(
                    self._gone,
                    timeout=STOP_TIMEOUT_S,
                    message=f"herdr server {self.server!r} still answers after server.stop",
                )
            except Timeout as e:
                raise PaneError(str(e), server=self.server) from e
        if self._proc is not None:
            self._stop_started()  # reap it (it has stopped) so it leaves no zombie
        self._remove_leftovers()

    # -- helpers ------------------------------------------------------------------------------
    def _live(self) -> bool:
        """False if no server answers; True once a server answered ping with a protocol mam knows."""
        if not self.socket_path.exists():
            return False  # never let a probe create anything
        try:
            self.client.check_protocol()
        except PaneError as e:
            if getattr(e, "code", "") in ("unreachable", "path_too_long"):
                return False
            raise
        return True

    def _gone(self) -> bool:
        try:
            return not self.client.answers()
        except PaneError:
            return False  # the server is closing connections: not gone yet

    def _pane_call(self, method: str, params: dict[str, Any], *, timeout: float | None = None) -> None:
        self.client.check_protocol()
        self.client.call(method, params, timeout=timeout)

    def _close_quietly(self, method: str, params: dict[str, Any]) -> None:
        try:
            self.client.call(method, params)
        except PaneError as e:
            if not _not_found(e):
                raise

    def _info_by_id(self, pane_id: str) -> PaneInfo | None:
        try:
            pane = self.client.call("pane.get", {"pane_id": pane_id}).get("pane")
        except PaneError as e:
            if _not_found(e):
                return None
            raise
        return self._info(pane) if isinstance(pane, dict) else None

    def _info(self, pane: dict[str, Any]) -> PaneInfo | None:
        pane_id = str(pane.get("pane_id", ""))
        try:
            proc = self.client.call("pane.process_info", {"pane_id": pane_id}).get("process_info")
        except PaneError as e:
            if _not_found(e):
                return None  # closed while we looked
            raise
        proc = proc if isinstance(proc, dict) else {}
        pid = proc.get("shell_pid")
        pid = pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None
        return PaneInfo(
            pane_id=pane_id,
            pid=pid,
            dead=False,  # herdr removes a pane whose process exited
            command=_command(proc, pid),
            cwd=str(pane.get("foreground_cwd") or pane.get("cwd") or ""),
            name=str(pane.get("label") or ""),
        )


def herdr_key(name: str) -> str:
    """A tmux-style key name (Enter, C-c, Escape, M-x, BTab...) as a herdr key-combo string."""
    if name.lower() in NAMED_KEYS:
        return NAMED_KEYS[name.lower()]
    if len(name) >= 2 and name[0].upper() == "F" and name[1:].isdigit() and 1 <= int(name[1:]) <= 12:
        return name.lower()
    mods = []
    rest = name
    while len(rest) > 2 and rest[1] == "-" and rest[0].upper() in MODIFIERS:
        mods.append(MODIFIERS[rest[0].upper()])
        rest = rest[2:]
    if mods and (len(rest) == 1 or rest.lower() in NAMED_KEYS):
        base = NAMED_KEYS.get(rest.lower(), rest.lower())
        return "+".join([*mods, base])
    if len(name) == 1 and name.isprintable():
        return name
    raise PaneError(
        f"unknown key name {name!r} for herdr: use Enter, Escape, Tab, BSpace, C-x, M-x, F1..F12 or one character"
    )


def _server_env(cfg_dir: Path, cfg: Path) -> dict[str, str]:
    """The environment of a server mam starts: no HERDR_* inherited from an enclosing herdr pane."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERDR_")}
    env["HERDR_CONFIG_PATH"] = str(cfg)
    env["XDG_CONFIG_HOME"] = str(cfg_dir.parent)
    return env


def _items(result: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = result.get(key)
    if not isinstance(items, list):
        raise HerdrProtocolError(f"herdr answered without a {key!r} list: {str(result)[:200]}")
    return [item for item in items if isinstance(item, dict)]


def _pane_id_of(result: dict[str, Any]) -> str:
    layout = result.get("layout")
    layout = layout if isinstance(layout, dict) else {}
    root = layout.get("root")
    pane_id = (root.get("pane_id") if isinstance(root, dict) else None) or layout.get("focused_pane_id")
    if not pane_id:
        raise HerdrProtocolError(f"herdr layout.apply did not report the new pane: {str(result)[:200]}")
    return str(pane_id)


def _command(proc: dict[str, Any], pid: int | None) -> str:
    foreground = [p for p in proc.get("foreground_processes") or [] if isinstance(p, dict)]
    chosen = next((p for p in foreground if p.get("pid") == pid), foreground[0] if foreground else None)
    if chosen is None:
        return ""
    return str(chosen.get("name") or os.path.basename(str(chosen.get("argv0") or "")))


def _not_found(e: PaneError) -> bool:
    return "not_found" in str(getattr(e, "code", ""))


def _label(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:64] or "agent"
