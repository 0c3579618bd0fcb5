"""``AgentEvent`` <-> Avro bytes (schemaless, fastavro) and <-> Avro-shaped dicts.

Records carry no schema; the envelope schema's fingerprint travels in a record header
(:func:`headers`), so a reader picks the right writer schema. Example::

    data = encode(ev)
    assert decode(data) == ev
"""

from __future__ import annotations

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
    ChatMessage,
    ContentBlock,
    CustomEvent,
    Document,
    ErrorInfo,
    Event,
    Identity,
    TokenUsage,
    ToolCall,
    ToolResult,
)
from .records import WRITERS, Record, attributes, from_record, payload_to_record
from .schemas import envelope_fingerprint, envelope_schema
from .values import _default as _value_default
from .values import encode_value

SCHEMA_HEADER = "eddies.schema"
FINGERPRINT_HEADER = "eddies.schema.fingerprint"

def headers() -> list[tuple[str, bytes]]:
    """Kafka record headers naming the writer schema of :func:`encode`'s bytes."""
    return [
        (SCHEMA_HEADER, f"AgentEvent/{SCHEMA_VERSION}".encode()),
        (FINGERPRINT_HEADER, envelope_fingerprint().encode()),
    ]


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
    return "eddies.CustomEvent", CustomEvent(type(payload).event_type, attributes(payload))


@functools.cache
def _object_binding() -> ObjectBinding:
    """The envelope's records as the classes of :mod:`.payloads` (the field names are the
    schema's); value fields are JSON text on the wire."""
    classes: dict[str, type] = {name: kind for kind, (name, _) in WRITERS.items()}
    classes.update({"eddies.AgentEvent": AgentEvent, "eddies.ChatMessage": ChatMessage,
                    "eddies.ToolCall": ToolCall, "eddies.ToolResult": ToolResult,
                    "eddies.ErrorInfo": ErrorInfo, "eddies.TokenUsage": TokenUsage,
                    "eddies.Document": Document, "eddies.ContentBlock": ContentBlock,
                    "eddies.Identity": Identity})
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


def prepare() -> None:
    """Compile the reader and the writers now (~20 ms) rather than on the first record
    decoded or encoded, which a long-running process's first answer would wait for.
    Idempotent. Example::

        prepare()   # a worker, before it joins its groups
    """
    _codec()
    _writers()


def _check_default(obj: Any) -> Any:
    # Like the value encoding, plus user events that are plain classes.
    if isinstance(obj, Event):
        return attributes(obj)
    return _value_default(obj)


def validate_payload(payload: Event) -> None:
    """Raise EncodingError, naming the field, if ``payload`` cannot be written.

    Built-in events are written (their Avro writer checks every field's type and structure,
    and names a value field that is not JSON-encodable); user events go through one C-speed
    JSON pass, and only when that fails through the full conversion, to name the field.
    """
    kind = type(payload)
    branch = WRITERS.get(kind)
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
