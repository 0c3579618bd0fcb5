"""Tools served by another process: the tools of an MCP server, or an A2A agent. The
engine only describes them; ``eddies.connectors.remote.mcp`` and ``eddies.connectors.remote.a2a``
connect, list the server's tools (fetch the agent's card) when a runner starts
(:attr:`McpTool.discovered`, :attr:`A2aTool.discovered` are filled then) and perform the
calls.

Example::

    agent.add_resource("time_server", ResourceType.MCP_SERVER,
                       McpServer(command="python", args=("-m", "mcp_server_time")))
    agent.add_resource("time", ResourceType.TOOL,
                       McpTool("time_server", allowed_tools=("get_current_time",)))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["time"]))

The model sees each allowed tool under the server's name for it, with the server's own
input schema (and description, unless overridden). An A2A agent is one tool, named and
described by its agent card, taking one ``prompt``::

    agent.add_resource("helper", ResourceType.A2A_SERVER, A2aServer("http://helper:9999"))
    agent.add_resource("ask", ResourceType.TOOL,
                       A2aTool("helper", agent_card_path="/.well-known/agent-card.json"))
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .resources import FunctionTool, ToolSpec
from .retry import RetryPolicy

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REDACT = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", re.I)
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

#: The metadata key (MCP ``_meta``, A2A message metadata) that carries a call's id, so a
#: server can tell a call made again after a crash from a new one.
IDEMPOTENCY_META = "io.eddies/idempotency-key"


def redact_url(url: str) -> str:
    """``url`` as logs and errors show it: without user info or query (where credentials
    may hide)."""
    return _REDACT.sub(r"\1", url).split("?", 1)[0]


def _check_api_key_env(who: str, name: str | None) -> None:
    if name is not None and not _ENV_NAME.match(name):
        raise ValueError(f"{who}.api_key_env: {name!r} is not the name of an "
                         "environment variable (the key's NAME goes here, not the key)")


def _check_call_options(who: str, max_retries: Any, request_timeout: Any) -> None:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"{who}.max_retries: expected a whole number >= 0, got {max_retries!r}")
    if (isinstance(request_timeout, bool) or not isinstance(request_timeout, int | float)
            or not request_timeout > 0):
        raise ValueError(f"{who}.request_timeout: expected a positive number of seconds, "
                         f"got {request_timeout!r}")


@dataclass(frozen=True)
class McpServer:
    """An MCP server (ResourceType.MCP_SERVER): a streamable HTTP ``url``, or a ``command``
    (with ``args``, ``env``) run over stdio. ``headers`` go with every HTTP request; a
    value written ``${NAME}`` is read from the environment variable NAME when the runner
    starts. ``api_key_env`` is the NAME of the environment variable holding an API key
    (sent as a bearer token; to a stdio command as that variable): the key itself is
    never part of the agent, an event or an error."""

    url: str | None = None
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    api_key_env: str | None = None
    #: Where its tools' images, audio and files over the inline limit are kept (a
    #: BlobStore of eddies.engine.content; None: they are not carried).
    blob_store: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if (self.url is None) == (self.command is None):
            raise ValueError("McpServer: give either url (streamable HTTP) or command (stdio), "
                             "not both and not neither")
        _check_api_key_env("McpServer", self.api_key_env)
        object.__setattr__(self, "args", tuple(self.args))

    @property
    def where(self) -> str:
        """The server, as logs and errors name it: its URL without user info or query (where
        credentials may hide), or its command without arguments."""
        if self.url is None:
            return self.command or ""
        return redact_url(self.url)


@dataclass(frozen=True)
class McpTool:
    """The tools of MCP server resource ``server`` a model may call (ResourceType.TOOL),
    with the Confluent runtime's options: ``allowed_tools`` (required: each is checked
    against the server's list when the runner starts, an unknown name an error naming it),
    ``request_timeout`` (s) per call, ``max_retries`` after a transient failure, and
    ``descriptions`` overriding the server's by tool name. Calls are re-run after a crash
    left their outcome unknown (``idempotent``): each carries its call id as an
    idempotency key in ``_meta``, so a server can tell a repeat."""

    server: str
    allowed_tools: tuple[str, ...] | list[str]
    request_timeout: float = 20.0
    max_retries: int = 2
    descriptions: Mapping[str, str] = field(default_factory=dict)
    idempotent: bool = True
    #: Filled when the runner starts: each allowed tool's spec, as the server lists it.
    discovered: dict[str, ToolSpec] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        allowed = tuple(self.allowed_tools)
        if not allowed or not all(isinstance(t, str) and t for t in allowed):
            raise ValueError(f"McpTool on {self.server!r}: allowed_tools is required: the names of "
                             f"the server's tools a model may call, got {self.allowed_tools!r}")
        object.__setattr__(self, "allowed_tools", allowed)
        _check_call_options("McpTool", self.max_retries, self.request_timeout)
        unknown = set(self.descriptions) - set(allowed)
        if unknown:
            raise ValueError(f"McpTool.descriptions: {', '.join(sorted(unknown))} not in allowed_tools")


@dataclass(frozen=True)
class A2aServer:
    """An A2A agent's server (ResourceType.A2A_SERVER): its base ``url``. ``headers`` go
    with every request (the agent card's too); a value written ``${NAME}`` is read from
    the environment variable NAME when the runner starts. ``api_key_env`` is the NAME of
    the environment variable holding an API key, sent as a bearer token: the key itself
    is never part of the agent, an event or an error."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    api_key_env: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not re.match(r"^https?://[^/?#]", self.url, re.I):
            raise ValueError(f"A2aServer.url: expected the agent's http(s) base URL, got "
                             f"{redact_url(str(self.url))!r}")
        _check_api_key_env("A2aServer", self.api_key_env)

    @property
    def where(self) -> str:
        """The server, as logs and errors name it: its URL without user info or query."""
        return redact_url(self.url)


@dataclass(frozen=True)
class A2aTool:
    """An A2A agent a model may call (ResourceType.TOOL), on A2A_SERVER resource
    ``server``: one tool taking one ``prompt`` (what to ask the agent). Its card, at
    ``agent_card_path`` on the server (required, e.g. ``/.well-known/agent-card.json``),
    is fetched when the runner starts: its ``name`` (made a tool name) and ``description``
    are the tool's unless given here. ``request_timeout`` (s) bounds one call (sending the
    message and following its task to the end), ``max_retries`` the retries after a
    transient failure. Calls are re-run after a crash left their outcome unknown
    (``idempotent``): each carries its call id as an idempotency key, in the message's
    metadata and as the ``Idempotency-Key`` header, so an agent can tell a repeat."""

    server: str
    agent_card_path: str = ""
    name: str | None = None
    description: str | None = None
    request_timeout: float = 60.0
    max_retries: int = 2
    idempotent: bool = True
    #: Filled when the runner starts: the one tool's spec, from the agent's card.
    discovered: dict[str, ToolSpec] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.server, str) or not self.server:
            raise ValueError(f"A2aTool.server: expected the name of an A2A_SERVER resource, "
                             f"got {self.server!r}")
        path = self.agent_card_path
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"A2aTool on {self.server!r}: agent_card_path is required: the path of "
                             "the agent's card on its server, e.g. '/.well-known/agent-card.json', "
                             f"got {path!r}")
        if self.name is not None and not (isinstance(self.name, str) and _TOOL_NAME.match(self.name)):
            raise ValueError(f"A2aTool.name: expected 1 to 64 letters, digits, '_' or '-', "
                             f"got {self.name!r}")
        _check_call_options("A2aTool", self.max_retries, self.request_timeout)


