"""MCP servers, through the official ``mcp`` SDK (2.x; ``pip install 'eddies[mcp]'``,
imported on first use): one client session per server per process, reused across calls
and reconnected after a failure, on a private event-loop thread.

When a runner starts, :func:`discover_tools` lists each MCP tool resource's server and
checks its ``allowed_tools`` (an unknown name is an error naming it), and
:func:`discover_prompts` gets each McpPrompt's messages (an unknown prompt, or a required
argument not given, is an error naming it); executors perform the calls with
:func:`call_tool`. Example::

    discover_tools(agent)          # before AgentPlan.compile(agent)
    discover_prompts(agent)
    call_tool(plan, plan.tool("get_current_time"), {"timezone": "UTC"}, key="s1:r1:i1:c0")

A stdio server's stderr is its own log, not the runner's: each line is logged at DEBUG
(logger ``eddies.mcp.server``), and its last lines are quoted by the error that says why the
server did not start, or stopped in the middle of a call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shlex
import string
import threading
from collections import deque
from collections.abc import Coroutine, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, TextIO, TypeVar

from eddies.connectors.remote.configuration import ConfigurationError, resolve_env, secret
from eddies.connectors.remote.loop_thread import LoopThread
from eddies.connectors.remote.mcp_content import content_block, content_text
from eddies.connectors.remote.secrets import redact
from eddies.engine import Agent, AgentPlan, ResourceType
from eddies.engine.content import with_blocks
from eddies.engine.prompts import McpPrompt
from eddies.engine.remote_tools import IDEMPOTENCY_META, McpServer, McpTool, RemoteTool, spec_from_listing
from eddies.events import ChatMessage, MessageRole

log = logging.getLogger("eddies.mcp")
server_log = logging.getLogger("eddies.mcp.server")

#: What of a stdio server's stderr an error quotes: its last lines, each cut at
#: STDERR_LINE_BYTES, together at most STDERR_CHARS.
STDERR_LINES = 20
STDERR_LINE_BYTES = 500
STDERR_CHARS = 2000


class McpToolError(RuntimeError):
    """The server ran the tool and reported an error (``is_error``): the model sees it."""


class McpConnectionError(ConnectionError):
    """The server could not be reached or dropped the session (retried as transient)."""

    #: What went wrong, without the server's name (the error's text starts with it).
    detail: str = ""


def _connection_error(server: McpServer, detail: str) -> McpConnectionError:
    err = McpConnectionError(f"MCP server {server.where}: {detail}")
    err.detail = detail
    return err


class _Stderr:
    """A stdio server's stderr, read by a thread of its own from a pipe: each line logged
    at DEBUG, the last ones kept for an error to quote."""

    def __init__(self, where: str) -> None:
        read, write = os.pipe()
        #: The pipe's end the server writes to (as the SDK's ``errlog``).
        self.file: TextIO = os.fdopen(write, "w")
        self._where = where
        self._lines: deque[str] = deque(maxlen=STDERR_LINES)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(read,), daemon=True,
                                        name=f"eddies-mcp-stderr-{where}"[:60])
        self._thread.start()

    def spawned(self) -> None:
        """Close this process's copy of the pipe once the server has its own (or failed to
        start): the reading ends when the server's end closes, that is when it exits."""
        self.file.close()

    def _read(self, fd: int) -> None:
        with open(fd, "rb") as pipe:
            while chunk := pipe.readline(STDERR_LINE_BYTES):
                line = chunk.decode(errors="replace").rstrip()
                if line:
                    with self._lock:
                        self._lines.append(line)
                    server_log.debug("%s: %s", self._where, line)

    def ended(self, wait: float = 0.0) -> bool:
        """Whether the server's stderr closed (it exited), waiting up to ``wait`` s."""
        self._thread.join(wait)
        return not self._thread.is_alive()

    def tail(self) -> str:
        """The last lines, within STDERR_CHARS, as the end of an error's text (empty if
        there were none)."""
        with self._lock:
            lines = list(self._lines)
        kept: list[str] = []
        size = 0
        for line in reversed(lines):
            size += len(line) + 5
            if size > STDERR_CHARS:
                break
            kept.append(line)
        if not kept:
            return ""
        return redact("; its stderr ends with:\n" + "\n".join(f"    {line}" for line in reversed(kept)))


