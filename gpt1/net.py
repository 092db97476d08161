"""The network as the commands and flows that start servers see it."""

from __future__ import annotations

import ipaddress
import re
import socket

# a host name or an IPv4 address: dot-separated labels of letters, digits and inner hyphens
_HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*"
                        r"[A-Za-z0-9])?)*")


def is_ipv6(host: str) -> bool:
    """Whether `host` is an IPv6 address written bare (`::1`, not `[::1]`)."""
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return False
    return True


def host_problem(host: str) -> str | None:
    """Why `host` names no host to listen on or connect to (None where it does): a host name,
    an IPv4 address, or an IPv6 address written bare."""
    if is_ipv6(host) or _HOST_NAME.fullmatch(host):
        return None
    if host.startswith("[") and is_ipv6(host.strip("[]")):
        return f"{host!r}: write an IPv6 address without brackets ({host.strip('[]')})"
    return f"{host!r}: expected a host name, an IPv4 address or an IPv6 address (::1)"


def host_port(host: str, port: int) -> str:
    """`host:port` as a URL writes it: an IPv6 address in brackets, `[::1]:4200`."""
    return f"[{host}]:{port}" if is_ipv6(host) else f"{host}:{port}"


def port_in_use(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on `host:port` (tried for at most a second):
    a server about to be started there would fail to bind."""
    family = socket.AF_INET6 if is_ipv6(host) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, port)) == 0
