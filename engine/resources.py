"""Resources an agent declares with ``add_resource``: chat models, tools, prompts, ...

The engine only *describes* resources; connectors perform them (a chat model
connection is an HTTP client, a tool may be an MCP server). Example::

    agent.add_resource("add", ResourceType.TOOL, add)   # a plain function is a tool
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel())
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["add"]))
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, Union

from eddies.events import ChatMessage


class ResourceType(enum.StrEnum):
    """Kinds of resources, as in Apache Flink Agents."""

    CHAT_MODEL = "chat_model"
    CHAT_MODEL_CONNECTION = "chat_model_connection"
    TOOL = "tool"
    EMBEDDING_MODEL = "embedding_model"
    VECTOR_STORE = "vector_store"
    PROMPT = "prompt"
    MCP_SERVER = "mcp_server"
    SKILLS = "skills"
    AGENT = "agent"


@dataclass(frozen=True)
class ToolSpec:
    """What a model is told about a tool: name, description, JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI ``function`` shape: ``{"name", "description", "parameters"}``."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


_JSON_TYPES: dict[Any, str] = {
    int: "integer",
    float: "number",
    str: "string",
    bool: "boolean",
    list: "array",
    tuple: "array",
    dict: "object",
}


def _json_type(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _json_type(inner[0]) if len(inner) == 1 else {}
    if origin is not None:
        annotation = origin
    name = _JSON_TYPES.get(annotation)
    return {"type": name} if name else {}


def tool_spec(fn: Callable[..., Any], name: str | None = None, description: str | None = None) -> ToolSpec:
    """Derive a ToolSpec from a function's signature, annotations and docstring."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: fall back to untyped params
        hints = {}
    props: dict[str, Any] = {}
    required: list[str] = []
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        props[pname] = _json_type(hints.get(pname, Any))
        if param.default is param.empty:
            required.append(pname)
    doc = inspect.getdoc(fn) or ""
    return ToolSpec(
        name=name or fn.__name__,
        description=description if description is not None else doc.split("\n\n")[0],
        parameters={"type": "object", "properties": props, "required": required},
    )


@dataclass(frozen=True)
class FunctionTool:
    """A Python function offered to models as a tool.

    ``idempotent`` tools may be re-run when a crash leaves their outcome unknown. A tool
    that ``requires_approval`` runs only once a person approves the call (see
    :mod:`eddies.engine.approval`). Example: ``FunctionTool(add, idempotent=True,
    timeout_ms=5_000)``, ``FunctionTool(refund, requires_approval=True,
    approval_timeout_ms=600_000)``.
    """

    fn: Callable[..., Any]
    name: str = ""
    description: str | None = None
    idempotent: bool = False
    #: How long an executor lets one call run before abandoning it as a (transient)
    #: timeout; None: the agent's ``timeout_ms`` config for tools.
    timeout_ms: int | None = None
    #: Each call waits for a person's approval (an ApprovalRequestEvent in APP.output).
    requires_approval: bool = False
    #: How long a call waits for it; None: the agent's ``approval_timeout_ms`` config.
    approval_timeout_ms: int | None = None
    spec: ToolSpec = field(init=False)

    def __post_init__(self) -> None:
        if self.approval_timeout_ms is not None and (
                type(self.approval_timeout_ms) is not int or self.approval_timeout_ms <= 0):
            raise ValueError(f"tool {self.name or self.fn!r}: approval_timeout_ms must be a "
                             f"positive number of ms, got {self.approval_timeout_ms!r}")
        spec = tool_spec(self.fn, self.name or None, self.description)
        object.__setattr__(self, "name", spec.name)
        object.__setattr__(self, "spec", spec)


@dataclass(frozen=True)
class ChatModelSetup:
    """A CHAT_MODEL resource: which connection, model name, tools and system prompt.

    Model calls are ``idempotent`` by default: they change nothing outside the provider, so
    one whose outcome was lost in a crash is asked again (tokens, not correctness). Set it
    False to fail closed instead. Example: ``ChatModelSetup("conn", model="gpt-4o-mini",
    tools=["add"])``.
    """

    connection: str
    model: str = ""
    tools: tuple[str, ...] | list[str] = ()
    prompt: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    idempotent: bool = True
    #: How long an executor lets one model call run (None: the ``timeout_ms`` config).
    timeout_ms: int | None = None


class ChatModelConnection(Protocol):
    """What a CHAT_MODEL_CONNECTION resource offers executors (sync or ``async def``).

    It returns the assistant message; usage, if known, goes in ``extra_args["usage"]``
    as ``{"prompt_tokens": n, "completion_tokens": m}``.
    """

    def chat(
        self, messages: list[ChatMessage], *, model: str, tools: list[ToolSpec], **arguments: Any
    ) -> ChatMessage | Awaitable[ChatMessage]: ...
