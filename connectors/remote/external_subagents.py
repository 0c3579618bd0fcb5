"""External sub-agents: agents behind HTTP or A2A, called as durable SUBAGENT calls that
executors perform (``ResourceType.AGENT`` resources, like internal ones). Example::

    agent.add_resource("translator", ResourceType.AGENT,
                       HttpSubagentSetup("https://agents.example.com/translate",
                                         description="Translates text to French."))
    agent.add_resource("helper", ResourceType.AGENT,
                       A2ASubagentSetup("http://127.0.0.1:9999", description="Answers anything."))

An HTTP sub-agent gets ``POST {"prompt", "session_id", "call_id"}`` with the call id as
the ``Idempotency-Key`` header, and answers ``{"output": ...}`` (or ``{"error": "..."}``,
a failed Result); a call made again after a crash carries the same key, so a server that
honours it answers once (``idempotent=False`` if it does not: such a call then fails closed).
An A2A sub-agent is sent one message (its id and its context derived from the call id and
the sub-session), its task followed to a terminal state; at its timeout the task is
canceled. After a crash its unknown outcome is reconciled first: the task is looked up in
its context by the message id, and followed to its end, or the message sent now if it
never arrived; if the lookup cannot be made, the call fails closed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from eddies.connectors.remote.configuration import resolve_env, secret
from eddies.connectors.remote.http_clients import loop_client
from eddies.connectors.remote.subagent_calls import IDEMPOTENCY_HEADER, identity_headers, subagent_timeout
from eddies.engine.remote_tools import A2aServer, redact_url
from eddies.engine.subagents import SubagentSetup
from eddies.events import Identity


class HttpSubagentError(RuntimeError):
    """An HTTP sub-agent answered with an HTTP error (``status_code``) or its own error."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class HttpSubagentSetup(SubagentSetup):
    """An agent behind an HTTP endpoint (see the module). ``headers`` go with every call (a
    value written ``${NAME}`` is read from the environment then); ``api_key_env`` names
    the environment variable whose key is sent as a bearer token."""

    takes_identity = True

    def __init__(self, endpoint: str, *, description: str = "", headers: Mapping[str, str] | None = None,
                 api_key_env: str | None = None, input_schema: dict[str, Any] | None = None,
                 idempotent: bool = True, timeout_s: float = 300.0) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"HttpSubagentSetup: expected an http(s) endpoint, got {redact_url(endpoint)!r}")
        self.endpoint = endpoint
        self.description = description
        self.headers = dict(headers or {})
        self.api_key_env = api_key_env
        self.input_schema = input_schema
        self.idempotent = idempotent
        self.timeout_s = timeout_s

    @property
    def where(self) -> str:
        """The endpoint as errors name it (no user info or query)."""
        return redact_url(self.endpoint)

    def perform(self, prompt: Any, *, session_id: str | None, call_id: str, timeout_s: float,
                identity: Identity | None = None) -> Any:
        """POST the prompt; the answer's ``output``."""
        import httpx

        headers, body = self._request(prompt, session_id, call_id, identity)
        with self._transport_errors(call_id, timeout_s):
            reply = httpx.post(self.endpoint, json=body, headers=headers, timeout=timeout_s)
        return self._answer(reply)

    async def perform_async(self, prompt: Any, *, session_id: str | None, call_id: str,
                            timeout_s: float, identity: Identity | None = None) -> Any:
        """:meth:`perform` on an event loop (an executor's call loop): no thread waits."""

        headers, body = self._request(prompt, session_id, call_id, identity)
        client = loop_client()
        with self._transport_errors(call_id, timeout_s):
            reply = await client.post(self.endpoint, json=body, headers=headers, timeout=timeout_s)
        return self._answer(reply)

    def _request(self, prompt: Any, session_id: str | None, call_id: str,
                 identity: Identity | None) -> tuple[dict[str, str], dict[str, Any]]:
        headers = {k: resolve_env(v, f"HTTP sub-agent header {k}") for k, v in self.headers.items()}
        headers[IDEMPOTENCY_HEADER] = call_id
        headers.update(identity_headers(identity))
        if self.api_key_env:
            key = secret(self.api_key_env, "HTTP sub-agent api_key_env")
            headers.setdefault("Authorization", f"Bearer {key}")
        return headers, {"prompt": prompt, "session_id": session_id, "call_id": call_id}

    @contextlib.contextmanager
    def _transport_errors(self, call_id: str, timeout_s: float) -> Iterator[None]:
        import httpx

        try:
            yield
        except httpx.TimeoutException:
            raise subagent_timeout(call_id, f"HTTP sub-agent {self.where}: no answer within "
                                            f"{timeout_s:g} s") from None
        except httpx.TransportError as err:
            raise ConnectionError(f"HTTP sub-agent {self.where}: {type(err).__name__}") from None

    def _answer(self, reply: Any) -> Any:
        if reply.status_code >= 400:
            raise HttpSubagentError(f"HTTP sub-agent {self.where}: HTTP {reply.status_code}",
                                    reply.status_code)
        try:
            answer = reply.json()
        except ValueError:
            return reply.text
        if isinstance(answer, dict) and "error" in answer and answer.get("output") is None:
            raise HttpSubagentError(f"HTTP sub-agent {self.where}: {answer['error']}")
        return answer.get("output") if isinstance(answer, dict) and "output" in answer else answer


