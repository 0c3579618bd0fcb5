"""Typed Eddies events and their Avro wire form.

The classes here follow ``schemas/avro/*.avsc`` (the contract). Example::

    from eddies.events import AgentEvent, InputEvent, decode, encode

    ev = AgentEvent.external("s1", InputEvent(input="hi"), event_id="in-1", timestamp=0)
    assert decode(encode(ev)).payload == InputEvent(input="hi")
"""

from .codec import (
    FINGERPRINT_HEADER,
    SCHEMA_HEADER,
    decode,
    decode_record,
    encode,
    encode_record,
    headers,
)
from .envelope import (
    KNOWN_SCHEMA_VERSIONS,
    MAX_TIMESTAMP_MS,
    MIN_TIMESTAMP_MS,
    AgentEvent,
    envelope_problem,
)
from .errors import DecodeError, EncodingError
from .partitioner import murmur2, partition_for
from .payloads import (
    BLOB_SCHEME,
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
    event_type_name,
)
from .records import from_record, to_record
from .values import decode_value, encode_value

__all__ = [
    "BLOB_SCHEME",
    "FINGERPRINT_HEADER",
    "KNOWN_SCHEMA_VERSIONS",
    "MAX_TIMESTAMP_MS",
    "MIN_TIMESTAMP_MS",
    "SCHEMA_HEADER",
    "AgentEvent",
    "ApprovalRequestEvent",
    "CallKind",
    "CallStatus",
    "ChatMessage",
    "ChatRequestEvent",
    "ChatResponseEvent",
    "ContentBlock",
    "ContentKind",
    "ContextRetrievalRequestEvent",
    "ContextRetrievalResponseEvent",
    "CustomEvent",
    "DecodeError",
    "Document",
    "DurableCallRequest",
    "DurableCallResult",
    "EncodingError",
    "ErrorCategory",
    "ErrorInfo",
    "Event",
    "Identity",
    "InputEvent",
    "MessageRole",
    "OutputEvent",
    "SignalEvent",
    "SubagentCallEvent",
    "SubagentResultEvent",
    "TokenUsage",
    "ToolCall",
    "ToolRequestEvent",
    "ToolResponseEvent",
    "ToolResult",
    "decode",
    "decode_record",
    "decode_value",
    "encode",
    "encode_record",
    "encode_value",
    "envelope_problem",
    "event_type_name",
    "from_record",
    "headers",
    "murmur2",
    "partition_for",
    "to_record",
]
