"""A fake herdr server for tests: herdr's socket protocol in front of real processes on real ptys.

It speaks newline-delimited JSON over a Unix socket, one request per connection, and implements
the methods mam calls (ping, workspace.list/create, tab.close, layout.apply, pane.list/get/
process_info/send_text/send_keys/send_input/read/close, server.stop); anything else is an error.
Each pane is a child process with the pty slave as its controlling terminal; its output goes to a
bounded buffer that `pane.read` returns as plain text (ANSI stripped). Input goes to the pty master;
`send_input` wraps its text in ESC[200~ ... ESC[201~ only after the program printed ESC[?2004h.
Like herdr, a pane is closed when its process exits.

Run it in-process (`FakeHerdr(path).start()`, then `.stop()`), or as `tests/fakes/bin/herdr --session
NAME server`. FAKE_HERDR_PROTOCOL / FAKE_HERDR_VERSION set what `ping` reports. Stdlib only.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROTOCOL_ENV, VERSION_ENV = "FAKE_HERDR_PROTOCOL", "FAKE_HERDR_VERSION"
DEFAULT_PROTOCOL, DEFAULT_VERSION = 22, "0.9.0"
# Make the pty slave the controlling terminal, then become the program (same pid).
CTTY = "import fcntl,os,sys,termios\nfcntl.ioctl(0, termios.TIOCSCTTY, 0)\nos.execvp(sys.argv[1], sys.argv[1:])"
ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"
)
MODE = re.compile(rb"\x1b\[\?([0-9;]*)([hl])")
KEYS = {
    "enter": b"\r",
    "esc": b"\x1b",
    "escape": b"\x1b",
    "tab": b"\t",
    "shift+tab": b"\x1b[Z",
    "backspace": b"\x7f",
    "space": b" ",
    "up": b"\x1b[A",
    "down": b"\x1b[B",
    "right": b"\x1b[C",
    "left": b"\x1b[D",
    "minus": b"-",
    "plus": b"+",
}
OUTPUT_LIMIT = 4 * 1024 * 1024


class HerdrError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def encode_key(key: str) -> bytes:
    if key.lower() in KEYS:
        return KEYS[key.lower()]
    *mods, base = key.split("+") if len(key) > 1 else [key]
    if len(base) != 1 or any(m not in ("ctrl", "control", "alt") for m in mods):
        raise HerdrError("invalid_key", f"unsupported key {key!r}")
    out = bytes([ord(base.lower()) & 0x1F]) if ("ctrl" in mods or "control" in mods) else base.encode()
    return b"\x1b" + out if "alt" in mods else out


class Pane:
    """A child process on a pty; output kept as text, input written to the master."""

    def __init__(
        self,
        ids: dict[str, str],
        label: str,
        cwd: str,
        argv: list[str],
        env: dict[str, str],
        on_exit: Callable[[Pane], None],
    ) -> None:
        self.pane_id, self.workspace_id, self.tab_id = ids["pane"], ids["workspace"], ids["tab"]
        self.label, self.cwd, self.on_exit = label, cwd, on_exit
        self.raw, self.tail, self.revision, self.bracketed = bytearray(), b"", 0, False
        self.lock, self.write_lock = threading.Lock(), threading.Lock()
        master, slave = pty.openpty()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", CTTY, *argv],
                stdin=slave,
                stdout=slave,
                stderr=slave,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        self.master = master
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            if not select.select([self.master], [], [], 0.2)[0]:
                if self.proc.poll() is not None:
                    break  # exited, and nothing more to read
                continue
            try:
                chunk = os.read(self.master, 65536)
            except BlockingIOError:
                continue
            except OSError:
                break  # EIO: every slave descriptor is closed
            if not chunk:
                break
            self._feed(chunk)
        with self.write_lock:
            os.close(self.master)
            self.master = -1
        self.proc.wait()
        self.on_exit(self)

    def _feed(self, chunk: bytes) -> None:
        with self.lock:
            scan = self.tail + chunk
            for m in MODE.finditer(scan):
                if m.end() > len(self.tail) and b"2004" in m.group(1).split(b";"):
                    self.bracketed = m.group(2) == b"h"
            self.tail = scan[-32:]
            self.raw += chunk
            del self.raw[: max(0, len(self.raw) - OUTPUT_LIMIT)]
            self.revision += 1

    def write(self, data: bytes, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        with self.write_lock:
            view = memoryview(data)
            while view:
                if self.master < 0:
                    raise HerdrError("pane_not_found", f"pane {self.pane_id} exited")
                if not select.select([], [self.master], [], max(0.0, deadline - time.monotonic()))[1]:
                    raise HerdrError("timeout", f"pane {self.pane_id} did not take its input")
                try:
                    view = view[os.write(self.master, view[:65536]) :]
                except BlockingIOError:
                    continue

    def text(self, lines: int) -> str:
        with self.lock:
            data = bytes(self.raw).decode("utf-8", "replace")
        out = []
        for line in ANSI.sub("", data).replace("\r\n", "\n").split("\n"):
            shown = ""
            for segment in line.split("\r"):  # a carriage return overwrites from the left
                shown = segment + shown[len(segment) :]
            out.append(shown)
        if out and out[-1] == "":
            out.pop()
        return "\n".join(out[-lines:])

    def close(self) -> None:
        """Hang up like a closing terminal; kill the group if it ignores that."""
        for sig, delay in ((signal.SIGHUP, 0.0), (signal.SIGKILL, 3.0)):
            timer = threading.Timer(delay, self._signal, (sig,))
            timer.daemon = True
            timer.start()

    def _signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass


class FakeHerdr:
    """The server state (workspaces, tabs, panes) and the socket that serves it."""

    def __init__(
        self,
        socket_path: Path,
        *,
        protocol: int | None = None,
        version: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.protocol = int(os.environ.get(PROTOCOL_ENV, DEFAULT_PROTOCOL)) if protocol is None else protocol
        self.version = version or os.environ.get(VERSION_ENV, DEFAULT_VERSION)
        self.env = dict(os.environ if env is None else env)
        self.lock = threading.RLock()
        self.workspaces: dict[str, dict[str, Any]] = {}
        self.tabs: dict[str, dict[str, Any]] = {}
        self.panes: dict[str, Pane] = {}
        self.counter = {"workspace": 0, "terminal": 0}
        self.calls: list[str] = []
        self.stopped = threading.Event()
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._stop_lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------------
    def bind(self) -> None:
        self.socket_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.socket_path.exists():
            with socket.socket(socket.AF_UNIX) as probe:
                if probe.connect_ex(str(self.socket_path)) == 0:
                    raise RuntimeError(f"a server already listens on {self.socket_path}")
            self.socket_path.unlink()  # a dead server's leftover
        fake = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline(256 * 1024 * 1024)
                self.wfile.write(json.dumps(fake.answer(line), ensure_ascii=False).encode() + b"\n")

        server = socketserver.ThreadingUnixStreamServer(str(self.socket_path), Handler, bind_and_activate=True)
        server.daemon_threads, server.block_on_close = True, False
        self._server = server

    def start(self) -> FakeHerdr:
        self.bind()
        assert self._server is not None
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def serve_forever(self) -> None:
        self.bind()
        assert self._server is not None
        self._server.serve_forever(poll_interval=0.05)
        self.stopped.wait()

    def stop(self) -> None:
        with self._stop_lock:
            if self.stopped.is_set():
                return
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
            with self.lock:
                panes = list(self.panes.values())
                self.panes.clear()
            for pane in panes:
                pane.close()
            deadline = time.monotonic() + 5
            for pane in panes:
                try:
                    pane.proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pane._signal(signal.SIGKILL)
                    pane.proc.wait(5)
            self.socket_path.unlink(missing_ok=True)
            self.stopped.set()

    # -- protocol -------------------------------------------------------------------------------
    def answer(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
            request_id, method, params = str(request["id"]), str(request["method"]), request.get("params") or {}
        except (ValueError, KeyError, TypeError) as e:
            return {"id": "", "error": {"code": "invalid_request", "message": f"bad request: {e}"}}
        self.calls.append(method)
        handler = getattr(self, "m_" + method.replace(".", "_"), None)
        if handler is None:
            return {"id": request_id, "error": {"code": "unknown_method", "message": f"unknown method {method}"}}
        try:
            return {"id": request_id, "result": handler(params)}
        except HerdrError as e:
            return {"id": request_id, "error": {"code": e.code, "message": str(e)}}
        except (KeyError, TypeError, ValueError) as e:
            return {"id": request_id, "error": {"code": "invalid_params", "message": f"{method}: {e!r}"}}

    def m_ping(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"type": "pong", "version": self.version, "protocol": self.protocol}

    def m_server_stop(self, p: dict[str, Any]) -> dict[str, Any]:
        threading.Thread(target=self.stop, daemon=True).start()  # answer first, then go
        return {"type": "ok"}

    def m_workspace_list(self, p: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return {"type": "workspace_list", "workspaces": [self._workspace_info(w) for w in self.workspaces]}

    def m_workspace_create(self, p: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.counter["workspace"] += 1
            n = self.counter["workspace"]
            wid = f"w{n}"
            cwd = p.get("cwd") or os.getcwd()
            self.workspaces[wid] = {
                "number": n,
                "label": p.get("label") or Path(cwd).name,
                "cwd": cwd,
                "tabs": [],
                "next_tab": 1,
                "next_pane": 1,
            }
            pane = self._new_tab(wid, None, {"cwd": cwd, "env": p.get("env") or {}})
            return {
                "type": "workspace_created",
                "workspace": self._workspace_info(wid),
                "tab": self._tab_info(pane.tab_id),
                "root_pane": self._pane_info(pane),
            }

    def m_tab_close(self, p: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            tab = self._tab(p["tab_id"])
            if len(self.workspaces[tab["workspace_id"]]["tabs"]) == 1:
                raise HerdrError("invalid_target", "the last tab in a workspace cannot be closed")
            for pane_id in list(tab["panes"]):
                self.panes.pop(pane_id).close()
            self._drop_tab(p["tab_id"])
        return {"type": "ok"}

    def m_layout_apply(self, p: dict[str, Any]) -> dict[str, Any]:
        root = p["root"]
        if root.get("type") != "pane":
            raise HerdrError("invalid_layout", "this fake applies single-pane layouts only")
        with self.lock:
            wid = p.get("workspace_id") or next(iter(self.workspaces), None)
            if wid not in self.workspaces:
                raise HerdrError("workspace_not_found", f"workspace {wid} not found")
            pane = self._new_tab(wid, p.get("tab_label"), root)
            node = {
                "type": "pane",
                "pane_id": pane.pane_id,
                "label": pane.label,
                "cwd": pane.cwd,
                "command": root.get("command"),
                "env": {},
            }
            return {
                "type": "layout_apply",
                "layout": {
                    "workspace_id": wid,
                    "tab_id": pane.tab_id,
                    "zoomed": False,
                    "focused_pane_id": pane.pane_id,
                    "root": node,
                },
            }

    def m_pane_list(self, p: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            panes = [pane for pane in self.panes.values() if p.get("workspace_id") in (None, pane.workspace_id)]
            return {"type": "pane_list", "panes": [self._pane_info(pane) for pane in panes]}

    def m_pane_get(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"type": "pane_info", "pane": self._pane_info(self._pane(p["pane_id"]))}

    def m_pane_process_info(self, p: dict[str, Any]) -> dict[str, Any]:
        pane = self._pane(p["pane_id"])
        try:
            group = os.tcgetpgrp(pane.master)
        except OSError:
            group = 0
        group = group if group > 0 else pane.proc.pid  # 0 until the child has taken the tty
        info = {
            "pane_id": pane.pane_id,
            "shell_pid": pane.proc.pid,
            "foreground_process_group_id": group,
            "foreground_processes": _group_processes(group),
            "tty": None,
        }
        return {"type": "pane_process_info", "process_info": info}

    def m_pane_send_text(self, p: dict[str, Any]) -> dict[str, Any]:
        self._pane(p["pane_id"]).write(str(p["text"]).encode("utf-8"))
        return {"type": "ok"}

    def m_pane_send_keys(self, p: dict[str, Any]) -> dict[str, Any]:
        pane = self._pane(p["pane_id"])
        pane.write(b"".join(encode_key(str(k)) for k in p["keys"]))
        return {"type": "ok"}

    def m_pane_send_input(self, p: dict[str, Any]) -> dict[str, Any]:
        pane = self._pane(p["pane_id"])
        text = str(p.get("text") or "").encode("utf-8")
        keys = b"".join(encode_key(str(k)) for k in p.get("keys") or [])
        if text and pane.bracketed:
            text = b"\x1b[200~" + text + b"\x1b[201~"
        pane.write(text + keys)
        return {"type": "ok"}

    def m_pane_read(self, p: dict[str, Any]) -> dict[str, Any]:
        pane = self._pane(p["pane_id"])
        if p.get("source") not in ("visible", "recent", "recent_unwrapped"):
            raise HerdrError("invalid_params", "source must be visible, recent or recent_unwrapped")
        lines = max(1, min(int(p.get("lines") or 80), 1000))
        read = {
            "pane_id": pane.pane_id,
            "workspace_id": pane.workspace_id,
            "tab_id": pane.tab_id,
            "source": p["source"],
            "format": "text",
            "text": pane.text(lines),
            "revision": pane.revision,
            "truncated": False,
        }
        return {"type": "pane_read", "read": read}

    def m_pane_close(self, p: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            pane = self._pane(p["pane_id"])
            self._forget(pane)
        pane.close()
        return {"type": "ok"}

    # -- state ----------------------------------------------------------------------------------
    def _new_tab(self, wid: str, label: str | None, node: dict[str, Any]) -> Pane:
        ws = self.workspaces[wid]
        tid, ws["next_tab"] = f"{wid}:t{ws['next_tab']}", ws["next_tab"] + 1
        pid, ws["next_pane"] = f"{wid}:p{ws['next_pane']}", ws["next_pane"] + 1
        self.counter["terminal"] += 1
        argv = list(node.get("command") or [self.env.get("SHELL") or "/bin/sh"])
        cwd = str(node.get("cwd") or ws["cwd"])
        env = {
            **self.env,
            **(node.get("env") or {}),
            "HERDR_ENV": "1",
            "HERDR_SOCKET_PATH": str(self.socket_path),
            "HERDR_WORKSPACE_ID": wid,
            "HERDR_TAB_ID": tid,
            "HERDR_PANE_ID": pid,
        }
        if not argv or not all(isinstance(a, str) for a in argv) or shutil.which(argv[0], path=env.get("PATH")) is None:
            raise HerdrError("layout_apply_failed", f"cannot run {argv!r}")
        if not Path(cwd).is_dir():
            raise HerdrError("layout_apply_failed", f"no such directory {cwd}")
        pane = Pane(
            {"pane": pid, "workspace": wid, "tab": tid}, str(node.get("label") or ""), cwd, argv, env, self._exited
        )
        self.tabs[tid] = {
            "workspace_id": wid,
            "number": len(ws["tabs"]) + 1,
            "label": label or str(len(ws["tabs"]) + 1),
            "panes": [pid],
        }
        ws["tabs"].append(tid)
        self.panes[pid] = pane
        return pane

    def _exited(self, pane: Pane) -> None:
        with self.lock:
            if self.panes.get(pane.pane_id) is pane:
                self._forget(pane)

    def _forget(self, pane: Pane) -> None:
        self.panes.pop(pane.pane_id, None)
        tab = self.tabs.get(pane.tab_id)
        if tab is not None and pane.pane_id in tab["panes"]:
            tab["panes"].remove(pane.pane_id)
            if not tab["panes"]:
                self._drop_tab(pane.tab_id)

    def _drop_tab(self, tid: str) -> None:
        tab = self.tabs.pop(tid)
        ws = self.workspaces[tab["workspace_id"]]
        ws["tabs"].remove(tid)
        if not ws["tabs"]:
            del self.workspaces[tab["workspace_id"]]

    def _pane(self, pane_id: str) -> Pane:
        with self.lock:
            if pane_id not in self.panes:
                raise HerdrError("pane_not_found", f"pane {pane_id} not found")
            return self.panes[pane_id]

    def _tab(self, tab_id: str) -> dict[str, Any]:
        if tab_id not in self.tabs:
            raise HerdrError("tab_not_found", f"tab {tab_id} not found")
        return self.tabs[tab_id]

    def _workspace_info(self, wid: str) -> dict[str, Any]:
        ws = self.workspaces[wid]
        return {
            "workspace_id": wid,
            "number": ws["number"],
            "label": ws["label"],
            "focused": False,
            "tab_count": len(ws["tabs"]),
            "pane_count": sum(len(self.tabs[t]["panes"]) for t in ws["tabs"]),
            "active_tab_id": ws["tabs"][0],
            "agent_status": "unknown",
        }

    def _tab_info(self, tid: str) -> dict[str, Any]:
        tab = self.tabs[tid]
        return {
            "tab_id": tid,
            "workspace_id": tab["workspace_id"],
            "number": tab["number"],
            "label": tab["label"],
            "focused": False,
            "pane_count": len(tab["panes"]),
            "agent_status": "unknown",
        }

    def _pane_info(self, pane: Pane) -> dict[str, Any]:
        try:
            foreground_cwd: str | None = os.readlink(f"/proc/{pane.proc.pid}/cwd")
        except OSError:
            foreground_cwd = None
        return {
            "pane_id": pane.pane_id,
            "terminal_id": f"term_{pane.pane_id}",
            "workspace_id": pane.workspace_id,
            "tab_id": pane.tab_id,
            "focused": False,
            "cwd": pane.cwd,
            "foreground_cwd": foreground_cwd,
            "label": pane.label or None,
            "agent_status": "unknown",
            "revision": pane.revision,
        }


def _group_processes(group: int) -> list[dict[str, Any]]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
            if int(stat[stat.rfind(b")") + 2 :].split()[2]) != group:
                continue
            argv = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
            found.append(
                {
                    "pid": int(entry.name),
                    "name": (entry / "comm").read_text().strip(),
                    "argv": argv,
                    "argv0": argv[0] if argv else None,
                    "cwd": os.readlink(entry / "cwd"),
                }
            )
        except (OSError, ValueError, IndexError):
            continue
    return sorted(found, key=lambda p: p["pid"])


def main(argv: list[str]) -> int:
    """`herdr --session NAME server`: serve the named session until server.stop or SIGTERM."""
    if len(argv) != 3 or argv[0] != "--session" or argv[2] != "server":
        print("fake herdr: usage: herdr --session NAME server", file=sys.stderr)
        return 2
    name = argv[1]
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    session_dir = Path(xdg) / "herdr" / "sessions" / name
    config_path = Path(os.environ.get("HERDR_CONFIG_PATH") or Path(xdg) / "herdr" / "config.toml")
    config: dict[str, Any] = {}
    if config_path.exists():
        import tomllib

        try:
            config = tomllib.loads(config_path.read_text(encoding="utf-8"))
        except (ValueError, OSError) as e:
            print(f"fake herdr: config {config_path} not usable ({e}); using defaults", file=sys.stderr)
    fake = FakeHerdr(session_dir / "herdr.sock")
    session_dir.mkdir(parents=True, exist_ok=True)
    resume = config.get("session", {}).get("resume_agents_on_restore", True)
    state = {
        "pid": os.getpid(),
        "argv": sys.argv,
        "config_path": str(config_path),
        "resume_agents_on_restore": resume,
        "config": config,
    }
    (session_dir / "fake-server.json").write_text(json.dumps(state, default=str))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: threading.Thread(target=fake.stop, daemon=True).start())
    fake.serve_forever()
    return 0
