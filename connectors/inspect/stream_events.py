"""A session's records as the HTTP door sends them: the stream's contract applied (the
newest execution of a call kept, duplicates and left executions dropped), each record a
named event with a JSON body. Example::

    async for name, data in session_events(hub, "alice", since_ms=sent_ms, until_output=True):
        ...   # ("delta", {...}), ("progress", {...}), ("approval", {...}), ("output", {...})
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from eddies.connectors.inspect.stream_hub import SessionHub
from eddies.connectors.streaming.following import StreamFollower
from eddies.events import AgentEvent, ApprovalRequestEvent, OutputEvent
from eddies.events.stream import StreamEvent, StreamKind

#: How often an idle follower is sent a keep-alive (proxies close quiet connections).
KEEP_ALIVE_S = 15.0


async def session_events(hub: SessionHub, session_id: str, *, input_id: str = "", since_ms: int = 0,
                         until_output: bool = False, keep_s: float = 0.0,
                         keep_alive_s: float = KEEP_ALIVE_S) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """The named events of ``session_id`` from now (and the last ``keep_s`` seconds the hub
    kept): ``delta``, ``progress``, ``approval``, ``output``; ``keep-alive`` when idle.
    With ``input_id``, only that input's output is sent (an earlier input's run may still
    be going); an output that names no input (a worker from before outputs did) counts
    when it is stamped at ``since_ms`` or later. ``until_output``: it ends after the first
    output it sends."""
    loop = asyncio.get_running_loop()
    follower = hub.follow(session_id, loop, since=time.monotonic() - keep_s if keep_s else None)
    view = StreamFollower()
    try:
        while True:
            try:
                record = await asyncio.wait_for(follower.queue.get(), keep_alive_s)
            except TimeoutError:
                yield "keep-alive", {}
                continue
            if isinstance(record, StreamEvent):
                event = _stream_event(view, record)
                if event is not None:
                    yield event
                continue
            payload = record.payload
            if isinstance(payload, ApprovalRequestEvent):
                yield "approval", approval_data(record)
            elif isinstance(payload, OutputEvent) and _answers(payload, record.timestamp, input_id, since_ms):
                yield "output", output_data(record)
                if until_output:
                    return
    finally:
        hub.leave(follower)


def _answers(output: OutputEvent, stamped_ms: int, input_id: str, since_ms: int) -> bool:
    if input_id and output.input_id:
        return output.input_id == input_id
    return stamped_ms >= since_ms


def _stream_event(view: StreamFollower, record: StreamEvent) -> tuple[str, dict[str, Any]] | None:
    change = view.add(record)
    if change is None:
        return None
    common = {"run": record.run, "scope": list(record.scope), "call_id": record.call_id,
              "attempt": record.attempt, "execution": record.execution, "seq": record.seq,
              "call_kind": record.call_kind.value, "target": record.target}
    if record.kind is StreamKind.DELTA:
        return "delta", {**common, "text": record.text, "restarted": change.restarted,
                         "tool_calls": [{"index": t.index, "id": t.id, "name": t.name,
                                         "arguments": t.arguments} for t in record.tool_calls]}
    return "progress", {**common, "kind": record.kind.value, "text": record.text, "error": record.error,
                        "deadline_ms": record.deadline_ms, "status": change.status or ""}


def output_data(ev: AgentEvent) -> dict[str, Any]:
    """An OutputEvent as the door sends it."""
    p = ev.payload
    assert isinstance(p, OutputEvent)
    error = None if p.error is None else {"type": p.error.type, "message": p.error.message}
    return {"session_id": ev.session_id, "run": ev.run, "event_id": ev.event_id,
            "input_id": p.input_id, "output": p.output, "error": error}


def approval_data(ev: AgentEvent) -> dict[str, Any]:
    """An ApprovalRequestEvent as the door sends it: what answers it is a POST to
    ``/v1/sessions/{id}/approvals/{signal}``."""
    p = ev.payload
    assert isinstance(p, ApprovalRequestEvent)
    return {"session_id": ev.session_id, "run": ev.run, "signal": p.signal, "tool": p.tool,
            "tool_call_id": p.tool_call_id, "arguments": p.arguments, "deadline": p.deadline}


def sse(name: str, data: dict[str, Any]) -> bytes:
    """One Server-Sent Event (a comment for a keep-alive)."""
    if name == "keep-alive":
        return b": keep-alive\n\n"
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def sse_stream(events: AsyncIterator[tuple[str, dict[str, Any]]]) -> AsyncIterator[bytes]:
    """``events`` as the bytes of Server-Sent Events (an HTTP response's body)."""
    async for name, data in events:
        yield sse(name, data)
