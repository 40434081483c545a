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
    """An address that binds every interface, or none given: `0.0.0.0`, `::`, and every other spelling of
    them the resolver takes (`0`, `0x0`, `0.0`, `::ffff:0.0.0.0`, a name that resolves to one)."""
    if not host or not host.strip("[]"):
        return True
    try:
        infos = socket.getaddrinfo(host.strip("[]"), None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError):
        return False  # nothing it names can be bound either: the bind says so
    for *_rest, address in infos:
        ip = ipaddress.ip_address(str(address[0]).split("%", 1)[0])
        mapped = getattr(ip, "ipv4_mapped", None)
        if ip.is_unspecified or (mapped is not None and mapped.is_unspecified):
            return True
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
