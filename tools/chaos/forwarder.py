"""Inside a worker's network namespace: listen on the broker's port and relay each
connection over a Unix socket to the campaign's relay (netcut.py). Run as
``python -m chaos.forwarder PORT UNIX_PATH``."""

from __future__ import annotations

import contextlib
import selectors
import socket
import sys


def main() -> None:
    port, path = int(sys.argv[1]), sys.argv[2]
    sel = selectors.DefaultSelector()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(1024)  # hundreds of model-call connections at once in a +slow round
    sel.register(listener, selectors.EVENT_READ, None)
    peers: dict[socket.socket, socket.socket] = {}
    while True:
        for key, _ in sel.select():
            sock = key.fileobj
            if sock is listener:
                client, _ = listener.accept()
                relay = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    relay.connect(path)
                except OSError:
                    client.close()
                    continue
                peers[client], peers[relay] = relay, client
                for s in (client, relay):
                    sel.register(s, selectors.EVENT_READ, None)
                continue
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            other = peers.get(sock)
            if not data or other is None:
                for end in (sock, other):
                    if end is not None:
                        peers.pop(end, None)
                        with contextlib.suppress(KeyError, ValueError):
                            sel.unregister(end)
                        end.close()
                continue
            with contextlib.suppress(OSError):
                other.sendall(data)


if __name__ == "__main__":
    main()
