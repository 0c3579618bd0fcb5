"""A CHAT_MODEL_CONNECTION backed by litellm: any provider it supports, or any
OpenAI-compatible server (``model="openai/NAME", api_base="http://host/v1"``).

litellm is an optional extra (``pip install 'eddies[litellm]'``) imported on first use; it
takes seconds to import. It is imported offline: its price map is the one it ships
(``LITELLM_LOCAL_MODEL_COST_MAP=True``) and it downloads no tokenizer
(``LITELLM_OFFLINE_MODE=true``), unless the environment sets those otherwise
(``LITELLM_LOCAL_MODEL_COST_MAP=False``: fetch the current prices at import, and leave
``LITELLM_OFFLINE_MODE`` as the environment has it). Example::

    conn = LiteLLMChatModel(api_base="http://127.0.0.1:8000/v1", api_key="none",
                            input_cost_per_token=1e-7, output_cost_per_token=4e-7,  # optional
                            limits=ProviderLimits(requests_per_minute=600))         # optional
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, conn)
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", model="openai/m"))
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import json
import platform
import time
from collections.abc import Mapping
from typing import Any

from eddies.connectors.models.openai_stream import StreamedAnswer, direct_request, stream_async, stream_sync
from eddies.connectors.models.provider_limits import ProviderLimits
from eddies.connectors.remote.http_clients import loop_client
from eddies.connectors.remote.secrets import remember
from eddies.engine.content import BlobStore, is_blob
from eddies.engine.resources import ToolSpec
from eddies.events import ChatMessage, ContentBlock, ContentKind, MessageRole, ToolCall


def to_openai(message: ChatMessage) -> dict[str, Any]:
    """A ChatMessage in the OpenAI chat-completions wire shape."""
    out: dict[str, Any] = {"role": message.role.value, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": t.id, "type": "function",
             "function": {"name": t.name, "arguments": json.dumps(t.arguments)}}
            for t in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


def to_openai_messages(messages: list[ChatMessage], media: bool = True,
                       blobs: BlobStore | None = None) -> list[dict[str, Any]]:
    """``messages`` in the OpenAI wire shape, with their content blocks as content parts
    (``media``): a user message's beside its text; a tool's in a user message after the
    tool messages (the API takes images in user messages only). A block's bytes kept by
    reference are read from ``blobs``; a block without bytes or an address (a resource, a
    link, bytes not carried or not found) is in the text already."""
    out: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []  # the parts of the tool messages just read

    def flush() -> None:
        if held:
            out.append({"role": "user", "content": [
                {"type": "text", "text": "What the tool calls above gave beside their text:"}, *held]})
            held.clear()

    for m in messages:
        parts = [p for p in (content_part(b, blobs) for b in m.blocks) if p is not None] if media else []
        if m.role is not MessageRole.TOOL:
            flush()
        wire = to_openai(m)
        if parts and m.role is MessageRole.USER:
            wire["content"] = [{"type": "text", "text": m.content}, *parts]
        elif parts and m.role is MessageRole.TOOL:
            held.extend(parts)
        out.append(wire)
    flush()
    return out


def content_part(block: ContentBlock, blobs: BlobStore | None = None) -> dict[str, Any] | None:
    """An OpenAI content part of ``block``, or None if it has nothing to add to the text."""
    data = block.data
    if data is None and blobs is not None and is_blob(block.uri):
        try:
            data = blobs.get(str(block.uri))
        except (KeyError, ValueError, OSError):  # gone or broken: the text says what it was
            return None
    b64 = None if data is None else base64.b64encode(data).decode()
    mime = block.mime_type or "application/octet-stream"
    if block.kind is ContentKind.IMAGE and (b64 is not None or (block.uri and not is_blob(block.uri))):
        url = f"data:{mime};base64,{b64}" if b64 is not None else str(block.uri)
        return {"type": "image_url", "image_url": {"url": url}}
    if block.kind is ContentKind.AUDIO and b64 is not None:
        return {"type": "input_audio", "input_audio": {"data": b64, "format": mime.rpartition("/")[2]}}
    if block.kind is ContentKind.FILE and b64 is not None:
        return {"type": "file", "file": {"file_data": f"data:{mime};base64,{b64}",
                                         "filename": block.name or "file"}}
    if block.kind is ContentKind.TEXT and block.text:
        return {"type": "text", "text": block.text}
    return None


def from_openai(message: Any, usage: Any = None) -> ChatMessage:
    """The assistant ChatMessage of an OpenAI-shaped (litellm) response message."""
    calls = []
    for t in getattr(message, "tool_calls", None) or []:
        raw = t.function.arguments or "{}"
        try:
            args = json.loads(raw) if isinstance(raw, str) else dict(raw)
        except ValueError:
            args = {"_raw": raw}
        calls.append(ToolCall(t.id, t.function.name, args if isinstance(args, dict) else {"_": args}))
    extra: dict[str, Any] = {}
    if usage is not None:
        extra["usage"] = {"prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
                          "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0)}
    return ChatMessage(MessageRole.ASSISTANT, getattr(message, "content", None) or "", calls, None, extra)


def _streamed(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` asking for a stream, with the usage in its last chunk."""
    options = {"include_usage": True, **(request.get("stream_options") or {})}
    return {**request, "stream": True, "stream_options": options}


