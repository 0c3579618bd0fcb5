"""Typed payloads of the ``AgentEvent`` envelope, one class per Avro record.

Names and fields follow Apache Flink Agents where it has them
(``InputEvent(input=...)``, ``OutputEvent(output=...)``,
``ChatRequestEvent(model=..., messages=...)``). Fields documented as values hold any
JSON-encodable Python value (see :mod:`.values`).

User-defined events subclass :class:`Event`; they travel as ``CustomEvent`` records
(type name + JSON attributes), so no schema changes are needed::

    @dataclass
    class Reviewed(Event):
        score: int

    event_type_name(Reviewed(score=3))  # 'Reviewed'
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .values import Base64Bytes


class Event:
    """Base of every event payload. Subclass it (as a dataclass) for custom events.

    ``event_type`` names the type on the wire; it defaults to the class name. Classes are
    registered when defined, so a decoder finds them by that name.
    """

    __slots__ = ()
    event_type: ClassVar[str] = ""
    _builtin: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("event_type"):
            cls.event_type = cls.__name__
        if not cls.__dict__.get("_builtin", False) and cls.event_type in BUILTIN_TYPES:
            raise TypeError(
                f"event type name {cls.event_type!r} of {cls.__qualname__} is reserved for a "
                "built-in event; set a different `event_type` on the class"
            )
        # A dataclass(slots=True) re-creates the class; the last definition wins.
        EVENT_TYPES[cls.event_type] = cls


EVENT_TYPES: dict[str, type[Event]] = {}
BUILTIN_TYPES = frozenset(
    {
        "InputEvent",
        "OutputEvent",
        "ChatRequestEvent",
        "ChatResponseEvent",
        "ToolRequestEvent",
        "ToolResponseEvent",
        "SubagentCallEvent",
        "SubagentResultEvent",
        "DurableCallRequest",
        "DurableCallResult",
        "CustomEvent",
        "SignalEvent",
        "ApprovalRequestEvent",
        "ContextRetrievalRequestEvent",
        "ContextRetrievalResponseEvent",
    }
)


def event_type_name(event: Event) -> str:
    """The wire type name of ``event`` (``CustomEvent``s report their own type_name)."""
    if isinstance(event, CustomEvent):
        return event.type_name
    return type(event).event_type


class MessageRole(enum.StrEnum):
    """Who produced a chat message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


#: The scheme of a reference to bytes kept in a blob store (``eddies-blob:sha256:HEX``).
BLOB_SCHEME = "eddies-blob:sha256:"


class ContentKind(enum.StrEnum):
    """What a content block holds."""

    TEXT = "text"
    IMAGE = "image"
    AUDIO = "audio"
    FILE = "file"
    RESOURCE = "resource"


@dataclass(slots=True)
class ContentBlock:
    """A part of a chat message or a tool's result beside its text: an image, audio or a
    file (``data``: its bytes, when within the size limit; ``size``: their size, carried or
    not), or a resource (``text`` under ``uri``, or a link to ``uri``). Example:
    ``ContentBlock(ContentKind.IMAGE, mime_type="image/png", data=png, size=len(png))``."""

    kind: ContentKind = ContentKind.TEXT
    text: str = ""
    mime_type: str | None = None
    data: bytes | None = None
    uri: str | None = None
    name: str | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, ContentKind):
            self.kind = ContentKind(self.kind)
        if self.data is not None and type(self.data) is not Base64Bytes:
            self.data = Base64Bytes(self.data)  # JSON (a call's arguments) holds it as base64

    def describe(self) -> str:
        """One line saying what it is (for logs, traces, replays): ``[image image/png,
        95 bytes]``, ``[resource file:///guide.txt]``."""
        what = " ".join(x for x in (self.kind.value, self.mime_type or "", self.name or "") if x)
        parts = [what]
        carried = (self.data is not None or self.kind is ContentKind.RESOURCE
                   or (self.uri or "").startswith(BLOB_SCHEME))
        if self.size is not None:
            parts.append(f"{self.size} bytes" + ("" if carried else ": not carried"))
        if self.uri:
            parts.append(self.uri)
        return "[" + ", ".join(parts) + "]"


class CallKind(enum.StrEnum):
    """What a durable call does; executors dispatch on it."""

    FUNCTION = "FUNCTION"
    CHAT_MODEL = "CHAT_MODEL"
    TOOL = "TOOL"
    SUBAGENT = "SUBAGENT"
    RECONCILE = "RECONCILE"
    TIMER = "TIMER"  # answered at its not_before time
    SIGNAL = "SIGNAL"  # answered by a SignalEvent, or a TimeoutError at not_before
    EMBEDDING = "EMBEDDING"  # texts made into vectors by an embedding model
    VECTOR_STORE = "VECTOR_STORE"  # an operation on a vector store (a query, a write)


class CallStatus(enum.StrEnum):
    """Outcome of a durable call. UNKNOWN: it started and may or may not have happened."""

    OK = "OK"
    ERROR = "ERROR"
    UNKNOWN = "UNKNOWN"


