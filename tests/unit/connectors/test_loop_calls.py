"""Which calls an executor makes on its call loop (their clients are asynchronous) and
which on a call thread; a sub-agent's own ``perform_async`` is awaited there with the
arguments ``perform`` gets."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from eddies import Agent
from eddies.connectors.execution.calls import CallPerformer
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.connectors.stores.embedded import EmbeddedVectorStore
from eddies.engine import AgentPlan, ChatModelSetup, ResourceType
from eddies.engine.embeddings import EmbeddingModelSetup
from eddies.engine.subagents import RECONCILER, SubagentSetup
from eddies.engine.vector_stores import CollectionNotFoundError
from eddies.events import CallKind, ChatMessage, DurableCallRequest, MessageRole


class _AsyncModel(ScriptedChatModel):
    async def chat_async(self, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        return ChatMessage(MessageRole.ASSISTANT, "async")


class _Translator(SubagentSetup):
    def perform(self, prompt: Any, *, session_id: str | None, call_id: str, timeout_s: float) -> Any:
        return f"sync {prompt}"

    async def perform_async(self, prompt: Any, *, session_id: str | None, call_id: str,
                            timeout_s: float) -> Any:
        await asyncio.sleep(0)
        return f"async {prompt} {session_id} {call_id} {timeout_s:g}"

    def reconcile(self, prompt: Any, *, session_id: str | None, call_id: str, timeout_s: float) -> Any:
        return f"sync looked up {prompt}"

    async def reconcile_async(self, prompt: Any, *, session_id: str | None, call_id: str,
                              timeout_s: float) -> Any:
        await asyncio.sleep(0)
        return f"async looked up {prompt} {session_id} {call_id} {timeout_s:g}"


class _SyncEmbedder:
    def embed(self, texts: list[str], **kwargs: Any) -> tuple[list[list[float]], dict[str, Any]]:
        return [[1.0, 0.0] for _ in texts], {"prompt_tokens": len(texts)}


class _AsyncEmbedder(_SyncEmbedder):
    async def embed_async(self, texts: list[str], **kwargs: Any) -> tuple[list[list[float]], dict[str, Any]]:
        await asyncio.sleep(0)
        return [[0.0, 1.0] for _ in texts], {"prompt_tokens": len(texts)}


class _SyncOnly(SubagentSetup):
    def perform(self, prompt: Any, *, session_id: str | None, call_id: str, timeout_s: float) -> Any:
        return prompt


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _performer() -> CallPerformer:
    agent = Agent("loop")
    agent.add_resource("add", ResourceType.TOOL, add)
    reply = ChatMessage(MessageRole.ASSISTANT, "sync")
    agent.add_resource("sync_conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(lambda m, t: reply))
    agent.add_resource("async_conn", ResourceType.CHAT_MODEL_CONNECTION, _AsyncModel(lambda m, t: reply))
    agent.add_resource("sync_llm", ResourceType.CHAT_MODEL, ChatModelSetup("sync_conn"))
    agent.add_resource("async_llm", ResourceType.CHAT_MODEL, ChatModelSetup("async_conn"))
    agent.add_resource("translator", ResourceType.AGENT, _Translator())
    agent.add_resource("plain", ResourceType.AGENT, _SyncOnly())
    agent.add_resource("sync_emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, _SyncEmbedder())
    agent.add_resource("async_emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, _AsyncEmbedder())
    agent.add_resource("sync_emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("sync_emb_conn"))
    agent.add_resource("async_emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("async_emb_conn"))
    for store in ("sync", "async"):
        agent.add_resource(f"{store}_docs", ResourceType.VECTOR_STORE,
                           EmbeddedVectorStore(embedding_model=f"{store}_emb"))
    return CallPerformer(AgentPlan.compile(agent))


def _req(kind: CallKind, target: str, **kwargs: Any) -> DurableCallRequest:
    return DurableCallRequest("s1:r1:i1:c0", kind, target, json.dumps({"args": [], "kwargs": kwargs}))


def _goes_to_the_loop(performer: CallPerformer, req: DurableCallRequest) -> bool:
    call = performer.asynchronous(req)
    if call is None:
        return False
    call.call.close()  # (not made here)
    return True


def test_calls_with_asynchronous_clients_go_to_the_loop_and_the_others_to_threads() -> None:
    performer = _performer()
    on_loop = {target: _goes_to_the_loop(performer, _req(kind, target)) for kind, target in [
        (CallKind.CHAT_MODEL, "async_llm"), (CallKind.CHAT_MODEL, "sync_llm"),
        (CallKind.SUBAGENT, "translator"), (CallKind.SUBAGENT, "plain"), (CallKind.TOOL, "add"),
        (CallKind.EMBEDDING, "async_emb"), (CallKind.EMBEDDING, "sync_emb"),
        (CallKind.FUNCTION, "builtins:abs"), (CallKind.RECONCILE, RECONCILER + "translator"),
        (CallKind.RECONCILE, RECONCILER + "plain"), (CallKind.RECONCILE, "builtins:print"),
        (CallKind.VECTOR_STORE, "async_docs"), (CallKind.VECTOR_STORE, "sync_docs")]}
    assert on_loop == {"async_llm": True, "sync_llm": False, "translator": True, "plain": False,
                       "add": False, "async_emb": True, "sync_emb": False, "builtins:abs": False,
                       RECONCILER + "translator": True, RECONCILER + "plain": False,
                       "builtins:print": False, "async_docs": True, "sync_docs": False}


def test_a_call_naming_what_the_plan_lacks_fails_on_a_thread_as_a_call_not_in_the_executor() -> None:
    performer = _performer()
    for kind in (CallKind.CHAT_MODEL, CallKind.EMBEDDING, CallKind.TOOL, CallKind.SUBAGENT,
                 CallKind.VECTOR_STORE):
        assert performer.asynchronous(_req(kind, "nowhere")) is None
    garbled = DurableCallRequest("s1:r1:i1:c0", CallKind.VECTOR_STORE, "async_docs", "{not json")
    assert performer.asynchronous(garbled) is None
    assert performer.asynchronous(_req(CallKind.TOOL, "add"), scope=("gone@c1",)) is None


def test_a_sub_agents_perform_async_gets_what_perform_gets() -> None:
    call = _performer().asynchronous(_req(CallKind.SUBAGENT, "translator", prompt="hi",
                                          session_id="sub-1", timeout_ms=1500))
    assert call is not None and call.provider == "translator" and call.limits is None
    assert asyncio.run(call.call) == "async hi sub-1 s1:r1:i1:c0 1.5"


def test_a_sub_agents_reconciliation_on_the_loop_is_its_reconcile_async() -> None:
    """An unknown outcome of an A2A sub-agent's call is looked up (its RECONCILE call) on
    the loop too: the provider named is the sub-agent, whose call it reconciles."""
    call = _performer().asynchronous(_req(CallKind.RECONCILE, RECONCILER + "translator", prompt="hi",
                                          session_id="sub-1", timeout_ms=1500))
    assert call is not None and call.provider == "translator"
    assert asyncio.run(call.call) == "async looked up hi sub-1 s1:r1:i1:c0 1.5"


def test_an_embedding_on_the_loop_is_valued_as_on_a_thread() -> None:
    """The connection's embed_async answers it; the journaled value has the shape
    ``perform`` gives it (vectors and usage), so a replay reads either the same way."""
    performer = _performer()
    req = _req(CallKind.EMBEDDING, "async_emb", texts=["a", "b"])
    call = performer.asynchronous(req)
    assert call is not None and call.provider == "async_emb_conn"
    on_loop = asyncio.run(call.call)
    on_thread = performer.perform(_req(CallKind.EMBEDDING, "sync_emb", texts=["a", "b"]))
    assert on_loop["embeddings"] == [[0.0, 1.0], [0.0, 1.0]]
    assert on_thread["embeddings"] == [[1.0, 0.0], [1.0, 0.0]]
    assert on_loop.keys() == on_thread.keys() and on_loop["extra_args"] == on_thread["extra_args"]


def test_a_vector_store_call_on_the_loop_embeds_there_and_is_valued_as_on_a_thread() -> None:
    """A store whose embedding connection has embed_async: its texts are embedded on the
    loop (held by that provider's limits), its operation done on a thread of the loop's
    pool; what it returns, the usage with it and a missing collection are as on a thread.
    A get or delete embeds nothing: no provider's limits hold it."""
    performer = _performer()

    def on_loop(target: str, **kwargs: Any) -> tuple[str, Any]:
        call = performer.asynchronous(_req(CallKind.VECTOR_STORE, target, **kwargs))
        assert call is not None
        return call.provider, asyncio.run(call.call)

    docs = [{"id": "a", "content": "a bed", "metadata": {"city": "Lyon"}}]
    assert on_loop("async_docs", op="add", collection="c", documents=docs) == (
        "async_emb_conn", {"result": ["a"], "extra_args": {"usage": {"prompt_tokens": 1}}})
    provider, found = on_loop("async_docs", op="query", collection="c", text="bed", limit=3)
    assert provider == "async_emb_conn" and [d["id"] for d in found["result"]] == ["a"]
    provider, got = on_loop("async_docs", op="get", collection="c", ids=["a"])
    assert provider == "async_docs" and got["result"][0]["content"] == "a bed"
    assert on_loop("async_docs", op="get", collection="none", missing_ok=True)[1]["result"] == []
    call = performer.asynchronous(_req(CallKind.VECTOR_STORE, "async_docs", op="get", collection="none"))
    assert call is not None
    with pytest.raises(CollectionNotFoundError, match="async_docs"):
        asyncio.run(call.call)
    on_thread = performer.perform(_req(CallKind.VECTOR_STORE, "sync_docs", op="add", collection="c",
                                       documents=docs))
    assert on_thread == {"result": ["a"], "extra_args": {"usage": {"prompt_tokens": 1}}}
