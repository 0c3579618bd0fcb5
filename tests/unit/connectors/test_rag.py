"""The built-in RAG agent: it retrieves, then answers citing the passages it used; a model
may ask for another search, up to the limit; the demo's travel guide answers from the
shipped corpus; a replay calls neither the store, the embedding model nor the chat model."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import (
    ChatModelSetup,
    EmbeddedVectorStore,
    EmbeddingModelSetup,
    LocalRunner,
    OfflineEmbeddingModel,
    PlanError,
    RagAgent,
    RagOptions,
    ResourceType,
    ScriptedChatModel,
)
from eddies.connectors.inspect.replay import replay
from eddies.connectors.inspect.summary import describe
from eddies.demo import RAG_PROMPTS, guide_corpus, rag_agent, rag_model
from eddies.engine.vector_stores import document_dict
from eddies.events import ChatMessage, OutputEvent


class Counting:
    """Counts the calls of ``fn`` (a connection's method)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    def embed(self, *args: Any, **kw: Any) -> Any:
        self.calls += 1
        return self.inner.embed(*args, **kw)

    def chat(self, *args: Any, **kw: Any) -> Any:
        self.calls += 1
        return self.inner.chat(*args, **kw)


def test_the_travel_guide_answers_from_the_shipped_corpus_citing_its_passage() -> None:
    runner = LocalRunner(rag_agent())
    [out] = runner.run(RAG_PROMPTS)
    assert out["answer"].endswith("[1].") and out["answer"].startswith("Hostels in Alfama and Baixa")
    [cited] = out["citations"]
    assert cited["n"] == 1 and cited["id"] == "lisbon-hostels"
    assert cited["metadata"] == {"source": "Lisbon on a budget", "topic": "sleep", "city": "Lisbon"}
    lines = [describe(e) for e in runner.history]
    assert any('VECTOR_STORE guide query "Where can I sleep cheaply in Lisbon?"' in line for line in lines)
    assert any("OK 3 documents: lisbon-hostels" in line for line in lines)
    # The model read the numbered passages, with their sources, and the question.
    asked = [e.payload for e in runner.history if e.payload.__class__.__name__ == "DurableCallRequest"
             and e.payload.kind.value == "CHAT_MODEL"]
    assert "[1] (Lisbon on a budget) Hostels in Alfama" in asked[0].args
    assert "Question: Where can I sleep cheaply in Lisbon?" in asked[0].args


def _agent(model: Any, store: EmbeddedVectorStore, embedder: Any, **options: Any) -> RagAgent:
    agent = RagAgent("guide", model="llm", vector_store="docs", options=RagOptions(**options))
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, embedder)
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
    agent.add_resource("docs", ResourceType.VECTOR_STORE, store)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model)
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
    return agent


def _store() -> EmbeddedVectorStore:
    store = EmbeddedVectorStore(embedding_model="emb", collection="guide")
    corpus = guide_corpus()
    vectors, _ = OfflineEmbeddingModel().embed([d.content for d in corpus])
    store.add("guide", [document_dict(d) for d in corpus], vectors)
    return store


def test_a_model_may_search_again_and_the_new_passages_follow_the_first() -> None:
    asked: list[str] = []

    def searcher(messages: list[ChatMessage], tools: list[Any]) -> str:
        asked.append(messages[-1].content)
        if len(asked) == 1:
            return "SEARCH: capsule hotels in Tokyo"
        return rag_model(messages, tools)

    runner = LocalRunner(_agent(ScriptedChatModel(searcher), _store(), OfflineEmbeddingModel(),
                                max_results=1))
    [out] = runner.run([("s1", {"question": "How much is a bed for a night?",
                                "filters": {"topic": "sleep"}})])
    assert asked[0].startswith("Passages:\n\n[1] ") and "capsule" not in asked[0].lower()
    assert asked[1].startswith("More passages, for 'capsule hotels in Tokyo':\n\n[2] (Sleeping in Tokyo)")
    assert out["citations"][0]["id"] == "tokyo-sleep"
    assert all(c["metadata"]["topic"] == "sleep" for c in out["citations"])