class ErrorCategory(enum.StrEnum):
    """What kind of failure an error is; it decides whether a call is retried."""

    UNCLASSIFIED = "UNCLASSIFIED"  # written before errors were classified
    TRANSIENT = "TRANSIENT"  # may succeed if tried again: timeouts, 408, 409, 429, 5xx
    PERMANENT = "PERMANENT"  # fails again the same way: 400, 401, 403, 404, 422
    CALLEE = "CALLEE"  # the called function or tool itself raised


@dataclass(slots=True)
class ErrorInfo:
    """An error: exception type name, message, whether a retry may succeed, its category,
    and the HTTP status and Retry-After (ms) of a failed request where there were some."""

    type: str
    message: str
    retryable: bool = False
    category: ErrorCategory = ErrorCategory.UNCLASSIFIED
    http_status: int | None = None
    retry_after_ms: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.category, ErrorCategory):
            self.category = ErrorCategory(self.category)

    @classmethod
    def of(cls, err: BaseException, retryable: bool = False) -> ErrorInfo:
        """Describe an exception: ``ErrorInfo.of(ValueError("x"))`` (unclassified; executors
        classify what they catch, see ``eddies.connectors.remote.error_classes``)."""
        return cls(type(err).__name__, str(err), retryable)


@dataclass(frozen=True, slots=True)
class Identity:
    """Who asked: the end user an input is from, and their tenant (None: none). It counts
    only when its producer signed the record (see ``docs/guide/identity.md``); the session
    then gives it to every call of the run the input starts. Example::

        Identity("u-42", tenant="acme")
    """

    user: str
    tenant: str | None = None


@dataclass(slots=True)
class TokenUsage:
    """What model calls consumed: tokens, cost (USD, None: unknown), time, attempts."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    latency_ms: int = 0
    attempts: int = 0

    @property
    def total_tokens(self) -> int:
        """Tokens in and out."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(slots=True)
class ToolCall:
    """A model's request to call tool ``name`` with ``arguments`` (a dict)."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ChatMessage:
    """One message of a conversation with a chat model."""

    role: MessageRole = MessageRole.USER
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    extra_args: dict[str, Any] = field(default_factory=dict)
    #: Content beside the text (images, audio, files, resources), for models that take it.
    blocks: list[ContentBlock] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.role, MessageRole):
            self.role = MessageRole(self.role)


@dataclass(slots=True)
class InputEvent(Event):
    """A user's input; starts a run of the session's agent."""

    event_type: ClassVar[str] = "InputEvent"
    _builtin: ClassVar[bool] = True
    input: Any = None
    #: Who asked, verified at admission (None: anonymous).
    identity: Identity | None = None


@dataclass(slots=True)
class OutputEvent(Event):
    """A result of a run for downstream consumers; ``error`` is set when the run failed.
    ``input_id`` is set by the engine: the event id of the input whose run this answers
    (not compared: two outputs are equal when they say the same)."""

    event_type: ClassVar[str] = "OutputEvent"
    _builtin: ClassVar[bool] = True
    output: Any = None
    error: ErrorInfo | None = None
    input_id: str | None = field(default=None, compare=False)


@dataclass(slots=True)
class ChatRequestEvent(Event):
    """Ask the CHAT_MODEL resource named ``model`` to answer ``messages``."""

    event_type: ClassVar[str] = "ChatRequestEvent"
    _builtin: ClassVar[bool] = True
    model: str = ""
    messages: list[ChatMessage] = field(default_factory=list)
    output_schema: Any = None


@dataclass(slots=True)
class ChatResponseEvent(Event):
    """The final answer to the ChatRequestEvent whose event_id is ``request_id``."""

    event_type: ClassVar[str] = "ChatResponseEvent"
    _builtin: ClassVar[bool] = True
    request_id: str = ""
    response: ChatMessage = field(default_factory=ChatMessage)
    usage: TokenUsage | None = None


@dataclass(slots=True)
class ToolRequestEvent(Event):
    """Tool calls a chat model asked for, executed as one batch."""

    event_type: ClassVar[str] = "ToolRequestEvent"
    _builtin: ClassVar[bool] = True
    request_id: str = ""
    model: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass(slots=True)
class ToolResult:
    """The outcome of one tool call: ``result`` or ``error``."""

    tool_call_id: str
    name: str
    result: Any = None
    error: ErrorInfo | None = None
    #: Content the tool gave beside its result (an MCP tool's image, say).
    blocks: list[ContentBlock] = field(default_factory=list)


@dataclass(slots=True)
class ToolResponseEvent(Event):
    """Results of a ToolRequestEvent's calls, in call order."""

    event_type: ClassVar[str] = "ToolResponseEvent"
    _builtin: ClassVar[bool] = True
    request_id: str = ""
    responses: list[ToolResult] = field(default_factory=list)


