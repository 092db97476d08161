"""gpt1.net: host and port as a URL writes them, and whether a server listens there, for an IPv6
address as for an IPv4 one."""

from __future__ import annotations

import socket

import pytest

from gpt1.net import host_port, host_problem, port_in_use
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


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "::1", "::", "2001:db8::7",
                                  "localhost", "gpt1-server", "node-3.cluster.example.org"])
def test_a_host_is_a_name_an_ipv4_or_a_bare_ipv6_address(host: str) -> None:
    assert host_problem(host) is None


@pytest.mark.parametrize(("host", "problem"), [
    ("[::1]", "'[::1]': write an IPv6 address without brackets (::1)"),
    ("", "'': expected a host name, an IPv4 address or an IPv6 address (::1)"),
    ("gpt1 server", "'gpt1 server': expected a host name"),
    ("host:4200", "'host:4200': expected a host name"),
    ("http://host", "'http://host': expected a host name"),
    ("-host", "'-host': expected a host name"),
])
def test_anything_else_is_named_as_no_host(host: str, problem: str) -> None:
    assert (host_problem(host) or "").startswith(problem)