def _relay(chunk: Any, deltas: Any) -> Any:
    """Write the text and tool-call fragments of a streamed ``chunk`` to ``deltas``."""
    choices = getattr(chunk, "choices", None)
    if choices:
        delta = choices[0].delta
        text = getattr(delta, "content", None)
        if text:
            deltas.text(text)
        for call in getattr(delta, "tool_calls", None) or []:
            fn = getattr(call, "function", None)
            deltas.tool_call(int(getattr(call, "index", 0) or 0), getattr(call, "id", None),
                             getattr(fn, "name", None), getattr(fn, "arguments", None) or "")
    return chunk


def _whole(litellm: Any, chunks: list[Any], request: dict[str, Any]) -> Any:
    """The whole response of a streamed one's ``chunks`` (litellm's stream_chunk_builder:
    text joined, tool calls assembled, the usage of the last chunk)."""
    whole = litellm.stream_chunk_builder(chunks, messages=request["messages"])
    if whole is None:
        raise RuntimeError("the provider streamed no answer")
    return whole


#: What litellm is imported with unless the environment says otherwise: a worker of a Kafka
#: fleet is often on a host with no way out, where litellm's import would try the internet
#: for its price map three times, warning, before falling back to the map it ships.
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}


def load_litellm() -> Any:
    """litellm, imported on first use (about 3 s: ``import eddies`` stays light), offline
    (:data:`OFFLINE`, unless the environment sets those variables) and with its "Give
    Feedback / Get Help" banner off: a call's outcome records its error, and Eddies retries
    by its own policy."""
    import os
    import sys

    # Asked for the current prices, litellm's offline mode (which would keep it from them)
    # is left to the environment too.
    remote = os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "").strip().lower() in ("false", "0", "no")
    if "litellm" not in sys.modules and not remote:
        for name, value in OFFLINE.items():
            os.environ.setdefault(name, value)
    import litellm

    litellm.suppress_debug_info = True
    return litellm


#: What litellm's first completion or embedding imports on its way (litellm 1.110: ~220 ms
#: of a first call's 270 ms; later calls take 5-10 ms against a local server). Modules a
#: later litellm moves or drops are skipped: warming only moves work earlier.
FIRST_CALL_MODULES = ("litellm.proxy.openai_files_endpoints.common_utils",
                      "litellm.llms.openai.openai", "httpcore", "h11",
                      "litellm._service_logger", "litellm.litellm_core_utils.logging_callback_manager",
                      "litellm.integrations.prometheus_services",
                      "litellm.integrations.generic_api.generic_api_callback",
                      "litellm.llms.github_copilot.per_user_auth",
                      "litellm.llms.litellm_proxy.chat.transformation",
                      "litellm.llms.openai_like.dynamic_config", "litellm.proxy.spend_tracking.savings",
                      "litellm.llms.openai.chat.gpt_audio_transformation",
                      # and a first streamed one (~250 ms of its first tokens)
                      "litellm.litellm_core_utils.streaming_handler",
                      "litellm.litellm_core_utils.streaming_chunk_builder_utils")