@dataclass(slots=True)
class SubagentCallEvent(Event):
    """A call of the AGENT resource ``agent`` with ``input``."""

    event_type: ClassVar[str] = "SubagentCallEvent"
    _builtin: ClassVar[bool] = True
    call_id: str = ""
    agent: str = ""
    input: Any = None
    timeout_ms: int | None = None


@dataclass(slots=True)
class SubagentResultEvent(Event):
    """A sub-agent's answer to the SubagentCallEvent ``call_id``."""

    event_type: ClassVar[str] = "SubagentResultEvent"
    _builtin: ClassVar[bool] = True
    call_id: str = ""
    output: Any = None
    error: ErrorInfo | None = None


@dataclass(slots=True)
class DurableCallRequest(Event):
    """A side effect for an executor to perform.

    ``args`` is JSON text of ``{"args": [...], "kwargs": {...}}``: kept encoded, because
    its digest is what replay compares and executors decode it once.
    """

    event_type: ClassVar[str] = "DurableCallRequest"
    _builtin: ClassVar[bool] = True
    call_id: str = ""
    kind: CallKind = CallKind.FUNCTION
    target: str = ""
    args: str = '{"args":[],"kwargs":{}}'
    idempotent: bool = False
    attempt: int = 1
    timeout_ms: int | None = None
    digest: str = ""  # of kind, target and args; echoed by the result
    not_before: int | None = None  # logical ms: executors hold it until then
    identity: Identity | None = None  # who asked for the run: what remote sub-agents are told

    @property
    def for_executor(self) -> bool:
        """Whether an executor has anything to do with it: not for a signal wait without a
        deadline (only a SignalEvent answers that)."""
        return self.kind is not CallKind.SIGNAL or self.not_before is not None


@dataclass(slots=True)
class DurableCallResult(Event):
    """The outcome of a DurableCallRequest; ``value`` is JSON text of the return value."""

    event_type: ClassVar[str] = "DurableCallResult"
    _builtin: ClassVar[bool] = True
    call_id: str = ""
    kind: CallKind = CallKind.FUNCTION
    status: CallStatus = CallStatus.OK
    value: str = "null"
    error: ErrorInfo | None = None
    attempt: int = 1
    digest: str = ""


@dataclass(slots=True)
class CustomEvent(Event):
    """A user-defined event not known to this process: a type name and its attributes."""

    event_type: ClassVar[str] = "CustomEvent"
    _builtin: ClassVar[bool] = True
    type_name: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class SignalEvent(Event):
    """A signal from outside: completes the session's ``ctx.wait_for_signal(name)``, or
    waits in the session for the next one. Any producer may send it, e.g.
    ``AgentEvent.external("s1", SignalEvent("approval:c1", True), event_id="a1",
    timestamp=now_ms)`` encoded and produced to ``APP.input`` with key ``s1``."""

    event_type: ClassVar[str] = "SignalEvent"
    _builtin: ClassVar[bool] = True
    name: str = ""
    value: Any = None


@dataclass(slots=True)
class ApprovalRequestEvent(Event):
    """A tool call waiting for a person's approval (a tool declared ``requires_approval``):
    written to ``APP.output``; a ``SignalEvent`` named ``signal`` answers it, e.g.
    ``eddies approve s1 approval:s1:r1:i3:c0``. No answer by ``deadline`` (logical ms)
    counts as a rejection."""

    event_type: ClassVar[str] = "ApprovalRequestEvent"
    _builtin: ClassVar[bool] = True
    signal: str = ""
    tool: str = ""
    tool_call_id: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    deadline: int | None = None


@dataclass(slots=True)
class Document:
    """A text with its metadata, as a vector store holds it. ``id`` None: not given yet
    (the store gives one); ``score``: its nearness to a query (cosine similarity, higher
    is nearer), in a query's answer only. Example: ``Document("Hostels in Lisbon",
    {"city": "Lisbon"})``."""

    content: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    score: float | None = None


@dataclass(slots=True)
class ContextRetrievalRequestEvent(Event):
    """Find the documents of VECTOR_STORE resource ``vector_store`` nearest to ``query``
    (at most ``max_results``, matching ``filters``); the built-in retrieval action answers
    with a :class:`ContextRetrievalResponseEvent`, its query a durable call. Example:
    ``ctx.send_event(ContextRetrievalRequestEvent("a cheap bed", "docs", max_results=5))``."""

    event_type: ClassVar[str] = "ContextRetrievalRequestEvent"
    _builtin: ClassVar[bool] = True
    query: str = ""
    vector_store: str = ""
    max_results: int = 3
    filters: dict[str, Any] | None = None
    collection: str | None = None


@dataclass(slots=True)
class ContextRetrievalResponseEvent(Event):
    """The documents found for the ContextRetrievalRequestEvent whose event_id is
    ``request_id``, nearest first."""

    event_type: ClassVar[str] = "ContextRetrievalResponseEvent"
    _builtin: ClassVar[bool] = True
    request_id: str = ""
    query: str = ""
    documents: list[Document] = field(default_factory=list)