class _Pool:
    """Client sessions by server, owned by tasks on one event loop in a daemon thread."""

    def __init__(self) -> None:
        self.loop = LoopThread("eddies-mcp")
        self._sessions: dict[tuple[Any, ...], tuple[Any, asyncio.Event]] = {}
        self._connecting: dict[tuple[Any, ...], Future[Any]] = {}
        self._stderr: dict[tuple[Any, ...], _Stderr] = {}

    async def session(self, server: McpServer) -> Any:
        """The live session to ``server``, connecting first if there is none."""
        key = _key(server)
        live = self._sessions.get(key)
        if live is not None:
            return live[0]
        pending = self._connecting.get(key)
        if pending is None:
            pending = self._connecting[key] = Future()
            asyncio.get_running_loop().create_task(self._own(server, pending))
        try:
            return await asyncio.wrap_future(pending)
        finally:
            if pending.done():
                self._connecting.pop(key, None)

    async def _own(self, server: McpServer, ready: Future[Any]) -> None:
        """Open a session and keep it open (in this task, as the SDK's contexts need) until
        it is dropped."""
        from mcp import ClientSession

        key = _key(server)
        closing = asyncio.Event()
        stderr: _Stderr | None = None
        try:
            if server.url is None:
                stderr = self._stderr[key] = _Stderr(server.where)
            async with contextlib.AsyncExitStack() as stack:
                try:
                    streams = await stack.enter_async_context(
                        _http_transport(server) if stderr is None else _stdio_transport(server, stderr.file))
                finally:
                    if stderr is not None:
                        stderr.spawned()
                session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                await session.initialize()
                self._sessions[key] = (session, closing)
                ready.set_result(session)
                await closing.wait()
        except BaseException as err:  # the SDK raises exception groups from its task groups
            if not ready.done():
                if isinstance(err, ConfigurationError):  # the declaration's, before any process
                    detail = str(err)
                elif stderr is None:
                    detail = f"cannot connect: {_reason(err)}"
                else:  # stopped by now (the SDK's exit stops it): its last lines are all there
                    with contextlib.suppress(BaseException):
                        await asyncio.to_thread(stderr.ended, 2.0)
                    why, ran = _start_failure(err, server)
                    detail = f"cannot start `{_command_line(server)}`: {why}" + (
                        stderr.tail() or (" (it wrote nothing to stderr)" if ran else ""))
                ready.set_exception(_connection_error(server, detail))
        finally:
            self._sessions.pop(key, None)
            if stderr is not None and self._stderr.get(key) is stderr:
                del self._stderr[key]

    def stderr_tail(self, server: McpServer, wait: float = 0.0, ended_only: bool = True) -> str:
        """The end of the stderr of ``server``'s process (if it is a stdio one) as the end
        of an error's text; with ``ended_only``, only if it exited within ``wait`` s (the
        lines of a server that still runs are its logs, not why a call failed)."""
        stderr = self._stderr.get(_key(server))
        if stderr is None or (ended_only and not stderr.ended(wait)):
            return ""
        return stderr.tail()

    def drop(self, server: McpServer) -> None:
        """Forget ``server``'s session (after a failure): the next call connects again."""
        self._drop(_key(server))

    def _drop(self, key: tuple[Any, ...]) -> None:
        live = self._sessions.pop(key, None)
        if live is not None:
            self.loop.call_soon(live[1].set)

    def close(self) -> None:
        """Close every session."""
        for key in list(self._sessions):
            self._drop(key)


_POOL = _Pool()


def _key(server: McpServer) -> tuple[Any, ...]:
    """What tells servers apart (an McpServer holds mappings, so it has no hash)."""
    return (server.url, server.command, server.args, tuple(sorted((server.env or {}).items())),
            tuple(sorted(server.headers.items())), server.api_key_env)


def _http_transport(server: McpServer) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {k: _resolve(v, k) for k, v in server.headers.items()}
    if server.api_key_env:
        headers.setdefault("Authorization", f"Bearer {_secret(server.api_key_env)}")
    client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
    return streamable_http_client(server.url or "", http_client=client)


def _stdio_transport(server: McpServer, errlog: TextIO) -> Any:
    from mcp import StdioServerParameters, stdio_client

    env = {**os.environ, **{k: _resolve(v, k) for k, v in (server.env or {}).items()}}
    if server.api_key_env:
        env[server.api_key_env] = _secret(server.api_key_env)
    return stdio_client(StdioServerParameters(command=server.command or "", args=list(server.args),
                                              env=env), errlog=errlog)


def _command_line(server: McpServer) -> str:
    return redact(shlex.join([server.command or "", *server.args]))[:300]


