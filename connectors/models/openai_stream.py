"""A streamed answer read straight from an OpenAI-compatible server (``openai/MODEL`` with
an ``api_base``): each chunk parsed with orjson and its text and tool-call fragments
written to the call's stream, the whole answer assembled as litellm's
``stream_chunk_builder`` would.

Why not through litellm: its stream wrapper spends about 1.5 ms of CPU per chunk (the
openai SDK's pydantic model of each chunk, then litellm's own), so a worker streaming
tokens spent 20 times more on them than on anything else of a call (bench/streaming.py).
This reader spends tens of microseconds. A call it cannot make as litellm would (another
provider, a parameter it does not pass on) goes through litellm: see :func:`direct_request`.

Example::

    asked = direct_request("openai/m", "http://127.0.0.1:8000/v1", "key", request)
    if asked is not None:
        answer = await stream_async(loop_client(), asked, timeout=120, deltas=stream)
        answer.message()        # the ChatMessage, usage and finish reason noted
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from eddies.events import ChatMessage, MessageRole, ToolCall

#: The chat-completions parameters passed on as they are. A request with another (one
#: litellm translates, drops or reads itself) goes through litellm.
PASSED = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed", "tool_choice",
    "response_format", "presence_penalty", "frequency_penalty", "logit_bias", "user",
    "parallel_tool_calls", "reasoning_effort", "logprobs", "top_logprobs", "extra_headers"})
#: litellm's own keys of a request, which are not parameters of the provider's.
_OWN = frozenset({"model", "messages", "tools", "timeout", "num_retries", "api_base", "api_key",
                  "stream", "stream_options"})


class ProviderHTTPError(RuntimeError):
    """The server answered with an error status: ``status_code`` and ``response`` (its
    headers: a Retry-After) are what the executor classifies the error by."""

    def __init__(self, message: str, status_code: int, response: Any) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.response = response


@dataclass(frozen=True)
class DirectRequest:
    """A streamed chat-completions request: where it goes, its headers and its body."""

    url: str
    headers: dict[str, str]
    body: dict[str, Any]


def direct_request(model: str, api_base: str | None, api_key: str | None,
                   request: dict[str, Any]) -> DirectRequest | None:
    """The streamed request for litellm's ``request`` (its completion kwargs), if it is
    one this reader makes as litellm would: an ``openai/`` model at an ``api_base``, and
    only parameters of :data:`PASSED`. Else None (litellm makes it)."""
    if not model.startswith("openai/") or not api_base:
        return None
    params = {k: v for k, v in request.items() if k not in _OWN and v is not None}
    if not params.keys() <= PASSED:
        return None
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
               **(params.pop("extra_headers", None) or {})}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    body: dict[str, Any] = {"model": model[len("openai/"):], "messages": request["messages"], **params,
                            "stream": True, "stream_options": {"include_usage": True}}
    if request.get("tools"):
        body["tools"] = request["tools"]
    return DirectRequest(f"{api_base.rstrip('/')}/chat/completions", headers, body)


@dataclass
class StreamedAnswer:
    """An answer put together from its chunks, each part written to ``deltas`` as it comes."""

    deltas: Any
    text: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    usage: dict[str, int] | None = None
    finish: str | None = None
    done: bool = False

    def line(self, raw: str) -> None:
        """Take one line of the event stream (``data: {...}``; others are ignored)."""
        if not raw.startswith("data:"):
            return
        data = raw[5:].strip()
        if data == "[DONE]":
            self.done = True
            return
        chunk = orjson.loads(data)
        if "error" in chunk:  # an error in the stream, as some servers send one
            error = chunk["error"]
            raise RuntimeError(error.get("message", str(error)) if isinstance(error, dict) else str(error))
        if chunk.get("usage"):
            usage = chunk["usage"]
            self.usage = {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
                          "completion_tokens": int(usage.get("completion_tokens") or 0)}
        for choice in chunk.get("choices") or ():
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text:
                self.text.append(text)
                self.deltas.text(text)
            for part in delta.get("tool_calls") or ():
                index = int(part.get("index") or 0)
                fn = part.get("function") or {}
                call = self.calls.setdefault(index, {"id": None, "name": "", "arguments": []})
                if part.get("id"):
                    call["id"] = part["id"]
                if fn.get("name"):
                    call["name"] += fn["name"]
                if fn.get("arguments"):
                    call["arguments"].append(fn["arguments"])
                self.deltas.tool_call(index, part.get("id"), fn.get("name"), fn.get("arguments") or "")

    def lines(self, raw: Iterable[str]) -> StreamedAnswer:
        """Take each line of ``raw``."""
        for line in raw:
            self.line(line)
        return self

    def message(self) -> ChatMessage:
        """The whole answer, as litellm's ``stream_chunk_builder`` would make it."""
        calls = []
        for index in sorted(self.calls):
            call = self.calls[index]
            raw = "".join(call["arguments"]) or "{}"
            try:
                args = json.loads(raw)
            except ValueError:
                args = {"_raw": raw}
            calls.append(ToolCall(call["id"] or f"call_{index}", call["name"],
                                  args if isinstance(args, dict) else {"_": args}))
        extra: dict[str, Any] = {}
        if self.usage is not None:
            extra["usage"] = dict(self.usage)
        return ChatMessage(MessageRole.ASSISTANT, "".join(self.text), calls, None, extra)


def _failed(status: int, body: bytes, response: Any) -> ProviderHTTPError:
    try:
        error = orjson.loads(body).get("error")
        said = error.get("message") if isinstance(error, dict) else error
    except (orjson.JSONDecodeError, AttributeError):
        said = body[:500].decode("utf-8", errors="replace")
    return ProviderHTTPError(f"the provider answered {status}: {said}", status, response)


async def stream_async(client: Any, asked: DirectRequest, timeout: float, deltas: Any) -> StreamedAnswer:
    """Make ``asked`` on ``client`` (an ``httpx.AsyncClient``) and read its stream."""
    answer = StreamedAnswer(deltas)
    async with client.stream("POST", asked.url, headers=asked.headers, json=asked.body,
                             timeout=timeout) as response:
        if response.status_code >= 400:
            raise _failed(response.status_code, await response.aread(), response)
        async for line in response.aiter_lines():
            answer.line(line)
    return answer


def stream_sync(client: Any, asked: DirectRequest, timeout: float, deltas: Any) -> StreamedAnswer:
    """:func:`stream_async` on an ``httpx.Client``, for a call thread."""
    answer = StreamedAnswer(deltas)
    with client.stream("POST", asked.url, headers=asked.headers, json=asked.body,
                       timeout=timeout) as response:
        if response.status_code >= 400:
            raise _failed(response.status_code, response.read(), response)
        answer.lines(response.iter_lines())
    return answer
