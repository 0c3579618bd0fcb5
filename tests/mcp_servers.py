"""MCP servers for tests, on the official SDK, over streamable HTTP on 127.0.0.1.

``python -m tests.mcp_servers time PORT``: the reference ``mcp-server-time``.
``python -m tests.mcp_servers ledger PORT LOG [DELAY_S]``: a tool ``record(entry)`` that
appends ``<idempotency key> <entry>`` to LOG (after DELAY_S), so tests see every call the
server got and the key each carried; ``slow_once(entry, seconds)`` records too, and
sleeps on the first call with a key only; ``fail(reason)`` reports an error (``is_error``);
``crash(reason)`` writes the reason to stderr and exits, in the middle of the call;
``brochure()`` answers with a caption, an image, an embedded text resource and a link;
``poster(kib)`` an image of that size; the prompt ``trip_plan(city, days="3")`` asks for a
plan in JSON (its braces are text).
``python -m tests.mcp_servers ledger-stdio LOG``: the ledger over stdio.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations (Context).
import base64
import os
import sys
import time
from pathlib import Path

IDEMPOTENCY_META = "io.eddies/idempotency-key"


def ledger(port: int | None, log: Path, delay: float) -> None:
    from mcp import types
    from mcp.server.mcpserver import Context, MCPServer

    server = MCPServer("ledger")

    @server.tool(description="Record an entry in the ledger.")
    def record(entry: str, ctx: Context) -> str:
        meta = ctx.request_context.meta or {}
        with log.open("a") as fh:
            fh.write(f"{meta.get(IDEMPOTENCY_META, '-')} {entry}\n")
        time.sleep(delay)
        return f"recorded {entry}"

    seen: set[str] = set()

    @server.tool(description="Record an entry, slowly on a key's first call.")
    def slow_once(entry: str, seconds: float, ctx: Context) -> str:
        meta = ctx.request_context.meta or {}
        key = str(meta.get(IDEMPOTENCY_META, "-"))
        with log.open("a") as fh:
            fh.write(f"{key} {entry}\n")
        if key not in seen:
            seen.add(key)
            time.sleep(seconds)
        return f"recorded {entry}"

    @server.tool(description="A picture, a guide's page and a link, beside a caption.")
    def brochure() -> list[types.ContentBlock]:
        return [types.TextContent(type="text", text="Our brochure:"),
                types.ImageContent(data=base64.b64encode(b"\x89PNG" + b"0" * 91).decode(),
                                   mimeType="image/png"),
                types.EmbeddedResource(resource=types.TextResourceContents(
                    uri="file:///guide/lisbon.txt", text="Hostels in Alfama from 18 euros.")),
                types.ResourceLink(name="map", uri="https://example.invalid/map.pdf")]

    @server.tool(description="A poster: an image of the size asked for, in KiB.")
    def poster(kib: int) -> list[types.ContentBlock]:
        return [types.TextContent(type="text", text=f"A poster of {kib} KiB:"),
                types.ImageContent(data=base64.b64encode(poster_bytes(kib)).decode(), mimeType="image/png")]

    @server.prompt(description="Plan a stay in a city.")
    def trip_plan(city: str, days: str = "3") -> str:
        return f'Plan {days} days in {city}. Answer as JSON like {{"days": [...]}}.'

    @server.tool(description="Always fails, with the reason given.")
    def fail(reason: str) -> str:
        raise ValueError(reason)

    @server.tool(description="Dies, the reason written to stderr.")
    def crash(reason: str) -> str:
        print(f"crashing: {reason}", file=sys.stderr, flush=True)
        os._exit(3)

    if port is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=port)


def poster_bytes(kib: int) -> bytes:
    """The bytes of ``poster(kib)``: a PNG header, then a pattern that is not all one byte."""
    return (b"\x89PNG" + bytes(range(256)) * (kib * 4))[: kib * 1024]


def main() -> None:
    if sys.argv[1] == "ledger-stdio":
        ledger(None, Path(sys.argv[2]), 0.0)
        return
    kind, port = sys.argv[1], int(sys.argv[2])
    if kind == "time":
        from mcp_server_time.server import create_server

        create_server("UTC").run("streamable-http", host="127.0.0.1", port=port)
    else:
        ledger(port, Path(sys.argv[3]), float(sys.argv[4]) if len(sys.argv) > 4 else 0.0)


if __name__ == "__main__":
    main()
