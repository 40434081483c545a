"""The Host headers `mam mcp --http` and `mam web` answer to (mam.util.hosts)."""

from __future__ import annotations

import pytest

from mam.util.hosts import allowed_hosts, authority, is_wildcard
from mam.web.serve import check_address


def test_a_loopback_bind_answers_to_the_loopback_names_on_its_port_only() -> None:
    hosts = allowed_hosts("127.0.0.1", 8770)
    assert {"127.0.0.1:8770", "localhost:8770", "[::1]:8770"} <= hosts
    assert "evil.example:8770" not in hosts and "127.0.0.1:8771" not in hosts and "127.0.0.1" not in hosts


def test_on_the_schemes_default_port_the_bare_name_is_what_a_browser_sends() -> None:
    assert {"box.lan:443", "box.lan"} == allowed_hosts("box.lan", 443, tls=True)
    assert "box.lan" not in allowed_hosts("box.lan", 443)  # plain HTTP's default is 80
    assert "box.lan" in allowed_hosts("box.lan", 80)
    assert "[::1]" in allowed_hosts("::1", 443, tls=True) and authority("::1", 443) == "[::1]:443"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "[::]", "0", "0x0", "0.0", "000.000.000.000", "::ffff:0.0.0.0", ""])
def test_every_spelling_of_a_wildcard_is_one_and_mam_web_refuses_it(host: str) -> None:
    """Issue 39, item 8: `--host 0` and `--host ::ffff:0.0.0.0` bound every interface."""
    assert is_wildcard(host)
    with pytest.raises(Exception, match="not a wildcard"):
        check_address(host, tls_cert="c.pem", tls_key="k.pem")


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "192.0.2.1", "::ffff:127.0.0.1"])
def test_an_address_of_one_interface_is_no_wildcard(host: str) -> None:
    assert not is_wildcard(host)
