"""The network as the commands and flows that start servers see it."""

from __future__ import annotations

import socket


def _ipv6(host: str) -> bool:
    """Whether `host` is an IPv6 address (no host name or IPv4 address holds a colon)."""
    return ":" in host


def host_port(host: str, port: int) -> str:
    """`host:port` as a URL writes it: an IPv6 address in brackets, `[::1]:4200`."""
    return f"[{host}]:{port}" if _ipv6(host) else f"{host}:{port}"


def port_in_use(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on `host:port` (tried for at most a second):
    a server about to be started there would fail to bind."""
    family = socket.AF_INET6 if _ipv6(host) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, port)) == 0
