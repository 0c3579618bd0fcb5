"""A2A agents as tools, through the official ``a2a-sdk`` (1.x, A2A spec 1.0; ``pip install
'eddies[a2a]'``, imported on first use): one HTTP client per server and one A2A client per
agent card per process, reused across calls and made again after a failure, on a
private event-loop thread.

When a runner starts, :func:`discover_tools` fetches each A2A tool resource's agent card
(a card that cannot be fetched or is no card is an error naming the resource and URL)
and fills its spec; executors perform the calls with :func:`call_tool`: one message,
whose task is followed to its end. Example::

    discover_tools(agent)          # before AgentPlan.compile(agent)
    call_tool(plan, plan.tool("Echo_Agent"), {"prompt": "hello"}, key="s1:r1:i1:c0")
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import uuid
from collections.abc import Coroutine, Iterator, Mapping
from typing import Any

from eddies.connectors.remote.a2a_parts import parts_value, task_state
from eddies.connectors.remote.configuration import ConfigurationError, resolve_env, secret
from eddies.connectors.remote.error_classes import TRANSIENT_STATUS
from eddies.connectors.remote.loop_thread import LoopThread
from eddies.connectors.remote.subagent_calls import IDEMPOTENCY_HEADER, identity_headers, subagent_timeout
from eddies.engine import Agent, AgentPlan, ResourceType
from eddies.engine.remote_tools import IDEMPOTENCY_META, A2aServer, A2aTool, RemoteTool, a2a_spec
from eddies.events import Identity

log = logging.getLogger("eddies.a2a")

#: The HTTP header that carries a call's id (as the message metadata does).
_URL_USER = re.compile(r"([a-z][a-z0-9+.-]*://)[^/@\s'\"]*@", re.I)
_URL_QUERY = re.compile(r"([a-z][a-z0-9+.-]*://[^\s?'\"]*)\?[^\s'\"]*", re.I)
_POLL_S = (0.1, 0.2, 0.5, 1.0)


class A2aTaskError(RuntimeError):
    """The agent ended the task without completing it (failed, rejected, canceled, or it
    needs input or authentication): the model sees its status message."""


class A2aRequestError(RuntimeError):
    """The agent refused the request (an A2A error, or an HTTP 4xx: ``status_code``)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class A2aConnectionError(ConnectionError):
    """The agent could not be reached or failed to answer (retried as transient)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


Key = tuple[Any, ...]


class _Pool:
    """HTTP clients by server and A2A clients by (server, card path), used by tasks on one
    event loop in a daemon thread."""

    def __init__(self) -> None:
        self.loop = LoopThread("eddies-a2a")
        self._http: dict[Key, Any] = {}
        self._agents: dict[tuple[Key, str], tuple[Any, Any]] = {}  # (card, client)
        self._opening: dict[tuple[Key, str], asyncio.Lock] = {}

    def _http_client(self, server: A2aServer) -> Any:
        key = _key(server)
        client = self._http.get(key)
        if client is None:
            import httpx

            client = self._http[key] = httpx.AsyncClient(headers=_headers(server),
                                                         timeout=httpx.Timeout(30.0))
        return client

    async def agent(self, server: A2aServer, path: str) -> tuple[Any, Any]:
        """The agent card at ``path`` on ``server`` and a client for it, fetched and made
        first if there are none."""
        key = (_key(server), path)
        live = self._agents.get(key)
        if live is not None:
            return live
        async with self._opening.setdefault(key, asyncio.Lock()):
            live = self._agents.get(key)
            if live is None:
                from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
                from a2a.utils.constants import TransportProtocol

                http = self._http_client(server)
                card = await A2ACardResolver(http, server.url, path).get_agent_card()
                if not card.name or not card.supported_interfaces:
                    raise _NotACard("it has no name" if not card.name else "it lists no interfaces")
                config = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=[
                    TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON])
                try:
                    client = ClientFactory(config).create(card)
                except ValueError as err:  # no transport both sides speak
                    raise _NotACard(str(err)) from None
                live = self._agents[key] = (card, client)
        return live

    def drop(self, server: A2aServer, path: str) -> None:
        """Forget the client for ``path`` on ``server`` (after a failure): the next call
        fetches the card and makes one again."""
        self.loop.call_soon(self._agents.pop, (_key(server), path), None)

    def close(self) -> None:
        """Close every client."""
        if not self.loop.started:
            return

        async def close_all() -> None:
            for _, client in list(self._agents.values()):
                await client.close()  # the shared HTTP client stays open: closed below
            self._agents.clear()
            for http in list(self._http.values()):
                await http.aclose()
            self._http.clear()

        self.loop.run(close_all(), 10)


class _NotACard(Exception):
    """What the card at a path lacks."""


_POOL = _Pool()


def _key(server: A2aServer) -> Key:
    """What tells servers apart (an A2aServer holds a mapping, so it has no hash)."""
    return (server.url, tuple(sorted(server.headers.items())), server.api_key_env)


def _headers(server: A2aServer) -> dict[str, str]:
    headers = {k: resolve_env(v, f"A2A header {k}") for k, v in server.headers.items()}
    if server.api_key_env:
        headers.setdefault("Authorization", f"Bearer {secret(server.api_key_env, 'A2A api_key_env')}")
    return headers


def _scrub(text: str, server: A2aServer) -> str:
    """``text`` (an SDK's error message) without the server's header values and key, and
    URLs in it without user info or query."""
    try:
        values = [v for v in _headers(server).values() if len(v) >= 4]
    except ConfigurationError:
        values = []
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, "***")
        if value.startswith("Bearer "):
            text = text.replace(value[7:], "***")
    return _URL_QUERY.sub(r"\1", _URL_USER.sub(r"\1", text))


def _reason(err: BaseException, server: A2aServer) -> str:
    """A short reason for a failure, from the innermost exception of a group."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return _scrub(f"{type(err).__name__}: {err}", server)[:300]


def discover_tools(agent: Agent, timeout: float = 30.0, inherited: Mapping[str, Any] | None = None) -> None:
    """Fetch the agent card of each A2A tool resource of ``agent`` and fill its
    ``discovered`` spec (name and description from the card, unless the tool gives them);
    a card that cannot be fetched, or is no agent card, is a ConfigurationError naming
    the resource and URL. Nothing to do (and no import) for an agent without A2A tools."""
    servers = {**(inherited or {}),  # a sub-agent's callers' servers, under its own
               **{r.name: r.obj for r in agent.resources if r.type is ResourceType.A2A_SERVER}}
    for res in agent.resources:
        tool = res.obj
        if res.type is not ResourceType.TOOL or not isinstance(tool, A2aTool) or tool.discovered:
            continue
        server = servers.get(tool.server)
        if not isinstance(server, A2aServer):
            raise ConfigurationError(f"tool {res.name!r}: server {tool.server!r} is not an A2A_SERVER "
                                     "resource (an A2aServer) of this agent")
        card = _fetch_card(server, tool.agent_card_path, f"tool {res.name!r}",
                           f"A2A server {tool.server!r}", timeout)
        spec = a2a_spec(tool, card.name, card.description or f"The A2A agent {card.name}.")
        tool.discovered.update({spec.name: spec})
        log.info("A2A server %s: agent %r (card %s) is tool %r of %r", server.where, card.name,
                 tool.agent_card_path, spec.name, res.name)


def check_subagent_cards(agent: Agent, timeout: float = 30.0) -> None:
    """Fetch the agent card of each A2A sub-agent (an :class:`A2ASubagentSetup` resource)
    of ``agent``, as for A2A tools: one that cannot be fetched is a ConfigurationError at
    start naming the resource and URL, not a failure at the first call."""
    for res in agent.resources:
        # Told by what it holds (an A2aServer and a card path), so that this module does not
        # import external_subagents, which imports it.
        server, path = getattr(res.obj, "server", None), getattr(res.obj, "agent_card_path", None)
        if res.type is ResourceType.AGENT and isinstance(server, A2aServer) and isinstance(path, str):
            card = _fetch_card(server, path, f"sub-agent {res.name!r}", "its A2A server", timeout)
            log.info("A2A server %s: agent %r (card %s) is sub-agent %r", server.where, card.name,
                     path, res.name)


def _fetch_card(server: A2aServer, path: str, what: str, whose: str, timeout: float) -> Any:
    """The agent card at ``path`` of ``server``; else a ConfigurationError naming ``what``
    needs it, ``whose`` card it is and its URL."""
    try:
        import a2a.client  # noqa: F401
    except ImportError as err:
        raise ImportError(f"{what}: A2A needs the a2a-sdk package: pip install 'eddies[a2a]' "
                          f"({err})") from None
    url = server.where.rstrip("/") + "/" + path.lstrip("/")
    try:
        card, _ = _POOL.loop.run(_POOL.agent(server, path), timeout)
    except ConfigurationError:
        raise
    except TimeoutError:
        raise ConfigurationError(f"{what}: no agent card from {whose} at {url} within "
                                 f"{timeout:g} s") from None
    except Exception as err:
        raise ConfigurationError(f"{what}: cannot fetch the agent card of {whose} at {url}: "
                                 f"{_card_failure(err, server)}") from None
    return card


def _card_failure(err: BaseException, server: A2aServer) -> str:
    if isinstance(err, _NotACard):
        return f"not a valid agent card: {err}"
    status = getattr(err, "status_code", None)
    if isinstance(status, int):
        return f"HTTP {status}"
    cause = err.__cause__
    if isinstance(cause, json.JSONDecodeError):
        return "not a valid agent card: not JSON"
    if cause is not None and type(cause).__name__ == "ParseError":
        return f"not a valid agent card: {_scrub(str(cause), server)[:300]}"
    return _reason(cause or err, server)


def call_tool(plan: AgentPlan, tool: RemoteTool, arguments: Mapping[str, Any], key: str,
              identity: Identity | None = None) -> Any:
    """Send the agent of ``tool`` one message, the text ``arguments["prompt"]``, its call id
    ``key`` in the message metadata and the Idempotency-Key header, and follow its task
    to the end: the text of the completed task's artifacts (a lone data part: its JSON
    value), who asked (``identity``) in the Eddies-User and Eddies-Tenant headers. A task
    that ends otherwise raises A2aTaskError with its status message."""
    server, path, timeout, call = _tool_call(plan, tool, arguments, key, identity)
    with _call_errors(server, path, f"{tool.name}: ", timeout):
        return _POOL.loop.run(call, timeout)


async def call_tool_async(plan: AgentPlan, tool: RemoteTool, arguments: Mapping[str, Any],
                          key: str, identity: Identity | None = None) -> Any:
    """:func:`call_tool` awaited from another event loop (an executor's call loop): the
    call holds no thread while the agent works."""
    server, path, timeout, call = _tool_call(plan, tool, arguments, key, identity)
    with _call_errors(server, path, f"{tool.name}: ", timeout):
        return await _POOL.loop.run_async(call, timeout)


def _tool_call(plan: AgentPlan, tool: RemoteTool, arguments: Mapping[str, Any], key: str,
               identity: Identity | None) -> tuple[A2aServer, str, float, Coroutine[Any, Any, Any]]:
    """The server, card path and timeout of a call of ``tool``, and the call to run."""
    server: A2aServer = plan.resource(tool.server, ResourceType.A2A_SERVER)
    a2a_tool: A2aTool = plan.resource(tool.resource, ResourceType.TOOL)
    prompt = _prompt_of(tool, arguments)
    path = a2a_tool.agent_card_path
    timeout = tool.timeout_ms / 1000
    return server, path, timeout, _call(server, path, prompt, key, timeout, identity)


def _prompt_of(tool: RemoteTool, arguments: Mapping[str, Any]) -> str:
    prompt = arguments.get("prompt")
    extra = set(arguments) - {"prompt"}
    if not isinstance(prompt, str) or extra:
        raise ValueError(f"A2A tool {tool.name}: expected one string argument 'prompt', got "
                         f"{', '.join(sorted(arguments)) or 'none'}")
    return prompt


@contextlib.contextmanager
def _call_errors(server: A2aServer, path: str, what: str, timeout: float | None) -> Iterator[None]:
    """A call's failure as its error names it (``what``: the tool's name, to start with;
    ``timeout``: None where the call's own deadline names the timeout); a client that
    may be broken is made again next time."""
    try:
        yield
    except (A2aTaskError, A2aRequestError, ConfigurationError):
        raise
    except TimeoutError:
        if timeout is None:
            raise
        raise TimeoutError(f"A2A server {server.where}: {what}no answer within "
                           f"{timeout:g} s") from None
    except Exception as err:
        _POOL.drop(server, path)
        if isinstance(err, A2aConnectionError):
            raise
        raise A2aConnectionError(f"A2A server {server.where}: {what}{_reason(err, server)}") from None


async def _call(server: A2aServer, path: str, prompt: str, key: str, timeout: float,
                identity: Identity | None) -> Any:
    from a2a.client import ClientCallContext
    from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest

    message = Message(role=Role.ROLE_USER, parts=[Part(text=prompt)],
                      message_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"eddies:{key}")))
    message.metadata.update({IDEMPOTENCY_META: key})
    context = ClientCallContext(timeout=timeout, service_parameters={IDEMPOTENCY_HEADER: key,
                                                                     **identity_headers(identity)})
    try:
        _, client = await _POOL.agent(server, path)
        answered, task = await _send(client, SendMessageRequest(message=message), context, server)
        if answered:  # the agent answered without a task
            return task
        for delay in _polls():
            if task_state(task) not in ("submitted", "working", "unspecified"):
                break
            await asyncio.sleep(delay)
            task = await client.get_task(GetTaskRequest(id=task.id), context=context)
    except Exception as err:
        raise _failure(err, server) from None
    return _result(task)


