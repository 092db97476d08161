"""gpt1.net: host and port as a URL writes them, and whether a server listens there, for an IPv6
address as for an IPv4 one."""

from __future__ import annotations

import socket

import pytest

from gpt1.net import host_port, port_in_use
from tests.conftest import skip_outside_ci


def test_an_ipv6_address_is_written_in_brackets() -> None:
    assert host_port("::1", 4200) == "[::1]:4200"
    assert host_port("2001:db8::7", 443) == "[2001:db8::7]:443"
    assert host_port("127.0.0.1", 4200) == "127.0.0.1:4200"
    assert host_port("gpt1-server", 4200) == "gpt1-server:4200"


@pytest.mark.parametrize(("family", "host"), [(socket.AF_INET, "127.0.0.1"),
                                              (socket.AF_INET6, "::1")], ids=["ipv4", "ipv6"])
def test_a_port_a_server_listens_on_is_in_use(family: socket.AddressFamily, host: str) -> None:
    with socket.socket(family, socket.SOCK_STREAM) as server:
        try:
            server.bind((host, 0))
        except OSError as err:  # a machine without IPv6
            skip_outside_ci(f"cannot listen on {host}: {err}")
        port = server.getsockname()[1]
        assert not port_in_use(host, port)  # bound, and so no one else's, but not listening
        server.listen()
        assert port_in_use(host, port)
