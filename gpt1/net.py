"""The network as the commands and flows that start servers see it."""

from __future__ import annotations

import socket


def port_in_use(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on `host:port` (tried for at most a second):
    a server about to be started there would fail to bind."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, port)) == 0