def call_subagent(server: A2aServer, path: str, prompt: Any, *, key: str, session_id: str | None,
                  timeout_s: float, look_up: bool, identity: Identity | None = None) -> Any:
    """An A2A sub-agent call (see :mod:`eddies.connectors.remote.external_subagents`): one message
    whose id derives from the call id ``key`` and whose context from the sub-session (or the
    call), its task followed to its end, canceled at ``timeout_s``; with ``look_up``, the
    task of an earlier attempt is found in that context first. Who asked (``identity``)
    goes in the Eddies-User and Eddies-Tenant headers."""
    with _call_errors(server, path, "", None):
        return _POOL.loop.run(_subagent(server, path, prompt, key, session_id, timeout_s, look_up, identity),
                              timeout_s + 10)


async def call_subagent_async(server: A2aServer, path: str, prompt: Any, *, key: str,
                              session_id: str | None, timeout_s: float, look_up: bool,
                              identity: Identity | None = None) -> Any:
    """:func:`call_subagent` awaited from another event loop (an executor's call loop)."""
    with _call_errors(server, path, "", None):
        return await _POOL.loop.run_async(
            _subagent(server, path, prompt, key, session_id, timeout_s, look_up, identity), timeout_s + 10)


async def _subagent(server: A2aServer, path: str, prompt: Any, key: str, session_id: str | None,
                    timeout: float, look_up: bool, identity: Identity | None) -> Any:
    from a2a.client import ClientCallContext
    from a2a.types import (
        CancelTaskRequest,
        GetTaskRequest,
        ListTasksRequest,
        Message,
        Part,
        Role,
        SendMessageConfiguration,
        SendMessageRequest,
    )


    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    client: Any = None
    message_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"eddies:{key}"))
    context_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"eddies:context:{session_id or key}"))
    context = ClientCallContext(timeout=timeout, service_parameters={IDEMPOTENCY_HEADER: key,
                                                                     **identity_headers(identity)})
    task = None
    try:
        _, client = await _POOL.agent(server, path)
        if look_up:
            listed = await client.list_tasks(ListTasksRequest(context_id=context_id, history_length=100,
                                                              include_artifacts=True), context=context)
            task = next((t for t in listed.tasks if any(m.message_id == message_id for m in t.history)),
                        None)
            log.info("A2A server %s: the task of call %s %s", server.where, key,
                     "found" if task is not None else "not found: sending its message now")
        if task is None:
            text = prompt if isinstance(prompt, str) else json.dumps(prompt)
            message = Message(role=Role.ROLE_USER, parts=[Part(text=text)], message_id=message_id,
                              context_id=context_id)
            message.metadata.update({IDEMPOTENCY_META: key})
            # Its task at once, not at its end: followed here, and canceled at the timeout.
            ask = SendMessageRequest(message=message,
                                     configuration=SendMessageConfiguration(return_immediately=True))
            answered, task = await _send(client, ask, context, server)
            if answered:  # the agent answered without a task
                return task
        for delay in _polls():
            if task_state(task) not in ("submitted", "working", "unspecified"):
                break
            if loop.time() + delay > deadline:
                raise TimeoutError
            await asyncio.sleep(delay)
            task = await client.get_task(GetTaskRequest(id=task.id), context=context)
    except Exception as err:
        from a2a.client import A2AClientTimeoutError

        if not isinstance(err, TimeoutError | A2AClientTimeoutError):
            raise _failure(err, server) from None
        canceled = ""  # at the timeout, its task (if it got one) is canceled
        if task is not None and client is not None:
            try:
                await client.cancel_task(CancelTaskRequest(id=task.id), context=ClientCallContext(timeout=5))
                canceled = f"; task {task.id} canceled"
            except Exception:  # it may have ended meanwhile
                canceled = f"; task {task.id} not canceled (the agent refused)"
        raise subagent_timeout(key, f"A2A server {server.where}: no answer within {timeout:g} s"
                                    f"{canceled}") from None
    return _result(task)