#: What a model sends an A2A agent: one message.
A2A_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "description":
                              "What to ask the agent: the whole request, in plain words."}},
    "required": ["prompt"],
    "additionalProperties": False,
}


def tool_name(text: str) -> str:
    """``text`` (an agent card's name) as a tool name: each run of characters other than
    letters, digits, '_' and '-' becomes one '_', cut to 64 characters."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_")[:64]
    return name or "agent"


def a2a_spec(tool: A2aTool, card_name: str, card_description: str) -> ToolSpec:
    """The spec of ``tool`` from its agent card's name and description (unless the tool
    gives its own)."""
    description = tool.description if tool.description is not None else card_description
    return ToolSpec(tool.name or tool_name(card_name), description, copy.deepcopy(A2A_PARAMETERS))


@dataclass(frozen=True)
class RemoteTool:
    """One tool of an MCP server, or an A2A agent, as the plan holds it (a TOOL under the
    server's name for it): what a model is told, and how its calls go."""

    name: str
    spec: ToolSpec
    resource: str  # the McpTool or A2aTool resource it comes from
    server: str  # the McpServer or A2aServer resource
    idempotent: bool
    timeout_ms: int
    retry: RetryPolicy
    requires_approval: bool = False
    approval_timeout_ms: int | None = None
    inject: Mapping[str, str] = field(default_factory=dict)
    #: Who performs the calls: "mcp" (eddies.connectors.remote.mcp) or "a2a" (eddies.connectors.remote.a2a).
    protocol: Literal["mcp", "a2a"] = "mcp"


#: A TOOL of a plan: a Python function, or one tool of an MCP server or A2A agent.
AnyTool = FunctionTool | RemoteTool


def remote_names(tool: McpTool | A2aTool) -> tuple[str, ...]:
    """The names a model sees ``tool`` under: an MCP tool's allowed tools, an A2A tool's
    one name (known once its card was fetched)."""
    return tuple(tool.allowed_tools if isinstance(tool, McpTool) else tool.discovered)


def remote_tools(resource: str, tool: McpTool | A2aTool) -> list[RemoteTool]:
    """The plan's entries for ``tool``'s tools (its ``discovered`` specs)."""
    retry = RetryPolicy(max_attempts=tool.max_retries + 1, base_delay_ms=500, max_delay_ms=10_000)
    if isinstance(tool, A2aTool):
        return [RemoteTool(name, spec, resource, tool.server, tool.idempotent,
                           round(tool.request_timeout * 1000), retry, protocol="a2a")
                for name, spec in tool.discovered.items()]
    out = []
    for name in tool.allowed_tools:
        spec = tool.discovered[name]
        if name in tool.descriptions:
            spec = ToolSpec(name, tool.descriptions[name], spec.parameters)
        out.append(RemoteTool(name, spec, resource, tool.server, tool.idempotent,
                              round(tool.request_timeout * 1000), retry))
    return out


def spec_from_listing(name: str, description: str | None, input_schema: Mapping[str, Any]) -> ToolSpec:
    """A ToolSpec from a server's listing of a tool."""
    schema = dict(input_schema) if input_schema else {"type": "object", "properties": {}}
    return ToolSpec(name, description or "", schema)


__all__ = ["A2A_PARAMETERS", "IDEMPOTENCY_META", "A2aServer", "A2aTool", "AnyTool", "McpServer", "McpTool",
           "RemoteTool", "a2a_spec", "redact_url", "remote_names", "remote_tools", "spec_from_listing",
           "tool_name"]
