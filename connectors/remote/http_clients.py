"""One ``httpx.AsyncClient`` per event loop, its connections kept between calls: a TLS
handshake per call adds up at thousands in flight, and a client belongs to the loop it was
made on. Example::

    client = loop_client()           # on an executor's call loop
    reply = await client.post(url, json=body, timeout=30)
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

#: Idle connections kept open, per event loop.
KEPT_CONNECTIONS = 100

_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def loop_client() -> Any:
    """The running loop's client (made at its first use): as many connections at once as
    the loop makes, :data:`KEPT_CONNECTIONS` kept idle."""
    import httpx

    loop = asyncio.get_running_loop()
    client = _CLIENTS.get(loop)
    if client is None:
        client = _CLIENTS[loop] = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=KEPT_CONNECTIONS))
    return client
