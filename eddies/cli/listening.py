"""A listening socket for the commands that serve HTTP (``eddies ui``, ``eddies serve``)."""

from __future__ import annotations

import socket

#: Addresses of this machine alone: what a door without tokens may listen on.
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def listen(host: str, port: int) -> socket.socket:
    """A listening socket, bound before the URL is printed: port 0 gets its number, and a
    port in use fails here with a message, not inside the server."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host or "0.0.0.0", port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock
