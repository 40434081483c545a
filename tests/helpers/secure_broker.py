"""A secured Mosquitto for tests: TLS, passwords and a topic ACL per role, from docs/broker/.

`start_secure_broker(folder)` makes a throw-away CA, a server certificate (CN 127.0.0.1,
SAN IP:127.0.0.1 and DNS:localhost) and a client certificate with the `openssl` CLI, writes
the password file with `mosquitto_passwd`, renders the config and ACL templates that
docs/broker.md shows (docs/broker/*.tmpl), and starts Mosquitto through its own Popen handle
(tests/helpers/brokers.py). Every command is an argv list; nothing goes through a shell.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from string import Template

from mam.broker.endpoint import BrokerEndpoint
from mam.util.poll import wait_for
from tests.helpers.brokers import RunningBroker, accepts, free_port, mosquitto_bin, start_mosquitto

TEMPLATES = Path(__file__).resolve().parents[2] / "docs" / "broker"
ORCHESTRATOR = "orchestrator"
RUNNERS = ("runner-a", "runner-b")
PREFIX = "mam/secure-test"
SERVER_SAN = "IP:127.0.0.1,DNS:localhost"

_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def missing_tools() -> list[str]:
    """The executables this helper needs that are not installed."""
    found = {
        "mosquitto": mosquitto_bin(),
        "mosquitto_passwd": shutil.which("mosquitto_passwd"),
        "openssl": shutil.which("openssl"),
    }
    return [name for name, path in found.items() if path is None]


@dataclass(frozen=True)
class Pki:
    ca: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _run(argv: list[str], cwd: Path) -> None:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} {argv[1]} failed ({proc.returncode}): {proc.stderr.strip()[-1000:]}")


def make_pki(folder: Path, *, client_cn: str = ORCHESTRATOR) -> Pki:
    """A CA, a server certificate for 127.0.0.1/localhost and one client certificate (EC P-256, 7 days)."""
    folder.mkdir(parents=True, exist_ok=True)
    cnf = folder / "openssl.cnf"
    cnf.write_text(
        render("openssl.cnf.tmpl", server_san=SERVER_SAN)
    )  # `-config` keeps the system's openssl.cnf out of it
    pki = Pki(*(folder / name for name in ("ca.crt", "ca.key", "server.crt", "server.key", "client.crt", "client.key")))
    _run(
        [
            "openssl",
            "req",
            "-x509",
            "-new",
            "-config",
            str(cnf),
            "-extensions",
            "ca",
            *_EC,
            "-keyout",
            str(pki.ca_key),
            "-out",
            str(pki.ca),
            "-days",
            "7",
            "-subj",
            "/CN=mam test CA",
        ],
        folder,
    )
    for kind, cn, cert, key in (
        ("server", "127.0.0.1", pki.server_cert, pki.server_key),
        ("client", client_cn, pki.client_cert, pki.client_key),
    ):
        csr = folder / f"{kind}.csr"
        _run(
            [
                "openssl",
                "req",
                "-new",
                "-config",
                str(cnf),
                *_EC,
                "-keyout",
                str(key),
                "-out",
                str(csr),
                "-subj",
                f"/CN={cn}",
            ],
            folder,
        )
        _run(
            [
                "openssl",
                "x509",
                "-req",
                "-in",
                str(csr),
                "-CA",
                str(pki.ca),
                "-CAkey",
                str(pki.ca_key),
                "-set_serial",
                str(secrets.randbits(63)),
                "-days",
                "7",
                "-extfile",
                str(cnf),
                "-extensions",
                kind,
                "-out",
                str(cert),
            ],
            folder,
        )
    for key in (pki.ca_key, pki.server_key, pki.client_key):
        key.chmod(0o600)
    return pki


def write_passwords(path: Path, passwords: dict[str, str]) -> None:
    """A Mosquitto password file (hashed) for these users; `-b` takes the password from argv."""
    for i, (user, password) in enumerate(passwords.items()):
        _run(["mosquitto_passwd", *(["-c"] if i == 0 else []), "-b", str(path), user, password], path.parent)
    path.chmod(0o600)


def render(template: str, **values: object) -> str:
    """One of docs/broker/*.tmpl with its ${...} filled in (a missing value is an error)."""
    return Template((TEMPLATES / template).read_text()).substitute({k: str(v) for k, v in values.items()})


def acl_text(prefix: str, orchestrator: str = ORCHESTRATOR, runners: tuple[str, ...] = RUNNERS) -> str:
    return render("acl.tmpl", prefix=prefix, orchestrator=orchestrator) + "".join(
        render("acl-runner.tmpl", prefix=prefix, runner=runner) for runner in runners
    )


@dataclass
class SecureBroker:
    broker: RunningBroker
    pki: Pki
    passwords: dict[str, str]
    prefix: str
    folder: Path
    plain_port: int | None = None

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def tls_port(self) -> int:
        return self.broker.port

    @property
    def log(self) -> str:
        return self.broker.log.read_text(errors="replace") if self.broker.log and self.broker.log.exists() else ""

    def endpoint(
        self,
        user: str = ORCHESTRATOR,
        *,
        password: str | None = None,
        tls: bool = True,
        port: int | None = None,
        client_cert: bool = False,
        ca: str | None = None,
        host: str | None = None,
    ) -> BrokerEndpoint:
        """How `user` reaches the broker: the TLS listener by default; `tls=False` means the plain one."""
        chosen = port if port is not None else (self.tls_port if tls else self.plain_port)
        if chosen is None:
            raise ValueError("this broker has no plain listener")
        return BrokerEndpoint(
            host=host or self.host,
            port=chosen,
            username=user,
            password=self.passwords.get(user, "") if password is None else password,
            tls=tls,
            ca=str(self.pki.ca) if ca is None else ca,
            cert=str(self.pki.client_cert) if client_cert else "",
            key=str(self.pki.client_key) if client_cert else "",
        )

    def env(
        self, user: str = ORCHESTRATOR, *, password: str | None = None, client_cert: bool = False
    ) -> dict[str, str]:
        """The settings (as for .mam.env or the environment) that point mam at the TLS listener as `user`."""
        env = {
            "MQTT_BROKER": self.host,
            "MQTT_PORT": str(self.tls_port),
            "MQTT_TLS": "1",
            "MQTT_TLS_CA": str(self.pki.ca),
            "MQTT_USERNAME": user,
            "MQTT_PASSWORD": self.passwords.get(user, "") if password is None else password,
            "MAM_TOPIC_PREFIX": self.prefix,
        }
        if client_cert:
            env.update(MQTT_TLS_CERT=str(self.pki.client_cert), MQTT_TLS_KEY=str(self.pki.client_key))
        return env

    def stop(self) -> None:
        self.broker.stop()


def start_secure_broker(
    folder: Path,
    *,
    prefix: str = PREFIX,
    runners: tuple[str, ...] = RUNNERS,
    plain_listener: bool = True,
    require_client_cert: bool = False,
) -> SecureBroker:
    """Generate the PKI, passwords, ACL and config in `folder` and start Mosquitto; stop it with `.stop()`."""
    folder.mkdir(parents=True, exist_ok=True)
    pki = make_pki(folder / "pki")
    passwords = {user: f"pw-{secrets.token_hex(12)}" for user in (ORCHESTRATOR, *runners)}
    password_file = folder / "passwd"
    write_passwords(password_file, passwords)
    acl_file = folder / "acl"
    acl_file.write_text(acl_text(prefix, ORCHESTRATOR, runners))
    tls_port = free_port()
    plain_port = None
    if plain_listener:
        plain_port = free_port()
        while plain_port == tls_port:
            plain_port = free_port()
    files = {"password_file": password_file, "acl_file": acl_file}
    conf = render(
        "mosquitto.conf.tmpl",
        persistence="false",
        state_dir=folder,
        tls_port=tls_port,
        tls_bind="127.0.0.1",
        ca=pki.ca,
        server_cert=pki.server_cert,
        server_key=pki.server_key,
        require_certificate="true" if require_client_cert else "false",
        **files,
    )
    if plain_port is not None:
        conf += render("listener-plain.conf.tmpl", plain_port=plain_port, **files)
    if os.geteuid() == 0:
        # Started as root, Mosquitto switches to user `mosquitto` before it reads the key, and that
        # user cannot enter pytest's 0700 temp folders; `user root` keeps it as root (tests only).
        conf = "user root\n" + conf
    broker = start_mosquitto(folder, extra_conf=conf, port=tls_port)
    secure = SecureBroker(broker, pki, passwords, prefix, folder, plain_port)
    if plain_port is not None:
        try:
            wait_for(
                lambda: accepts(plain_port),
                timeout=10,
                interval=0.02,
                message=f"plain listener not accepting on {plain_port}",
            )
        except BaseException:
            broker.stop()
            raise
    return secure
