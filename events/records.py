"""Events <-> Avro-shaped dicts (records): what the envelope schema holds of each payload,
field by field, and back; the bytes are :mod:`.codec`'s. Example::

    rec = to_record(ev)           # {"session_id": ..., "payload": ("eddies.InputEvent", {...})}
    assert from_record(rec) == ev
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from typing import Any

from .envelope import AgentEvent
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
    ContentBlock,
    ContentKind,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    CustomEvent,
    Document,
    DurableCallRequest,
    DurableCallResult,
    ErrorCategory,
    ErrorInfo,
    Event,
    Identity,
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
from .values import decode_value, encode_value

Record = dict[str, Any]


# --- payload -> record -------------------------------------------------------------

def _err(e: ErrorInfo | None) -> Record | None:
    if e is None:
        return None
    return {"type": e.type, "message": e.message, "retryable": e.retryable,
            "category": e.category, "http_status": e.http_status,
            "retry_after_ms": e.retry_after_ms}


def _tool_call(t: ToolCall) -> Record:
    return {"id": t.id, "name": t.name, "arguments": encode_value(t.arguments, "ToolCall.arguments")}


def _block(b: ContentBlock) -> Record:
    return {"kind": b.kind, "text": b.text, "mime_type": b.mime_type, "data": b.data, "uri": b.uri,
            "name": b.name, "size": b.size}


def _message(m: ChatMessage) -> Record:
    return {
        "role": m.role,
        "content": m.content,
        "tool_calls": [_tool_call(t) for t in m.tool_calls],
        "tool_call_id": m.tool_call_id,
        "extra_args": encode_value(m.extra_args, "ChatMessage.extra_args"),
        "blocks": [_block(b) for b in m.blocks],
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
        "blocks": [_block(b) for b in r.blocks],
    }


def attributes(event: Event) -> dict[str, Any]:
    if dataclasses.is_dataclass(event):
        return {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
    dump = getattr(event, "model_dump", None)
    if callable(dump):
        return dict(dump(mode="json"))
    return dict(vars(event))


def _in(p: Any) -> Record:
    return {"input": encode_value(p.input, "InputEvent.input"), "identity": _identity(p.identity)}


def _identity(who: Identity | None) -> Record | None:
    return None if who is None else {"user": who.user, "tenant": who.tenant}


def _identity_in(r: Record | None) -> Identity | None:
    return None if r is None else Identity(r["user"], r.get("tenant"))


def _out(p: Any) -> Record:
    return {"output": encode_value(p.output, "OutputEvent.output"), "error": _err(p.error),
            "input_id": p.input_id}


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
        "identity": _identity(p.identity),
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


WRITERS: dict[type, tuple[str, Callable[[Any], Record]]] = {
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


def payload_to_record(payload: Event) -> tuple[str, Record]:
    """The Avro union branch name and record of a payload (user events -> CustomEvent)."""
    writer = WRITERS.get(type(payload))
    if writer is not None:
        name, fn = writer
        return name, fn(payload)
    if not isinstance(payload, Event):
        raise EncodingError(f"{type(payload).__name__} is not an Event")
    type_name = type(payload).event_type
    return "eddies.CustomEvent", {
        "type_name": type_name,
        "attributes": encode_value(attributes(payload), type_name),
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


def _blocks_in(r: Record) -> list[ContentBlock]:
    # Records written before blocks existed have none (the reader's default).
    blocks = r.get("blocks")
    if not blocks:
        return []
    return [ContentBlock(_CONTENT_KINDS[b["kind"]], b["text"], b["mime_type"], b["data"], b["uri"],
                         b["name"], b["size"]) for b in blocks]


_CONTENT_KINDS = {kind.value: kind for kind in ContentKind}


def _message_in(r: Record) -> ChatMessage:
    return ChatMessage(
        _ROLES[r["role"]],
        r["content"],
        [_tool_call_in(t) for t in r["tool_calls"]],
        r["tool_call_id"],
        decode_value(r["extra_args"], "ChatMessage.extra_args"),
        _blocks_in(r),
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
    "eddies.InputEvent": lambda r: InputEvent(
        decode_value(r["input"], "InputEvent.input"),
        None if (who := r.get("identity")) is None else _identity_in(who)),
    "eddies.OutputEvent": lambda r: OutputEvent(
        decode_value(r["output"], "OutputEvent.output"), _err_in(r["error"]), r.get("input_id")
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
                _blocks_in(x),
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
        None if (who := r.get("identity")) is None else _identity_in(who),
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


__all__ = ["WRITERS", "Record", "attributes", "from_record", "payload_to_record", "to_record"]
