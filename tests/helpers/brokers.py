"""Real MQTT brokers for tests, each on a free loopback port, started and stopped by its own Popen handle."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mam.broker.embedded import free_port  # noqa: E402,F401  (re-exported for tests)
from mam.broker.embedded import port_accepts as accepts  # noqa: E402,F401
from mam.broker.endpoint import BrokerEndpoint
from mam.util.poll import wait_for


class Loopback:
    """A broker on 127.0.0.1 at `self.port`: how mam reaches it."""

    port: int

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def endpoint(self) -> BrokerEndpoint:
        return BrokerEndpoint(host=self.host, port=self.port)

    def env(self) -> dict[str, str]:
        """Settings that point mam at this broker."""
        return {"MQTT_BROKER": self.host, "MQTT_PORT": str(self.port)}


@dataclass
class RunningBroker(Loopback):
    kind: str
    port: int
    proc: subprocess.Popen[bytes]
    workdir: Path
    argv: list[str] = field(default_factory=list)
    log: Path | None = None

    def stop(self, sig: int = signal.SIGINT) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def restart(self) -> None:
        """Start again on the same port (after stop or kill)."""
        self.stop()
        wait_for(lambda: not accepts(self.port), timeout=10, message="old broker still listening")
        self.proc = _spawn(self.argv, self.log)
        _wait_ready(self)

    @property
    def running(self) -> bool:
        return self.proc.poll() is None


def _spawn(argv: list[str], log: Path | None) -> subprocess.Popen[bytes]:
    out = open(log, "ab") if log else subprocess.DEVNULL
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    finally:
        if log:
            out.close()


def _wait_ready(b: RunningBroker) -> None:
    def ready() -> bool:
        if b.proc.poll() is not None:
            text = b.log.read_text(errors="replace") if b.log and b.log.exists() else ""
            raise RuntimeError(f"{b.kind} broker exited early: {text[-2000:]}")
        return accepts(b.port)

    wait_for(ready, timeout=20, interval=0.02, message=f"{b.kind} broker not accepting on {b.port}")


def start_amqtt(workdir: Path | None = None) -> RunningBroker:
    workdir = workdir or Path(tempfile.mkdtemp(prefix="mam-amqtt-"))
    port = free_port()
    argv = [sys.executable, "-m", "mam.broker.serve", "--port", str(port)]
    log = workdir / "amqtt.log"
    b = RunningBroker("amqtt", port, _spawn(argv, log), workdir, argv, log)
    _wait_ready(b)
    return b


def mosquitto_bin() -> str | None:
    return shutil.which("mosquitto") or (
        str(Path("/usr/sbin/mosquitto")) if Path("/usr/sbin/mosquitto").exists() else None
    )


def start_mosquitto(workdir: Path | None = None, *, extra_conf: str = "", port: int | None = None) -> RunningBroker:
    binary = mosquitto_bin()
    if binary is None:
        raise FileNotFoundError("mosquitto")
    workdir = workdir or Path(tempfile.mkdtemp(prefix="mam-mosq-"))
    port = port or free_port()
    conf = workdir / "mosquitto.conf"
    conf.write_text(
        extra_conf
        or f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest stderr\nlog_type error\n"
        "log_type warning\n"
        "set_tcp_nodelay true\n"  # as docs/broker.md advises: no ~40 ms wait for a delayed ACK on each round trip
    )
    argv = [binary, "-c", str(conf)]
    log = workdir / "mosquitto.log"
    b = RunningBroker("mosquitto", port, _spawn(argv, log), workdir, argv, log)
    _wait_ready(b)
    return b


def mosquitto_required() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def now() -> float:
    return time.monotonic()