#: The pydantic models a first completion or embedding validates (``module:Class``). litellm
#: and openai define theirs with deferred schemas, which pydantic builds at their first use:
#: ~25 ms of a first call after the imports. Names a later version drops are skipped.
FIRST_CALL_MODELS = ("litellm.types.router:LiteLLM_Params",
                     "litellm.types.router:GenericLiteLLMParams",
                     "litellm.types.services:ServiceLoggerPayload",
                     "litellm.types.utils:ModelResponse", "litellm.types.utils:Message",
                     "litellm.types.utils:Usage", "litellm.types.utils:Choices",
                     "litellm.types.utils:EmbeddingResponse",
                     "openai.types.chat.chat_completion:ChatCompletion",
                     "openai.types.chat.chat_completion:Choice",
                     "openai.types.chat.chat_completion_message:ChatCompletionMessage",
                     "openai.types.create_embedding_response:CreateEmbeddingResponse",
                     "openai.types.create_embedding_response:Usage",
                     "openai.types.embedding:Embedding")


def warm_litellm() -> None:
    """Do now what litellm's first call would: import litellm and
    :data:`FIRST_CALL_MODULES`, build the schemas of :data:`FIRST_CALL_MODELS`, and ask
    for the platform string the openai client sends in its headers (the first ask runs
    ``uname -p``)."""
    load_litellm()
    for name in FIRST_CALL_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    for path in FIRST_CALL_MODELS:
        module, _, name = path.partition(":")
        with contextlib.suppress(ImportError, AttributeError):
            getattr(importlib.import_module(module), name).model_rebuild()
    platform.platform()


