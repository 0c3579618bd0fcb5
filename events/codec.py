"""``AgentEvent`` <-> Avro bytes (schemaless, fastavro) and <-> Avro-shaped dicts.

Records carry no schema; the envelope schema's fingerprint travels in a record header
(:func:`headers`), so a reader picks the right writer schema. Example::

    data = encode(ev)
    assert decode(data) == ev
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
from collections.abc import Callable
from io import BytesIO
from typing import Any

import orjson
from fastavro import schemaless_reader, schemaless_writer

from .avro_compiled import ObjectBinding, compile_object_writers, compile_schema, find_type_error
from .envelope import SCHEMA_VERSION, AgentEvent
from .errors import DecodeError, EncodingError
from .payloads import (
    BUILTIN_TYPES,
    EVENT_TYPES,
    ApprovalRequestEvent,
    CallKind,
    CallStatus,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    CustomEvent,
    Document,
    DurableCallRequest,
    DurableCallResult,
    ErrorCategory,
    ErrorInfo,
    Event,
    InputEvent,
    MessageRole,
    OutputEvent,
    SignalEvent,
    SubagentCallEvent,
    SubagentResultEvent,
    TokenUsage,
    ToolCall,
    ToolRequestEvent,
    ToolResponseEvent,
    ToolResult,
)
from .schemas import envelope_fingerprint, envelope_schema
from .values import _default as _value_default
from .values import decode_value, encode_value

SCHEMA_HEADER = "eddies.schema"
FINGERPRINT_HEADER = "eddies.schema.fingerprint"

Record = dict[str, Any]


def headers() -> list[tuple[str, bytes]]:
    """Kafka record headers naming the writer schema of :func:`encode`'s bytes."""
    return [
        (SCHEMA_HEADER, f"AgentEvent/{SCHEMA_VERSION}".encode()),
        (FINGERPRINT_HEADER, envelope_fingerprint().encode()),
    ]


# --- payload -> record -------------------------------------------------------------

def _err(e: ErrorInfo | None) -> Record | None:
    if e is None:
        return None
    return {"type": e.type, "message": e.message, "retryable": e.retryable,
            "category": e.category, "http_status": e.http_status,
            "retry_after_ms": e.retry_after_ms}


def _tool_call(t: ToolCall) -> Record:
    return {"id": t.id, "name": t.name, "arguments": encode_value(t.arguments, "ToolCall.arguments")}


def _message(m: ChatMessage) -> Record:
    return {
        "role": m.role,
        "content": m.content,
        "tool_calls": [_tool_call(t) for t in m.tool_calls],
        "tool_call_id": m.tool_call_id,
        "extra_args": encode_value(m.extra_args, "ChatMessage.extra_args"),
    }


def _document(d: Document) -> Record:
    return {"content": d.content, "metadata": encode_value(d.metadata, "Document.metadata"),
            "id": d.id, "score": d.score}


def _usage(u: TokenUsage | None) -> Record | None:
    if u is None:
        return None
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "cost_usd": u.cost_usd, "latency_ms": u.latency_ms, "attempts": u.attempts}


def _tool_result(r: ToolResult) -> Record:
    return {
        "tool_call_id": r.tool_call_id,
        "name": r.name,
        "result": encode_value(r.result, "ToolResult.result"),
        "error": _err(r.error),
    }