class A2ASubagentSetup(SubagentSetup):
    """An A2A agent (the official ``a2a-sdk``: ``pip install 'eddies[a2a]'``) whose card is
    at ``agent_card_path`` on ``endpoint`` (see the module)."""

    idempotent = False  # a repeat would be a second task: an unknown outcome is looked up
    reconciles = True
    takes_identity = True

    def __init__(self, endpoint: str, agent_card_path: str = "/.well-known/agent-card.json", *,
                 description: str = "", headers: Mapping[str, str] | None = None,
                 api_key_env: str | None = None, timeout_s: float = 300.0) -> None:
        self.server = A2aServer(url=endpoint, headers=dict(headers or {}), api_key_env=api_key_env)
        self.agent_card_path = agent_card_path
        self.description = description
        self.timeout_s = timeout_s

    def perform(self, prompt: Any, *, session_id: str | None, call_id: str, timeout_s: float,
                identity: Identity | None = None) -> Any:
        """Send the message and follow its task to the end: its artifacts."""
        return self._call(prompt, session_id, call_id, timeout_s, identity, look_up=False)

    def reconcile(self, prompt: Any, *, session_id: str | None, call_id: str, timeout_s: float,
                  identity: Identity | None = None) -> Any:
        """Find the call's task by its message id, and follow it to its end (or send the
        message now, if the agent never got it)."""
        return self._call(prompt, session_id, call_id, timeout_s, identity, look_up=True)

    async def perform_async(self, prompt: Any, *, session_id: str | None, call_id: str,
                            timeout_s: float, identity: Identity | None = None) -> Any:
        """:meth:`perform` on an event loop (an executor's call loop): no thread waits."""
        from eddies.connectors.remote.a2a import call_subagent_async

        return await call_subagent_async(self.server, self.agent_card_path, prompt, key=call_id,
                                         session_id=session_id, timeout_s=timeout_s, look_up=False,
                                         identity=identity)

    async def reconcile_async(self, prompt: Any, *, session_id: str | None, call_id: str,
                              timeout_s: float, identity: Identity | None = None) -> Any:
        """:meth:`reconcile` on an event loop (an executor's call loop)."""
        from eddies.connectors.remote.a2a import call_subagent_async

        return await call_subagent_async(self.server, self.agent_card_path, prompt, key=call_id,
                                         session_id=session_id, timeout_s=timeout_s, look_up=True,
                                         identity=identity)

    def _call(self, prompt: Any, session_id: str | None, call_id: str, timeout_s: float,
              identity: Identity | None, *, look_up: bool) -> Any:
        from eddies.connectors.remote.a2a import call_subagent

        return call_subagent(self.server, self.agent_card_path, prompt, key=call_id, session_id=session_id,
                             timeout_s=timeout_s, look_up=look_up, identity=identity)


__all__ = ["A2ASubagentSetup", "HttpSubagentError", "HttpSubagentSetup"]