async def _send(client: Any, ask: Any, context: Any, server: A2aServer) -> tuple[bool, Any]:
    """Send ``ask``: (True, the content of the agent's direct answer), or (False, the task
    it started)."""
    task = None
    async for response in client.send_message(ask, context=context):
        if response.HasField("message"):
            return True, parts_value([response.message.parts])
        if response.HasField("task"):
            task = response.task
    if task is None:
        raise A2aConnectionError(f"A2A server {server.where}: the agent answered neither a task nor "
                                 "a message")
    return False, task


def _polls() -> Iterator[float]:
    yield from _POLL_S
    while True:
        yield _POLL_S[-1]


def _result(task: Any) -> Any:
    state = task_state(task)
    if state == "completed":
        return parts_value([a.parts for a in task.artifacts] or [task.status.message.parts])
    said = parts_value([task.status.message.parts])
    said = said if isinstance(said, str) else json.dumps(said)
    raise A2aTaskError(f"task {state.replace('_', ' ')}: {said or '(no message)'}")


def _failure(err: Exception, server: A2aServer) -> Exception:
    """What a failure of the SDK is to a caller: a timeout, a transient connection error,
    or a refusal."""
    from a2a.client import A2AClientError, A2AClientTimeoutError
    from a2a.utils.errors import A2AError, InternalError

    if isinstance(err, A2aTaskError | A2aRequestError | A2aConnectionError | ConfigurationError
                  | TimeoutError):
        return err
    if isinstance(err, A2AClientTimeoutError):
        return TimeoutError(f"A2A server {server.where}: timed out")
    status = getattr(getattr(err.__cause__, "response", None), "status_code", None)
    if isinstance(status, int):
        text = f"A2A server {server.where}: HTTP {status}"
        if status in TRANSIENT_STATUS or status >= 500:
            return A2aConnectionError(text, status)
        return A2aRequestError(text, status)
    if isinstance(err, A2AClientError | InternalError) or not isinstance(err, A2AError):
        return A2aConnectionError(f"A2A server {server.where}: {_reason(err, server)}")
    return A2aRequestError(f"A2A server {server.where}: {_reason(err, server)}")


def close() -> None:
    """Close this process's A2A clients."""
    _POOL.close()


__all__ = [
    "IDEMPOTENCY_META",
    "A2aConnectionError",
    "A2aRequestError",
    "A2aTaskError",
    "call_subagent",
    "call_tool",
    "close",
    "discover_tools",
]
