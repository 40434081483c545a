"""The addresses mam's HTTP endpoints (`mam mcp --http`, `mam web`) serve, and the `Host` headers that
name them (DNS rebinding: a page of another site whose name now resolves to this address sends its
own name, and is refused)."""

from __future__ import annotations

import ipaddress
import socket

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """An address that binds every interface (`0.0.0.0`, `::`), or none given."""
    if not host:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def authority(host: str, port: int) -> str:
    """`host:port` as a URL or a Host header writes it (an IPv6 address in brackets)."""
    host = host.strip("[]")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def allowed_hosts(host: str, port: int, *, tls: bool = False) -> frozenset[str]:
    """The `Host` header values (lower case) that name the address served: a loopback or wildcard
    bind also answers to the loopback names, a wildcard bind to this machine's own names; on the
    scheme's default port (80, 443 with TLS) the name alone too, as browsers send it."""
    names = {host.strip("[]").lower()}
    if is_loopback(host) or is_wildcard(host):
        names.update(LOOPBACK)
    if is_wildcard(host):
        names.update({socket.gethostname().lower(), socket.getfqdn().lower()})
    names = {n for n in names if not is_wildcard(n)}
    out = {authority(n, port) for n in names}
    if port == (443 if tls else 80):
        out |= {f"[{n}]" if ":" in n else n for n in names}
    return frozenset(out)
