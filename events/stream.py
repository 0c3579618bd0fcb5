"""The records of ``APP.stream`` (``schemas/avro/eddies.StreamEvent.avsc``): a model's
answer as it is written, and what the agent is doing. They are not events of a session's
history: no envelope, no journal; the session's ``OutputEvent`` stays the truth.

Example::

    ev = StreamEvent(session_id="s1", run=1, call_id="c1", execution="x1", seq=0,
                     kind=StreamKind.DELTA, call_kind=CallKind.CHAT_MODEL, target="llm",
                     text="Hello", timestamp=0)
    assert decode_stream(encode_stream(ev)) == ev
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from .errors import DecodeError
from .payloads import CallKind

#: The record header naming the schema of a stream record's bytes.
STREAM_SCHEMA = "StreamEvent/1"


class StreamKind(enum.StrEnum):
    """What a stream record says: see the schema's doc."""

    DELTA = "DELTA"
    STARTED = "STARTED"
    ENDED = "ENDED"
    WAITING = "WAITING"


@dataclass(slots=True)
class ToolCallDelta:
    """A fragment of a tool call a model is writing (``index`` joins fragments)."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class StreamEvent:
    """One record of ``APP.stream``."""

    session_id: str
    run: int
    call_id: str
    execution: str
    seq: int
    kind: StreamKind
    call_kind: CallKind
    target: str
    timestamp: int
    scope: tuple[str, ...] = ()
    attempt: int = 1
    text: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)
    error: str | None = None
    deadline_ms: int | None = None


@functools.cache
def stream_schema() -> Any:
    """The parsed ``StreamEvent`` schema."""
    import json

    from .schemas import avro_dir

    raw = json.loads((avro_dir() / "eddies.StreamEvent.avsc").read_text())
    # CallKind is its own file: parsed beside it, named as the envelope names it.
    kinds = json.loads((avro_dir() / "eddies.CallKind.avsc").read_text())
    named: dict[str, Any] = {}
    parse_schema(kinds, named_schemas=named)
    return parse_schema(raw, named_schemas=named)


def _record(ev: StreamEvent) -> dict[str, Any]:
    return {"session_id": ev.session_id, "run": ev.run, "scope": list(ev.scope),
            "call_id": ev.call_id, "attempt": ev.attempt, "execution": ev.execution,
            "seq": ev.seq, "kind": ev.kind.value, "call_kind": ev.call_kind.value,
            "target": ev.target, "text": ev.text,
            "tool_calls": [{"index": t.index, "id": t.id, "name": t.name, "arguments": t.arguments}
                           for t in ev.tool_calls],
            "error": ev.error, "deadline_ms": ev.deadline_ms, "timestamp": ev.timestamp}


def encode_stream(ev: StreamEvent) -> bytes:
    """The Avro bytes (schemaless) of ``ev``."""
    buf = BytesIO()
    schemaless_writer(buf, stream_schema(), _record(ev))
    return buf.getvalue()


def decode_stream(data: bytes) -> StreamEvent:
    """The StreamEvent of Avro bytes; a :class:`DecodeError` says why it is not one."""
    buf = BytesIO(data)
    try:
        rec: Any = schemaless_reader(buf, stream_schema(), None)
    except Exception as err:
        raise DecodeError(f"not an Avro StreamEvent: {type(err).__name__}: {err}") from None
    if buf.tell() != len(data) or not isinstance(rec, dict):
        raise DecodeError("not an Avro StreamEvent: trailing bytes")
    try:
        kind = StreamKind(rec["kind"])
    except ValueError:  # a symbol of a newer release
        kind = StreamKind.DELTA
    try:
        call_kind = CallKind(rec["call_kind"])
    except ValueError:
        call_kind = CallKind.FUNCTION
    return StreamEvent(
        session_id=rec["session_id"], run=rec["run"], scope=tuple(rec["scope"]),
        call_id=rec["call_id"], attempt=rec["attempt"], execution=rec["execution"],
        seq=rec["seq"], kind=kind, call_kind=call_kind, target=rec["target"], text=rec["text"],
        tool_calls=[ToolCallDelta(index=t["index"], id=t["id"], name=t["name"],
                                  arguments=t["arguments"]) for t in rec["tool_calls"]],
        error=rec["error"], deadline_ms=rec["deadline_ms"], timestamp=rec["timestamp"])