def _start_failure(err: BaseException, server: McpServer) -> tuple[str, bool]:
    """Why a stdio server did not start (said plainly when its command cannot run), and
    whether its process ran."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    command = server.command or ""
    if isinstance(err, FileNotFoundError):
        if os.sep in command:
            return f"no such file: {command!r}", False
        return f"command {command!r} not found (it is not on PATH)", False
    if isinstance(err, PermissionError):
        return f"{command!r} cannot be run: {err.strerror or err}", False
    return _reason(err), True


def _resolve(value: str, what: str) -> str:
    """``value`` with each ``${NAME}`` read from the environment (a missing one: an error
    naming the variable, never a value)."""
    return resolve_env(value, f"MCP {what}")


def _secret(name: str, what: str = "api_key_env") -> str:
    return secret(name, f"MCP {what}")


def _reason(err: BaseException) -> str:
    """A short reason for a failure, from the innermost exception of a group."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return f"{type(err).__name__}: {err}"[:300]


T = TypeVar("T", McpTool, McpPrompt)
R = TypeVar("R")


def _undiscovered(agent: Agent, inherited: Mapping[str, Any] | None, rtype: ResourceType,
                  kind: type[T]) -> Iterator[tuple[Any, T, McpServer]]:
    """Each resource of ``agent`` of ``rtype`` that is a ``kind`` not asked of its server
    yet, with that server (a sub-agent's callers' servers count, under its own)."""
    servers = {**(inherited or {}),
               **{r.name: r.obj for r in agent.resources if r.type is ResourceType.MCP_SERVER}}
    for res in agent.resources:
        obj = res.obj
        if res.type is not rtype or not isinstance(obj, kind) or obj.discovered:
            continue
        server = servers.get(obj.server)
        if not isinstance(server, McpServer):
            raise ConfigurationError(f"{rtype.value} {res.name!r}: server {obj.server!r} is not an "
                                     "MCP_SERVER resource (an McpServer) of this agent")
        yield res, obj, server


def discover_tools(agent: Agent, timeout: float = 30.0, inherited: Mapping[str, Any] | None = None) -> None:
    """List the server of each MCP tool resource of ``agent`` and fill its ``discovered``
    specs; an ``allowed_tools`` name the server lacks is a ConfigurationError naming it.
    Nothing to do (and no import) for an agent without MCP tools."""
    for res, tool, server in _undiscovered(agent, inherited, ResourceType.TOOL, McpTool):
        listed = _at_start(_list(server), server, f"tool {res.name!r}: MCP server {tool.server!r}", timeout)
        missing = [t for t in tool.allowed_tools if t not in listed]
        if missing:
            raise ConfigurationError(
                f"tool {res.name!r}: allowed_tools {', '.join(map(repr, missing))} not offered by MCP "
                f"server {tool.server!r} ({server.where}); it offers: {', '.join(sorted(listed)) or 'none'}")
        tool.discovered.update({t: listed[t] for t in tool.allowed_tools})
        log.info("MCP server %s: %d of its %d tools allowed for %r", server.where,
                 len(tool.allowed_tools), len(listed), res.name)


def _at_start(coro: Coroutine[Any, Any, R], server: McpServer, what: str, timeout: float) -> R:
    """``coro``'s result, run when a runner starts: a server that cannot be reached or
    started, or does not answer, is a ConfigurationError (``what``, the server's command
    line or URL, and why), as the declaration it is, not a transient failure."""
    try:
        result: R = _POOL.loop.run(coro, timeout)
    except McpConnectionError as err:
        at = f" ({server.where})" if server.url is not None else ""  # a command: the detail has it
        raise ConfigurationError(f"{what}{at}: {err.detail or err}") from None
    except TimeoutError:
        started = f"`{_command_line(server)}`" if server.url is None else server.where
        raise ConfigurationError(f"{what}: {started} gave no answer within {timeout:g} s"
                                 f"{_POOL.stderr_tail(server, ended_only=False)}") from None
    return result


async def _list(server: McpServer) -> dict[str, Any]:
    session = await _POOL.session(server)
    out: dict[str, Any] = {}
    cursor: str | None = None
    while True:
        from mcp.types import PaginatedRequestParams

        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        for t in page.tools:
            out[t.name] = spec_from_listing(t.name, t.description, t.input_schema)
        cursor = page.next_cursor
        if not cursor:
            return out


def discover_prompts(agent: Agent, timeout: float = 30.0,
                     inherited: Mapping[str, Any] | None = None) -> None:
    """Get the messages of each McpPrompt resource of ``agent`` from its server."""
    for res, prompt, server in _undiscovered(agent, inherited, ResourceType.PROMPT, McpPrompt):
        prompt.discovered.extend(_at_start(_prompt(server, res.name, prompt), server,
                                           f"prompt {res.name!r}: MCP server {prompt.server!r}", timeout))
        log.info("MCP server %s: prompt %r got for %r", server.where, prompt.name, res.name)


