"""The Host headers `mam mcp --http` and `mam web` answer to (mam.util.hosts)."""

from __future__ import annotations

from mam.util.hosts import allowed_hosts, authority


def test_a_loopback_bind_answers_to_the_loopback_names_on_its_port_only() -> None:
    hosts = allowed_hosts("127.0.0.1", 8770)
    assert {"127.0.0.1:8770", "localhost:8770", "[::1]:8770"} <= hosts
    assert "evil.example:8770" not in hosts and "127.0.0.1:8771" not in hosts and "127.0.0.1" not in hosts


def test_on_the_schemes_default_port_the_bare_name_is_what_a_browser_sends() -> None:
    assert {"box.lan:443", "box.lan"} == allowed_hosts("box.lan", 443, tls=True)
    assert "box.lan" not in allowed_hosts("box.lan", 443)  # plain HTTP's default is 80
    assert "box.lan" in allowed_hosts("box.lan", 80)
    assert "[::1]" in allowed_hosts("::1", 443, tls=True) and authority("::1", 443) == "[::1]:443"
