"""Hosts as Linux network namespaces on this machine, joined by one bridge, for multi-host runs.

Every host is a namespace `mam<run>-<label>` with its own loopback and one veth (`eth0`, an address in
10.231.<net>.0/24) whose other end sits on a bridge inside a switch namespace `mam<run>-sw`. Nothing is
added to the machine's own namespace: its services and interfaces are never addressed, and deleting the
namespaces (close()) removes every link. A host is cut off by setting its switch-side link down, and
joined again by setting it up. Needs root (CAP_NET_ADMIN) and iproute2's `ip`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
from dataclasses import dataclass, field


def available() -> str:
    """ "" when namespaces can be made here, else why not."""
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    return ""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=20)


@dataclass
class NsHost:
    label: str
    ns: str
    addr: str
    link: str  # the veth end on the bridge (in the switch namespace)

    def argv(self, *command: str) -> list[str]:
        """`command` run inside this host's namespace (the environment passes through unchanged)."""
        return ["ip", "netns", "exec", self.ns, *command]

    def pids(self) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", self.ns], capture_output=True, text=True, timeout=10).stdout
        return [int(p) for p in out.split()]


@dataclass
class Net:
    run: str = field(default_factory=lambda: secrets.token_hex(2))
    net: int = 231
    hosts: dict[str, NsHost] = field(default_factory=dict)
    switch: str = ""

    def __post_init__(self) -> None:
        self.switch = f"mam{self.run}-sw"
        _ip("netns", "add", self.switch)
        self._in(self.switch, "link", "set", "lo", "up")
        self._in(self.switch, "link", "add", "br0", "type", "bridge")
        self._in(self.switch, "link", "set", "br0", "up")

    def _in(self, ns: str, *args: str) -> None:
        _ip("-n", ns, *args)

    def add(self, label: str) -> NsHost:
        """A new host on the bridge, with the next address."""
        index = len(self.hosts) + 1
        ns, inner, outer = f"mam{self.run}-{label}", f"m{self.run}h{index}", f"m{self.run}s{index}"
        _ip("netns", "add", ns)
        try:
            self._in(ns, "link", "set", "lo", "up")
            self._in(ns, "link", "add", inner, "type", "veth", "peer", "name", outer, "netns", self.switch)
            self._in(ns, "link", "set", inner, "name", "eth0")
            addr = f"10.{self.net}.{index // 250}.{index % 250 + 1}"
            self._in(ns, "addr", "add", f"{addr}/16", "dev", "eth0")
            self._in(ns, "link", "set", "eth0", "up")
            self._in(self.switch, "link", "set", outer, "master", "br0")
            self._in(self.switch, "link", "set", outer, "up")
        except BaseException:
            _ip("netns", "del", ns)
            raise
        host = NsHost(label, ns, addr, outer)
        self.hosts[label] = host
        return host

    def cut(self, label: str) -> None:
        """The host's link down on the bridge: nothing goes in or out (its loopback still works)."""
        self._in(self.switch, "link", "set", self.hosts[label].link, "down")

    def join(self, label: str) -> None:
        self._in(self.switch, "link", "set", self.hosts[label].link, "up")

    def close(self) -> None:
        """Kill what still runs in the hosts' namespaces, then delete every namespace (and so every link)."""
        for host in self.hosts.values():
            for pid in host.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for ns in [h.ns for h in self.hosts.values()] + [self.switch]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
        self.hosts.clear()