def _attributes(event: Event) -> dict[str, Any]:
    if dataclasses.is_dataclass(event):
        return {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
    dump = getattr(event, "model_dump", None)
    if callable(dump):
        return dict(dump(mode="json"))
    return dict(vars(event))


def _in(p: Any) -> Record:
    return {"input": encode_value(p.input, "InputEvent.input")}


def _out(p: Any) -> Record:
    return {"output": encode_value(p.output, "OutputEvent.output"), "error": _err(p.error)}


def _chat_req(p: Any) -> Record:
    schema = p.output_schema
    return {
        "model": p.model,
        "messages": [_message(m) for m in p.messages],
        "output_schema": None if schema is None else encode_value(schema, "output_schema"),
    }


def _chat_resp(p: Any) -> Record:
    return {"request_id": p.request_id, "response": _message(p.response), "usage": _usage(p.usage)}


def _tool_req(p: Any) -> Record:
    return {
        "request_id": p.request_id,
        "model": p.model,
        "tool_calls": [_tool_call(t) for t in p.tool_calls],
    }


def _tool_resp(p: Any) -> Record:
    return {"request_id": p.request_id, "responses": [_tool_result(r) for r in p.responses]}


def _sub_call(p: Any) -> Record:
    return {
        "call_id": p.call_id,
        "agent": p.agent,
        "input": encode_value(p.input, "SubagentCallEvent.input"),
        "timeout_ms": p.timeout_ms,
    }


def _sub_result(p: Any) -> Record:
    return {
        "call_id": p.call_id,
        "output": encode_value(p.output, "SubagentResultEvent.output"),
        "error": _err(p.error),
    }


def _call_req(p: Any) -> Record:
    return {
        "call_id": p.call_id,
        "kind": p.kind,
        "target": p.target,
        "args": p.args,
        "idempotent": p.idempotent,
        "attempt": p.attempt,
        "timeout_ms": p.timeout_ms,
        "digest": p.digest,
        "not_before": p.not_before,
    }


def _call_result(p: Any) -> Record:
    return {
        "call_id": p.call_id,
        "kind": p.kind,
        "status": p.status,
        "value": p.value,
        "error": _err(p.error),
        "attempt": p.attempt,
        "digest": p.digest,
    }


def _signal(p: Any) -> Record:
    return {"name": p.name, "value": encode_value(p.value, "SignalEvent.value")}


def _approval(p: Any) -> Record:
    return {"signal": p.signal, "tool": p.tool, "tool_call_id": p.tool_call_id,
            "arguments": encode_value(p.arguments, "ApprovalRequestEvent.arguments"),
            "deadline": p.deadline}


def _retrieval_req(p: Any) -> Record:
    filters = p.filters
    return {"query": p.query, "vector_store": p.vector_store, "max_results": p.max_results,
            "filters": None if filters is None else encode_value(filters, "filters"),
            "collection": p.collection}


def _retrieval_resp(p: Any) -> Record:
    return {"request_id": p.request_id, "query": p.query,
            "documents": [_document(d) for d in p.documents]}


def _custom(p: Any) -> Record:
    return {"type_name": p.type_name, "attributes": encode_value(p.attributes, p.type_name)}


_WRITERS: dict[type, tuple[str, Callable[[Any], Record]]] = {
    InputEvent: ("eddies.InputEvent", _in),
    OutputEvent: ("eddies.OutputEvent", _out),
    ChatRequestEvent: ("eddies.ChatRequestEvent", _chat_req),
    ChatResponseEvent: ("eddies.ChatResponseEvent", _chat_resp),
    ToolRequestEvent: ("eddies.ToolRequestEvent", _tool_req),
    ToolResponseEvent: ("eddies.ToolResponseEvent", _tool_resp),
    SubagentCallEvent: ("eddies.SubagentCallEvent", _sub_call),
    SubagentResultEvent: ("eddies.SubagentResultEvent", _sub_result),
    DurableCallRequest: ("eddies.DurableCallRequest", _call_req),
    DurableCallResult: ("eddies.DurableCallResult", _call_result),
    CustomEvent: ("eddies.CustomEvent", _custom),
    SignalEvent: ("eddies.SignalEvent", _signal),
    ApprovalRequestEvent: ("eddies.ApprovalRequestEvent", _approval),
    ContextRetrievalRequestEvent: ("eddies.ContextRetrievalRequestEvent", _retrieval_req),
    ContextRetrievalResponseEvent: ("eddies.ContextRetrievalResponseEvent", _retrieval_resp),
}


def _check_default(obj: Any) -> Any:
    # Like the value encoding, plus user events that are plain classes.
    if isinstance(obj, Event):
        return _attributes(obj)
    return _value_default(obj)


def validate_payload(payload: Event) -> None:
    """Raise EncodingError, naming the field, if ``payload`` cannot be written.

    Built-in events are written (their Avro writer checks every field's type and structure,
    and names a value field that is not JSON-encodable); user events go through one C-speed
    JSON pass, and only when that fails through the full conversion, to name the field.
    """
    kind = type(payload)
    branch = _WRITERS.get(kind)
    if branch is not None:
        try:
            _writers()[branch[0]](payload)
        except EncodingError:
            raise
        except (AttributeError, TypeError, ValueError, KeyError, OverflowError) as err:
            where = find_type_error(envelope_schema(), branch[0], payload, _object_binding())
            raise EncodingError(where or f"{kind.__name__}: {type(err).__name__}: {err}") from None
        return
    try:
        orjson.dumps(payload, default=_check_default)
    except TypeError as err:
        payload_to_record(payload)  # raises EncodingError naming the field
        raise EncodingError(f"{kind.__name__}: {err}") from None


def payload_to_record(payload: Event) -> tuple[str, Record]:
    """The Avro union branch name and record of a payload (user events -> CustomEvent)."""
    writer = _WRITERS.get(type(payload))
    if writer is not None:
        name, fn = writer
        return name, fn(payload)
    if not isinstance(payload, Event):
        raise EncodingError(f"{type(payload).__name__} is not an Event")
    type_name = type(payload).event_type
    return "eddies.CustomEvent", {
        "type_name": type_name,
        "attributes": encode_value(_attributes(payload), type_name),
    }


def to_record(ev: AgentEvent) -> Record:
    """The Avro-shaped dict of an envelope (JSON-serialisable: it also goes into snapshots)."""
    name, rec = payload_to_record(ev.payload)
    return {
        "schema_version": ev.schema_version,
        "event_id": ev.event_id,
        "session_id": ev.session_id,
        "seq": ev.seq,
        "run": ev.run,
        "scope": list(ev.scope),
        "type": ev.type,
        "causation_id": ev.causation_id,
        "action": ev.action,
        "agent": ev.agent,
        "agent_version": ev.agent_version,
        "timestamp": ev.timestamp,
        "payload": (name, rec),
    }


# --- record -> payload -------------------------------------------------------------

def _err_in(r: Record | None) -> ErrorInfo | None:
    if r is None:
        return None
    return ErrorInfo(r["type"], r["message"], r.get("retryable", False),
                     _CATEGORIES[r.get("category", "UNCLASSIFIED")], r.get("http_status"),
                     r.get("retry_after_ms"))


_CATEGORIES = {c.value: c for c in ErrorCategory}


def _tool_call_in(r: Record) -> ToolCall:
    return ToolCall(r["id"], r["name"], decode_value(r["arguments"], "ToolCall.arguments"))


_ROLES = {role.value: role for role in MessageRole}
_KINDS = {kind.value: kind for kind in CallKind}
_STATUSES = {status.value: status for status in CallStatus}


def _message_in(r: Record) -> ChatMessage:
    return ChatMessage(
        _ROLES[r["role"]],
        r["content"],
        [_tool_call_in(t) for t in r["tool_calls"]],
        r["tool_call_id"],
        decode_value(r["extra_args"], "ChatMessage.extra_args"),
    )


def _document_in(r: Record) -> Document:
    return Document(r["content"], decode_value(r["metadata"], "Document.metadata"), r["id"],
                    r["score"])


def _custom_in(r: Record) -> Event:
    type_name = r["type_name"]
    attributes = decode_value(r["attributes"], type_name)
    cls = EVENT_TYPES.get(type_name)
    if cls is None or type_name in BUILTIN_TYPES:
        return CustomEvent(type_name, attributes)
    try:
        return cls(**attributes)
    except TypeError as err:
        raise DecodeError(f"{type_name}: attributes do not fit {cls.__qualname__}: {err}") from None


_READERS: dict[str, Callable[[Record], Event]] = {
    "eddies.InputEvent": lambda r: InputEvent(decode_value(r["input"], "InputEvent.input")),
    "eddies.OutputEvent": lambda r: OutputEvent(
        decode_value(r["output"], "OutputEvent.output"), _err_in(r["error"])
    ),
    "eddies.ChatRequestEvent": lambda r: ChatRequestEvent(
        r["model"],
        [_message_in(m) for m in r["messages"]],
        None if r["output_schema"] is None else decode_value(r["output_schema"], "output_schema"),
    ),
    "eddies.ChatResponseEvent": lambda r: ChatResponseEvent(
        r["request_id"],
        _message_in(r["response"]),
        None if r["usage"] is None else TokenUsage(**r["usage"]),
    ),
    "eddies.ToolRequestEvent": lambda r: ToolRequestEvent(
        r["request_id"], r["model"], [_tool_call_in(t) for t in r["tool_calls"]]
    ),
    "eddies.ToolResponseEvent": lambda r: ToolResponseEvent(
        r["request_id"],
        [
            ToolResult(
                x["tool_call_id"],
                x["name"],
                decode_value(x["result"], "ToolResult.result"),
                _err_in(x["error"]),
            )
            for x in r["responses"]
        ],
    ),
    "eddies.SubagentCallEvent": lambda r: SubagentCallEvent(
        r["call_id"], r["agent"], decode_value(r["input"], "SubagentCallEvent.input"), r["timeout_ms"]
    ),
    "eddies.SubagentResultEvent": lambda r: SubagentResultEvent(
        r["call_id"], decode_value(r["output"], "SubagentResultEvent.output"), _err_in(r["error"])
    ),
    "eddies.DurableCallRequest": lambda r: DurableCallRequest(
        r["call_id"],
        _KINDS[r["kind"]],
        r["target"],
        r["args"],
        r["idempotent"],
        r["attempt"],
        r["timeout_ms"],
        r.get("digest", ""),  # absent in records read with schema v1
        r.get("not_before"),
    ),
    "eddies.DurableCallResult": lambda r: DurableCallResult(
        r["call_id"],
        _KINDS[r["kind"]],
        _STATUSES[r["status"]],
        r["value"],
        _err_in(r["error"]),
        r["attempt"],
        r["digest"],
    ),
    "eddies.CustomEvent": _custom_in,
    "eddies.SignalEvent": lambda r: SignalEvent(r["name"], decode_value(r["value"], "SignalEvent.value")),
    "eddies.ApprovalRequestEvent": lambda r: ApprovalRequestEvent(
        r["signal"], r["tool"], r["tool_call_id"],
        decode_value(r["arguments"], "ApprovalRequestEvent.arguments"), r["deadline"],
    ),
    "eddies.ContextRetrievalRequestEvent": lambda r: ContextRetrievalRequestEvent(
        r["query"], r["vector_store"], r["max_results"],
        None if r["filters"] is None else decode_value(r["filters"], "filters"), r["collection"],
    ),
    "eddies.ContextRetrievalResponseEvent": lambda r: ContextRetrievalResponseEvent(
        r["request_id"], r["query"], [_document_in(d) for d in r["documents"]],
    ),
}


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MS = datetime.timedelta(milliseconds=1)


def _millis(value: Any) -> int:
    # fastavro reads timestamp-millis as an aware datetime; the engine's clock is int ms.
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // _MS
    return int(value)


def from_record(rec: Record) -> AgentEvent:
    """Inverse of :func:`to_record`; raises :class:`DecodeError` on any malformed field."""
    try:
        name, body = rec["payload"]
        reader = _READERS.get(name)
        if reader is None:
            raise DecodeError(f"unknown payload type {name!r}")
        payload = reader(body)
        return AgentEvent(
            event_id=rec["event_id"],
            session_id=rec["session_id"],
            seq=rec["seq"],
            run=rec["run"],
            scope=tuple(rec["scope"]),
            type=rec["type"],
            causation_id=rec["causation_id"],
            action=rec["action"],
            agent=rec["agent"],
            agent_version=rec["agent_version"],
            timestamp=_millis(rec["timestamp"]),
            payload=payload,
            schema_version=rec["schema_version"],
        )
    except DecodeError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise DecodeError(f"malformed event record: {type(err).__name__}: {err}") from None


# --- bytes ---------------------------------------------------------------------------

_compiled: tuple[Callable[[Record], bytes], Callable[[bytes], Record]] | None = None


def _codec() -> tuple[Callable[[Record], bytes], Callable[[bytes], Record]]:
    global _compiled
    if _compiled is None:
        _compiled = compile_schema(envelope_schema())
    return _compiled


def _value_field(record: str, field: str) -> Callable[[Any], str]:
    """Reads attribute ``field`` (any JSON-encodable value) as the JSON text the schema holds."""
    where = f"{record}.{field}"

    def convert(obj: Any) -> str:
        return encode_value(getattr(obj, field), where)

    return convert


def _as_custom_event(payload: Any) -> tuple[str, Any]:
    # A user's event class travels as a CustomEvent (its type name and attributes).
    if not isinstance(payload, Event):
        raise EncodingError(f"{type(payload).__name__} is not an Event")
    return "eddies.CustomEvent", CustomEvent(type(payload).event_type, _attributes(payload))


@functools.cache
def _object_binding() -> ObjectBinding:
    """The envelope's records as the classes of :mod:`.payloads` (the field names are the
    schema's); value fields are JSON text on the wire."""
    classes: dict[str, type] = {name: kind for kind, (name, _) in _WRITERS.items()}
    classes.update({"eddies.AgentEvent": AgentEvent, "eddies.ChatMessage": ChatMessage,
                    "eddies.ToolCall": ToolCall, "eddies.ToolResult": ToolResult,
                    "eddies.ErrorInfo": ErrorInfo, "eddies.TokenUsage": TokenUsage,
                    "eddies.Document": Document})
    convert: dict[str, Callable[[Any], Any]] = {
        f"eddies.{r}.{f}": _value_field(r, f) for r, f in [
            ("InputEvent", "input"), ("OutputEvent", "output"), ("ChatMessage", "extra_args"),
            ("ToolCall", "arguments"), ("ToolResult", "result"), ("SubagentCallEvent", "input"),
            ("SubagentResultEvent", "output"), ("SignalEvent", "value"),
            ("ApprovalRequestEvent", "arguments"), ("Document", "metadata"),
        ]
    }
    convert["eddies.ContextRetrievalRequestEvent.filters"] = lambda p: (
        None if p.filters is None else encode_value(p.filters, "filters"))
    convert["eddies.ChatRequestEvent.output_schema"] = lambda p: (
        None if p.output_schema is None else encode_value(p.output_schema, "output_schema"))
    convert["eddies.CustomEvent.attributes"] = lambda p: encode_value(p.attributes, p.type_name)
    cached = frozenset(f"eddies.{f}" for f in (
        "AgentEvent.session_id", "AgentEvent.type", "AgentEvent.action", "AgentEvent.agent",
        "AgentEvent.agent_version", "ChatRequestEvent.model", "DurableCallRequest.target",
        "ToolCall.name", "ToolResult.name"))
    return ObjectBinding(classes=classes, convert=convert, fallback=_as_custom_event, cached=cached)


_object_writers: dict[str, Callable[[Any], bytes]] = {}
_write_object: Callable[[AgentEvent], bytes] | None = None


def _writers() -> dict[str, Callable[[Any], bytes]]:
    """The object writer of every record of the envelope schema, by full name."""
    global _write_object
    if not _object_writers:
        _object_writers.update(compile_object_writers(envelope_schema(), _object_binding()))
        _write_object = _object_writers["eddies.AgentEvent"]
    return _object_writers


def encode(ev: AgentEvent) -> bytes:
    """Avro (schemaless) bytes of an envelope under the current schema.

    Written straight from the objects (the same bytes as encoding :func:`to_record`'s dict,
    without building it).
    """
    write = _write_object
    if write is None:
        write = _writers()["eddies.AgentEvent"]
    try:
        return write(ev)
    except EncodingError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as err:
        raise EncodingError(f"{ev.type}: {type(err).__name__}: {err}") from None


def decode(data: bytes, writer_schema: Any = None) -> AgentEvent:
    """Decode bytes written by :func:`encode` (or by ``writer_schema``, an older version).

    Raises :class:`DecodeError`, and nothing else, for any input that is not an event.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise DecodeError(f"expected bytes, got {type(data).__name__}")
    if writer_schema is None:
        try:
            compiled = _codec()[1](data if type(data) is bytes else bytes(data))
        except Exception as err:  # any failure on garbage becomes the one error type
            raise DecodeError(f"not an Avro AgentEvent: {type(err).__name__}: {err}") from None
        return from_record(compiled)
    buf = BytesIO(data)
    reader = envelope_schema()
    try:
        rec: Any = schemaless_reader(
            buf,
            writer_schema,
            reader,
            return_record_name=True,
            return_record_name_override=True,
        )
    except Exception as err:  # fastavro raises many types on garbage; callers get one
        raise DecodeError(f"not an Avro AgentEvent: {type(err).__name__}: {err}") from None
    if buf.tell() != len(data):
        raise DecodeError(f"not an Avro AgentEvent: {len(data) - buf.tell()} trailing bytes")
    if not isinstance(rec, dict):
        raise DecodeError("not an Avro AgentEvent record")
    return from_record(rec)


def encode_record(rec: Record, schema: Any) -> bytes:
    """Avro bytes of an Avro-shaped dict under an explicit schema (tests, tools)."""
    buf = BytesIO()
    schemaless_writer(buf, schema, rec)
    return buf.getvalue()


def decode_record(data: bytes, writer_schema: Any, reader_schema: Any = None) -> Record:
    """Avro-shaped dict of bytes written with ``writer_schema``, resolved to ``reader_schema``."""
    try:
        rec = schemaless_reader(
            BytesIO(data),
            writer_schema,
            reader_schema,
            return_record_name=True,
            return_record_name_override=True,
        )
    except Exception as err:
        raise DecodeError(f"not a valid record: {type(err).__name__}: {err}") from None
    if not isinstance(rec, dict):
        raise DecodeError("not a record")
    return rec