async def _prompt(server: McpServer, resource: str, prompt: McpPrompt) -> list[ChatMessage]:
    session = await _POOL.session(server)
    listed = {p.name: p for p in (await session.list_prompts()).prompts}
    found = listed.get(prompt.name)
    if found is None:
        raise ConfigurationError(f"prompt {resource!r}: MCP server {prompt.server!r} ({server.where}) "
                                 f"has no prompt {prompt.name!r}; it offers: "
                                 f"{', '.join(sorted(listed)) or 'none'}")
    missing = [a.name for a in found.arguments or [] if a.required and a.name not in prompt.arguments]
    if missing:
        raise ConfigurationError(f"prompt {resource!r}: MCP prompt {prompt.name!r} needs the arguments "
                                 f"{', '.join(missing)}")
    got = await session.get_prompt(prompt.name, {k: _marked(v) for k, v in prompt.arguments.items()})
    return [ChatMessage(MessageRole.ASSISTANT if m.role == "assistant" else MessageRole.USER,
                        _template(content_text(m.content))) for m in got.messages]


# An argument's {placeholder} travels to the server as a mark no text holds (Unicode's
# private use area), so that braces the server writes stay text and ours become ours again.
_OPEN, _CLOSE = "\ue000", "\ue001"


def _marked(value: str) -> str:
    out = []
    for literal, name, _spec, _conversion in string.Formatter().parse(value):
        out.append(literal)
        if name is not None:
            out.append(f"{_OPEN}{name}{_CLOSE}")
    return "".join(out)


def _template(text: str) -> str:
    escaped = text.replace("{", "{{").replace("}", "}}")
    return re.sub(f"{_OPEN}(\\w+){_CLOSE}", r"{\1}", escaped)


def call_tool(plan: AgentPlan, tool: RemoteTool, arguments: Mapping[str, Any], key: str) -> Any:
    """Call ``tool`` with ``arguments``, its call id ``key`` in ``_meta``: the structured
    result if the server gives one, else its text content (parsed when it is JSON)."""
    server: McpServer = plan.resource(tool.server, ResourceType.MCP_SERVER)
    timeout = tool.timeout_ms / 1000
    with _call_errors(server, tool.name, timeout):
        return _POOL.loop.run(_call(server, tool.name, dict(arguments), key), timeout)


async def call_tool_async(plan: AgentPlan, tool: RemoteTool, arguments: Mapping[str, Any],
                          key: str) -> Any:
    """:func:`call_tool` awaited from another event loop (an executor's call loop): the
    call holds no thread while the server works."""
    server: McpServer = plan.resource(tool.server, ResourceType.MCP_SERVER)
    timeout = tool.timeout_ms / 1000
    with _call_errors(server, tool.name, timeout):
        return await _POOL.loop.run_async(_call(server, tool.name, dict(arguments), key), timeout)


@contextlib.contextmanager
def _call_errors(server: McpServer, name: str, timeout: float) -> Iterator[None]:
    """A tool call's failure as the call's error names it (the session dropped if broken)."""
    try:
        yield
    except (McpToolError, ConfigurationError):
        raise
    except TimeoutError:  # the bare one says nothing: which call, after how long
        raise TimeoutError(f"MCP server {server.where}: {name}: no answer within "
                           f"{timeout:g} s") from None
    except Exception as err:  # the session is broken: connect again next time
        if isinstance(err, McpConnectionError):
            _POOL.drop(server)
            raise
        # A server that died in the call: its stderr closes with its stdout, if not already.
        tail = _POOL.stderr_tail(server, wait=0.25)
        _POOL.drop(server)
        raise _connection_error(server, f"{name}: {_reason(err)}{tail}") from None


async def _call(server: McpServer, name: str, arguments: dict[str, Any], key: str) -> Any:
    session = await _POOL.session(server)
    result = await session.call_tool(name, arguments, meta={IDEMPOTENCY_META: key})
    blobs = server.blob_store
    text = "\n".join(part for part in (content_text(c, blobs is not None) for c in result.content) if part)
    if result.is_error:
        raise McpToolError(text or f"tool {name} failed")
    blocks = [b for b in (content_block(c, blobs) for c in result.content) if b is not None]
    if result.structured_content is not None:
        return with_blocks(result.structured_content, blocks)
    import json

    try:
        return with_blocks(json.loads(text), blocks)
    except ValueError:
        return with_blocks(text, blocks)


def close() -> None:
    """Close this process's MCP sessions."""
    _POOL.close()


__all__ = [
    "IDEMPOTENCY_META",
    "ConfigurationError",
    "McpConnectionError",
    "McpToolError",
    "call_tool",
    "close",
    "content_block",
    "content_text",
    "discover_prompts",
    "discover_tools",
]
