"""Tools served by another process: the tools of an MCP server. The engine only describes
them; ``eddies.connectors.mcp`` connects, lists the server's tools when a runner starts
(:meth:`McpTool.discovered` is filled then) and performs the calls.

Example::

    agent.add_resource("time_server", ResourceType.MCP_SERVER,
                       McpServer(command="python", args=("-m", "mcp_server_time")))
    agent.add_resource("time", ResourceType.TOOL,
                       McpTool("time_server", allowed_tools=("get_current_time",)))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["time"]))

The model sees each allowed tool under the server's name for it, with the server's own
input schema (and description, unless overridden).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .resources import FunctionTool, ToolSpec
from .retry import RetryPolicy

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REDACT = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", re.I)


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

    def __post_init__(self) -> None:
        if (self.url is None) == (self.command is None):
            raise ValueError("McpServer: give either url (streamable HTTP) or command (stdio), "
                             "not both and not neither")
        if self.api_key_env is not None and not _ENV_NAME.match(self.api_key_env):
            raise ValueError(f"McpServer.api_key_env: {self.api_key_env!r} is not the name of an "
                             "environment variable (the key's NAME goes here, not the key)")
        object.__setattr__(self, "args", tuple(self.args))

    @property
    def where(self) -> str:
        """The server, as logs and errors name it: its URL without user info or query (where
        credentials may hide), or its command without arguments."""
        if self.url is None:
            return self.command or ""
        return _REDACT.sub(r"\1", self.url).split("?", 1)[0]


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
        retries = self.max_retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"McpTool.max_retries: expected a whole number >= 0, got {retries!r}")
        timeout = self.request_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(f"McpTool.request_timeout: expected a positive number of seconds, "
                             f"got {timeout!r}")
        unknown = set(self.descriptions) - set(allowed)
        if unknown:
            raise ValueError(f"McpTool.descriptions: {', '.join(sorted(unknown))} not in allowed_tools")


@dataclass(frozen=True)
class RemoteTool:
    """One tool of an MCP server as the plan holds it (a TOOL under the server's name for
    it): what a model is told, and how its calls go."""

    name: str
    spec: ToolSpec
    resource: str  # the McpTool resource it comes from
    server: str  # the McpServer resource
    idempotent: bool
    timeout_ms: int
    retry: RetryPolicy
    requires_approval: bool = False
    approval_timeout_ms: int | None = None
    inject: Mapping[str, str] = field(default_factory=dict)


#: A TOOL of a plan: a Python function, or one tool of an MCP server.
AnyTool = FunctionTool | RemoteTool


def remote_tools(resource: str, tool: McpTool) -> list[RemoteTool]:
    """The plan's entries for ``tool``'s allowed tools (its ``discovered`` specs)."""
    retry = RetryPolicy(max_attempts=tool.max_retries + 1, base_delay_ms=500, max_delay_ms=10_000)
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


__all__ = ["AnyTool", "McpServer", "McpTool", "RemoteTool", "remote_tools", "spec_from_listing"]