class LiteLLMChatModel:
    """Calls ``litellm.completion``; ``model`` of the CHAT_MODEL setup picks the model."""

    def __init__(self, *, api_base: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0, input_cost_per_token: float | None = None,
                 output_cost_per_token: float | None = None, media: bool = True,
                 blob_store: BlobStore | None = None,
                 limits: ProviderLimits | Mapping[str, Any] | None = None, **params: Any) -> None:
        self.api_base = api_base
        # What the provider allows the fleet (calls at once, requests and tokens a minute):
        # executors make its calls wait their turn (connectors/execution/provider_gates.py).
        self.limits = ProviderLimits.of(limits)
        # Images, audio and files go to the model as content parts; False: for a model that
        # takes text only (the messages' texts say what the blocks were).
        self.media = media
        # Where blocks' bytes kept by reference are read (the blob store the tools wrote).
        self.blob_store = blob_store
        # Masked wherever this process writes it (a provider's error may quote it).
        self.api_key = api_key if api_key is None else remember(api_key)
        self.timeout = timeout
        # Prices of a model litellm's price table does not know (a local or private one):
        # both given, they are the cost; else the table's, when it has the model.
        self.prices = (None if input_cost_per_token is None or output_cost_per_token is None
                       else (float(input_cost_per_token), float(output_cost_per_token)))
        self.params = params
        self._http: Any = None  # streamed calls' client on call threads (_sync_client)

    def warm(self) -> None:
        """Import litellm and what its first completion imports now, not in the first call
        (see :mod:`eddies.connectors.execution.warming`)."""
        warm_litellm()

    #: Its calls stream when their setup asks (``ChatModelSetup(stream=True)``).
    streams = True

    def chat(self, messages: list[ChatMessage], *, model: str, tools: list[ToolSpec],
             deltas: Any = None, **arguments: Any) -> ChatMessage:
        """One completion; litellm's exceptions propagate (the call's outcome is an error).
        ``deltas``: streamed, each part of the answer written there as it comes."""
        litellm = load_litellm()
        started = time.perf_counter()
        request = self._request(messages, model, tools, arguments)
        if deltas is None:
            return self._reply(litellm, litellm.completion(**request), started)
        asked = direct_request(model, self.api_base, self.api_key, request)
        if asked is not None:
            answer = stream_sync(self._sync_client(), asked, self.timeout, deltas)
            return self._direct_reply(litellm, answer, model, started)
        chunks = [_relay(chunk, deltas) for chunk in litellm.completion(**_streamed(request))]
        return self._reply(litellm, _whole(litellm, chunks, request), started)

    async def chat_async(self, messages: list[ChatMessage], *, model: str, tools: list[ToolSpec],
                         deltas: Any = None, **arguments: Any) -> ChatMessage:
        """:meth:`chat` as a coroutine (``litellm.acompletion``): an executor holds thousands
        of these on one event loop while the provider thinks, where each :meth:`chat` holds
        a thread."""
        litellm = load_litellm()
        started = time.perf_counter()
        request = self._request(messages, model, tools, arguments)
        if deltas is None:
            return self._reply(litellm, await litellm.acompletion(**request), started)
        asked = direct_request(model, self.api_base, self.api_key, request)
        if asked is not None:  # an OpenAI-compatible server: read without litellm's wrapper
            answer = await stream_async(loop_client(), asked, self.timeout, deltas)
            return self._direct_reply(litellm, answer, model, started)
        chunks = [_relay(chunk, deltas) async for chunk in await litellm.acompletion(**_streamed(request))]
        return self._reply(litellm, _whole(litellm, chunks, request), started)

    def _sync_client(self) -> Any:
        """The HTTP client of this connection's streamed calls on call threads (made at the
        first; httpx's client is shared by threads)."""
        if self._http is None:
            import httpx

            self._http = httpx.Client(limits=httpx.Limits(max_connections=None))
        return self._http

    def _direct_reply(self, litellm: Any, answer: StreamedAnswer, model: str, started: float) -> ChatMessage:
        """The reply of a call :mod:`.openai_stream` read, noted as :meth:`_reply` notes
        litellm's (latency, cost, finish reason)."""
        reply = answer.message()
        usage = reply.extra_args.get("usage")
        if usage is not None:
            usage["latency_ms"] = round((time.perf_counter() - started) * 1000)
            usage["cost_usd"] = self._token_cost(litellm, model, usage)
        if answer.finish:
            reply.extra_args["finish_reason"] = answer.finish
        return reply

    def _priced(self, usage: dict[str, Any]) -> float:
        """``usage``'s cost at the registered prices (there are some)."""
        assert self.prices is not None
        return float(usage["prompt_tokens"] * self.prices[0] + usage["completion_tokens"] * self.prices[1])

    def _token_cost(self, litellm: Any, model: str, usage: dict[str, Any]) -> float | None:
        """The cost in USD of ``usage``'s tokens: the registered prices, else litellm's
        local price table (None when it does not know the model)."""
        if self.prices is not None:
            return self._priced(usage)
        try:
            prompt, completion = litellm.cost_per_token(model=model, prompt_tokens=usage["prompt_tokens"],
                                                        completion_tokens=usage["completion_tokens"])
            return float(prompt + completion)
        except Exception:  # litellm raises for a model it has no price for
            return None

    def _request(self, messages: list[ChatMessage], model: str, tools: list[ToolSpec],
                 arguments: dict[str, Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {**self.params, **arguments}
        if tools:
            kwargs["tools"] = [{"type": "function", "function": t.to_dict()} for t in tools]
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        return {"model": model, "messages": to_openai_messages(messages, self.media, self.blob_store),
                "timeout": self.timeout, "num_retries": 0, **kwargs}

    def _reply(self, litellm: Any, response: Any, started: float) -> ChatMessage:
        latency_ms = round((time.perf_counter() - started) * 1000)
        choice = response.choices[0]
        reply = from_openai(choice.message, getattr(response, "usage", None))
        usage = reply.extra_args.get("usage")
        if usage is not None:
            usage["latency_ms"] = latency_ms
            usage["cost_usd"] = self._cost(litellm, response, usage)
        finish = getattr(choice, "finish_reason", None)
        if isinstance(finish, str) and finish:  # for traces (gen_ai.response.finish_reasons)
            reply.extra_args["finish_reason"] = finish
        return reply

    def count_tokens(self, messages: list[ChatMessage], *, model: str, tools: list[ToolSpec]) -> int:
        """The request's prompt tokens by litellm's counter (the model's tokenizer where
        litellm knows it, else its default one; offline either way)."""
        litellm = load_litellm()
        specs: Any = [{"type": "function", "function": t.to_dict()} for t in tools] or None
        wire = to_openai_messages(messages, self.media, self.blob_store)
        return int(litellm.token_counter(model=model, messages=wire, tools=specs))

    def _cost(self, litellm: Any, response: Any, usage: dict[str, Any]) -> float | None:
        """The call's cost in USD: from the registered prices, else litellm's local price
        table (None when it does not know the model)."""
        if self.prices is not None:
            return self._priced(usage)
        try:
            return float(litellm.completion_cost(completion_response=response))
        except Exception:  # litellm raises for a model it has no price for
            return None
