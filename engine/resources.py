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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from eddies.events import ChatMessage

from .tool_args import converters
from .tool_schema import docstring, parameters


class ResourceType(enum.StrEnum):
    """Kinds of resources, as in Apache Flink Agents."""

    CHAT_MODEL = "chat_model"
    CHAT_MODEL_CONNECTION = "chat_model_connection"
    TOOL = "tool"
    EMBEDDING_MODEL = "embedding_model"
    EMBEDDING_MODEL_CONNECTION = "embedding_model_connection"
    VECTOR_STORE = "vector_store"
    MEMORY_SET = "memory_set"
    PROMPT = "prompt"
    MCP_SERVER = "mcp_server"
    A2A_SERVER = "a2a_server"
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


def tool_spec(fn: Callable[..., Any], name: str | None = None, description: str | None = None,
              hidden: tuple[str, ...] = ()) -> ToolSpec:
    """A ToolSpec from a function's signature, type hints and docstring (see
    :mod:`.tool_schema`), without the parameters in ``hidden``."""
    params = parameters(fn, hidden)
    takes_more = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())
    if not takes_more:
        params["additionalProperties"] = False
    return ToolSpec(
        name=name or fn.__name__,
        description=description if description is not None else docstring(fn)[0],
        parameters=params,
    )


#: Where an injected argument comes from: the agent's config, the session's short-term
#: memory, the call itself (``call:id``: its deterministic id, the same on every attempt
#: to perform it, so a tool can pass it on as an idempotency key), or who asked for the
#: run (``identity:user``, ``identity:tenant``: None for an anonymous input).
INJECT_SOURCES = ("config", "memory", "call", "identity")


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
    #: Arguments the model neither sees nor sets: parameter -> ``"config:KEY"`` (the
    #: agent's config), ``"memory:KEY"`` (the session's short-term memory), filled in
    #: when the call is made, over anything the model sent; ``"identity:user"`` or
    #: ``"identity:tenant"``, who asked for the run (verified at admission; None when the
    #: input was anonymous); or ``"call:id"``, the call's id, filled in by the executor
    #: that performs it (an idempotency key for a tool that calls a service: a call made
    #: again after a crash carries the same one).
    inject: Mapping[str, str] = field(default_factory=dict)
    spec: ToolSpec = field(init=False)
    #: How JSON arguments become the parameters' types (enums, dataclasses, pydantic).
    converters: dict[str, Callable[[Any], Any]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        who = f"tool {self.name or getattr(self.fn, '__name__', self.fn)!r}"
        if self.approval_timeout_ms is not None and (
                type(self.approval_timeout_ms) is not int or self.approval_timeout_ms <= 0):
            raise ValueError(f"{who}: approval_timeout_ms must be a positive number of ms, got "
                             f"{self.approval_timeout_ms!r}")
        params = inspect.signature(self.fn).parameters
        for pname, source in self.inject.items():
            kind, _, key = str(source).partition(":")
            if pname not in params:
                raise ValueError(f"{who}: inject names {pname!r}, which is not a parameter of it")
            if kind not in INJECT_SOURCES or not key or (kind == "call" and key != "id") or (
                    kind == "identity" and key not in ("user", "tenant")):
                raise ValueError(f"{who}: inject[{pname!r}] must be 'config:KEY', 'memory:KEY', "
                                 f"'call:id', 'identity:user' or 'identity:tenant', got {source!r}")
        spec = tool_spec(self.fn, self.name or None, self.description, tuple(self.inject))
        object.__setattr__(self, "name", spec.name)
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "converters", converters(self.fn))

    def call(self, arguments: Mapping[str, Any]) -> Any:
        """Call the function with the JSON ``arguments`` made into its parameters' types."""
        convert = self.converters
        if not convert:
            return self.fn(**arguments)
        return self.fn(**{k: convert[k](v) if k in convert else v for k, v in arguments.items()})


@dataclass(frozen=True)
class ChatModelSetup:
    """A CHAT_MODEL resource: which connection, model name, tools and system prompt.

    Model calls are ``idempotent`` by default: they change nothing outside the provider, so
    one whose outcome was lost in a crash is asked again (tokens, not correctness). Set it
    False to fail closed instead. Example: ``ChatModelSetup("conn", model="gpt-4o-mini",
    tools=["add"], fallbacks=["backup"])``.
    """

    connection: str
    model: str = ""
    tools: tuple[str, ...] | list[str] = ()
    prompt: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    idempotent: bool = True
    #: How long an executor lets one model call run (None: the ``timeout_ms`` config).
    timeout_ms: int | None = None
    #: Other CHAT_MODEL resources asked in turn, the same messages, when a call of this one
    #: fails after its retries (a provider down, a model withdrawn): each call is durable,
    #: so which one answered is in the journal, and a replay or fork asks none again.
    fallbacks: tuple[str, ...] | list[str] = ()
    #: Write the answer to ``APP.stream`` as the model writes it (its connection must
    #: stream: see ChatModelConnection). The journal keeps the whole answer either way.
    stream: bool = False

    def __post_init__(self) -> None:
        # One form, so setups declared in Python, YAML or SQL compare equal.
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "fallbacks", tuple(self.fallbacks))


class ChatModelConnection(Protocol):
    """What a CHAT_MODEL_CONNECTION resource offers executors (sync or ``async def``).

    It returns the assistant message; usage, if known, goes in ``extra_args["usage"]``
    as ``{"prompt_tokens": n, "completion_tokens": m}``.

    A connection that streams says so with ``streams = True``: a call of a setup with
    ``stream=True`` then gets ``deltas=``, an object whose ``text(str)`` and
    ``tool_call(index, id, name, arguments)`` it calls with each part of the answer as
    the provider sends it, before it returns the whole message.
    """

    def chat(
        self, messages: list[ChatMessage], *, model: str, tools: list[ToolSpec], **arguments: Any
    ) -> ChatMessage | Awaitable[ChatMessage]: ...