def test_searches_stop_at_the_limit_and_say_so() -> None:
    model = ScriptedChatModel(lambda messages, tools: "SEARCH: something else")
    runner = LocalRunner(_agent(model, _store(), OfflineEmbeddingModel(), max_searches=2))
    [out] = runner.run([("s1", "What is the GDP of France?")])
    assert out == {"answer": "The passages found do not answer the question.", "citations": []}
    queries = [e for e in runner.history if "VECTOR_STORE docs query" in describe(e)]
    assert len(queries) == 2


def test_a_replay_asks_no_store_no_embedding_model_and_no_chat_model() -> None:
    store, embedder = _store(), Counting(OfflineEmbeddingModel())
    model = Counting(ScriptedChatModel(rag_model))
    runner = LocalRunner(_agent(model, store, embedder))
    runner.run(RAG_PROMPTS)
    assert (embedder.calls, model.calls) == (1, 1)
    for collection in store.collections():
        store.delete_collection(collection)
    assert replay(runner.plan, list(enumerate(runner.history)), RAG_PROMPTS[0][0]).ok
    assert (embedder.calls, model.calls) == (1, 1)


def test_a_rag_agent_needs_its_model_and_its_store_and_a_question() -> None:
    agent = RagAgent("guide", model="llm", vector_store="nope")
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel())
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
    with pytest.raises(PlanError, match="vector_store 'nope' is not a VECTOR_STORE resource"):
        LocalRunner(agent)
    with pytest.raises(ValueError, match="RagOptions.max_searches must be a positive int"):
        RagOptions(max_searches=0)
    runner = LocalRunner(_agent(ScriptedChatModel(rag_model), _store(), OfflineEmbeddingModel()))
    runner.submit("s1", {"filters": {}})
    runner.run_until_idle()
    [failed] = [e.payload for e in runner.outputs]
    assert isinstance(failed, OutputEvent) and failed.error is not None
    assert "the input is a question" in failed.error.message


def test_a_rag_agent_in_yaml() -> None:
    from eddies.connectors.declarative.yaml_agents import load_yaml_text

    agent = load_yaml_text("""\
agents:
  - name: guide
    type: rag
    model: llm
    vector_store: docs
    options: {max_results: 2, max_searches: 1}
    chat_model_connections:
      - {name: conn, clazz: scripted, responder: "eddies.demo:rag_model"}
    chat_model_setups:
      - {name: llm, connection: conn}
    embedding_model_connections:
      - {name: emb_conn, clazz: offline}
    embedding_model_setups:
      - {name: emb, connection: emb_conn}
    vector_stores:
      - {name: docs, clazz: embedded, embedding_model: emb, collection: guide}
""")
    runner = LocalRunner(agent)
    store = runner.plan.resource("docs", ResourceType.VECTOR_STORE)
    corpus = guide_corpus()
    store.add("guide", [document_dict(d) for d in corpus],
              OfflineEmbeddingModel().embed([d.content for d in corpus])[0])
    [out] = runner.run(RAG_PROMPTS)
    assert [c["id"] for c in out["citations"]] == ["lisbon-hostels"]


def test_a_rag_agents_store_is_checked_where_the_yaml_names_it() -> None:
    from eddies.connectors.declarative.located import DefinitionError
    from eddies.connectors.declarative.yaml_agents import load_yaml_text

    with pytest.raises(DefinitionError, match="<yaml>:5:19: vector store 'nope' is not declared"):
        load_yaml_text("""\
agents:
  - name: guide
    type: rag
    model: llm
    vector_store: nope
    chat_model_connections:
      - {name: conn, clazz: scripted}
    chat_model_setups:
      - {name: llm, connection: conn}
""")
