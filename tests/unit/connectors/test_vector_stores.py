"""Vector stores: the embedded store's operations, filters, collections and files; every
operation an action asks for is a durable call (VECTOR_STORE), so a replay returns the
documents the run got even after the store changed, without a call to the store or the
embedding model, and an add made again writes its documents once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eddies import (
    Agent,
    AgentPlan,
    ChatModelSetup,
    Document,
    EmbeddedVectorStore,
    EmbeddingModelSetup,
    InputEvent,
    LocalRunner,
    OfflineEmbeddingModel,
    OutputEvent,
    PlanError,
    ReActAgent,
    ResourceType,
    ScriptedChatModel,
    action,
)
from eddies.connectors.declarative.located import DefinitionError
from eddies.connectors.declarative.yaml_agents import load_yaml_text
from eddies.connectors.execution.calls import CallPerformer
from eddies.connectors.inspect.replay import replay
from eddies.connectors.stores.filters import check, matches
from eddies.engine.vector_stores import document_dict
from eddies.events import (
    CallKind,
    ChatMessage,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    DurableCallRequest,
    DurableCallResult,
    MessageRole,
    ToolCall,
    decode_value,
    encode_value,
)
from tests.strategies import metadata, metadata_filters

CORPUS = [
    Document("Hostels in Lisbon from 18 euros a night", {"city": "Lisbon", "price": 18}, "lisbon-hostel"),
    Document("A boutique hotel in Lisbon's Alfama", {"city": "Lisbon", "price": 140}, "lisbon-hotel"),
    Document("Cheap guesthouses in Porto by the river", {"city": "Porto", "price": 35}, "porto-guest"),
    Document("Sourdough bread, step by step", {"topic": "baking"}, "bread"),
]


class Counting:
    """An embedding connection that counts what it embedded."""

    def __init__(self) -> None:
        self.inner = OfflineEmbeddingModel()
        self.texts: list[str] = []

    def embed(self, texts: list[str], **kw: Any) -> Any:
        self.texts += texts
        return self.inner.embed(texts, **kw)


class CountingStore(EmbeddedVectorStore):
    """The embedded store, counting its queries."""

    queries = 0

    def query(self, *args: Any, **kw: Any) -> list[dict[str, Any]]:
        CountingStore.queries += 1
        return super().query(*args, **kw)


class Librarian(Agent):
    """Stocks the store on "stock", else answers with the nearest documents."""

    @action(InputEvent)
    def answer(event: InputEvent, ctx: Any) -> None:
        docs = ctx.get_resource("docs", ResourceType.VECTOR_STORE)
        if event.input == "stock":
            ctx.send_event(OutputEvent(output=docs.add([*CORPUS[:3], "Sourdough bread, step by step"])))
            return
        ask = event.input
        hits = docs.query(ask["text"], limit=ask.get("limit", 2), filters=ask.get("filters"))
        ctx.send_event(OutputEvent(output=[[h.id, h.content] for h in hits]))


def _agent(store: EmbeddedVectorStore, conn: Any = None) -> Librarian:
    agent = Librarian("librarian")
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, conn or OfflineEmbeddingModel())
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
    agent.add_resource("docs", ResourceType.VECTOR_STORE, store)
    return agent


def _vectors(texts: list[str]) -> list[list[float]]:
    return OfflineEmbeddingModel().embed(texts)[0]


def _stocked(path: Path | None = None) -> EmbeddedVectorStore:
    store = EmbeddedVectorStore(embedding_model="emb", collection="travel", path=path)
    store.add("travel", [document_dict(d) for d in CORPUS], _vectors([d.content for d in CORPUS]))
    return store


def test_a_store_with_a_path_reads_its_documents_back(tmp_path: Path) -> None:
    store = _stocked(tmp_path)
    store.delete("travel", ["bread"])
    [q] = _vectors(["cheap guesthouse in Porto"])
    before = store.query("travel", q, 3)
    with open(tmp_path / "travel.jsonl", "a") as fh:
        fh.write('{"op": "upsert", "ids": ["cut sh')  # a write a crash cut short
    again = EmbeddedVectorStore(embedding_model="emb", collection="travel", path=tmp_path)
    assert again.count() == 3 and again.query("travel", q, 3) == before


@settings(max_examples=300, deadline=None)
@given(docs=st.lists(metadata, min_size=1, max_size=12), removed=st.sets(st.integers(0, 11), max_size=4),
       filters=metadata_filters)
def test_the_metadata_index_selects_what_a_scan_of_every_document_does(
        docs: list[dict[str, Any]], removed: set[int], filters: dict[str, Any]) -> None:
    store = EmbeddedVectorStore(embedding_model="emb", collection="c")
    rows = [{"id": str(i), "content": "x", "metadata": m} for i, m in enumerate(docs)]
    store.add("c", rows, [[1.0, float(i)] for i in range(len(rows))])
    store.update("c", [{"id": "0", "content": "y", "metadata": docs[-1]}], [[1.0, 0.0]])  # in place
    store.delete("c", [str(i) for i in removed])  # the last rows move into the gaps
    kept = {d["id"]: d["metadata"] for d in store.get("c")}
    expected = sorted(i for i, m in kept.items() if matches(m, filters))
    assert sorted(d["id"] for d in store.get("c", filters=filters)) == expected, (docs, removed, filters)


def test_filters_are_checked_before_anything_is_read() -> None:
    for bad, message in [({"price": {"$less": 3}}, "filters.price: \\$less is not an operator"),
                         ({"$or": []}, "filters.\\$or: expected a non-empty list"),
                         ({"$not": {}}, "filters: \\$not is not an operator here"),
                         ({"city": {"$in": "Lisbon"}}, "filters.city.\\$in: expected a list")]:
        with pytest.raises(ValueError, match=message):
            check(bad)
    with pytest.raises(ValueError, match=r"filters.price.\$lt: expected a number, a string or a "
                                         "boolean, got None"):
        check({"price": {"$lt": None}})
    assert matches({"price": 3}, {"price": {"$gte": 3, "$lt": 4}})
    assert not matches({"price": "cheap"}, {"price": {"$lt": 4}})  # no order across kinds
    assert not matches({}, {"price": {"$gt": 0}})
    assert matches({}, {"price": None}) and not matches({"price": 0}, {"price": None})
    # JSON's equality: a boolean is not a number (Python's True == 1 is not a match)
    assert not matches({"on": True}, {"on": 1}) and not matches({"on": 1}, {"on": {"$in": [True]}})
    assert matches({"n": 1}, {"n": 1.0}) and not matches({"on": True}, {"on": {"$gt": 0}})


def test_a_replay_returns_the_recorded_documents_after_the_store_changed() -> None:
    conn, store = Counting(), CountingStore(embedding_model="emb", collection="travel")
    runner = LocalRunner(_agent(store, conn))
    ids = runner.run([("s1", "stock")])[0]
    assert ids[:3] == ["lisbon-hostel", "lisbon-hotel", "porto-guest"]
    assert ids[3].endswith(":3")  # given from the call's id: the same on every attempt
    ask = {"text": "a cheap bed in Lisbon", "filters": {"price": {"$lt": 100}}}
    [hits] = runner.run([("s1", ask)])
    assert hits == [["lisbon-hostel", CORPUS[0].content], ["porto-guest", CORPUS[2].content]]
    results = [e.payload for e in runner.history if isinstance(e.payload, DurableCallResult)]
    assert [r.kind for r in results] == [CallKind.VECTOR_STORE] * 2
    assert decode_value(results[1].value)["extra_args"]["usage"]["prompt_tokens"] > 0

    store.delete("travel", filters={"price": {"$gt": 0}})  # the store changes
    store.add("travel", [{"id": "new", "content": "A new cheap bed in Lisbon"}], _vectors(["x"]))
    conn.texts.clear()
    queries = CountingStore.queries
    report = replay(runner.plan, list(enumerate(runner.history)), "s1")
    assert report.ok
    assert conn.texts == [] and CountingStore.queries == queries  # nothing asked of either


def test_an_add_made_again_writes_its_documents_once() -> None:
    store = EmbeddedVectorStore(embedding_model="emb", collection="travel")
    performer = CallPerformer(AgentPlan.compile(_agent(store)))
    args = encode_value({"args": [], "kwargs": {
        "op": "add", "collection": "travel", "documents": [{"content": "a"}, {"content": "b"}]}})
    request = DurableCallRequest("s1:r1:i1:c0", CallKind.VECTOR_STORE, "docs", args, True)
    first = performer.perform(request)
    again = performer.perform(request)  # a crash lost the first attempt's outcome
    # the same ids (the embedding's usage may differ: it carries the call's latency)
    assert first["result"] == again["result"] == ["s1:r1:i1:c0:0", "s1:r1:i1:c0:1"]
    assert store.count() == 2


def test_a_vector_store_needs_an_embedding_model_and_the_operations() -> None:
    agent = Librarian("wrong")
    agent.add_resource("docs", ResourceType.VECTOR_STORE,
                       EmbeddedVectorStore(embedding_model="nope", collection="c"))
    with pytest.raises(PlanError, match="embedding_model 'nope' is not an EMBEDDING_MODEL"):
        LocalRunner(agent)
    agent = Librarian("wrong2")
    agent.add_resource("docs", ResourceType.VECTOR_STORE, object())
    with pytest.raises(PlanError, match="a VECTOR_STORE needs a collection and the methods"):
        LocalRunner(agent)


YAML = """\
agents:
  - name: librarian
    actions:
      - {name: answer, function: "tests.unit.connectors.test_vector_stores:answer",
         trigger_conditions: [input]}
    embedding_model_connections:
      - {name: emb_conn, clazz: offline}
    embedding_model_setups:
      - {name: emb, connection: emb_conn}
    vector_stores:
      - {name: docs, clazz: embedded, embedding_model: emb, collection: travel}
"""
answer = Librarian.answer


def test_vector_stores_in_yaml() -> None:
    agent = load_yaml_text(YAML)
    runner = LocalRunner(agent)
    runner.run([("s1", "stock")])
    assert runner.run([("s1", {"text": "a guesthouse in Porto", "limit": 1})]) == [
        [["porto-guest", CORPUS[2].content]]]
    with pytest.raises(DefinitionError, match="<yaml>:11:56: embedding model 'nope' is not declared "
                                              "in embedding_model_setups"):
        load_yaml_text(YAML.replace("embedding_model: emb", "embedding_model: nope"))


class Asker(Agent):
    """Sends a retrieval request for its input; answers with what the built-in action found."""

    @action(InputEvent)
    def ask(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(ContextRetrievalRequestEvent(event.input, "docs", max_results=2,
                                                    filters={"price": {"$lt": 100}}))

    @action(ContextRetrievalResponseEvent)
    def answer(event: ContextRetrievalResponseEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output={"query": event.query,
                                           "found": [d.id for d in event.documents]}))


def _with_store(agent: Agent, store: EmbeddedVectorStore) -> Agent:
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, OfflineEmbeddingModel())
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
    agent.add_resource("docs", ResourceType.VECTOR_STORE, store)
    return agent


def test_the_builtin_retrieval_action_answers_a_request_with_the_documents_found() -> None:
    store = _stocked()
    runner = LocalRunner(_with_store(Asker("asker"), store))
    [out] = runner.run([("s1", "a cheap bed in Lisbon")])
    assert out == {"query": "a cheap bed in Lisbon", "found": ["lisbon-hostel", "porto-guest"]}
    [request] = [e for e in runner.history if isinstance(e.payload, ContextRetrievalRequestEvent)]
    [response] = [e.payload for e in runner.history
                  if isinstance(e.payload, ContextRetrievalResponseEvent)]
    assert response.request_id == request.event_id
    assert response.documents[0].metadata == {"city": "Lisbon", "price": 18}
    assert response.documents[0].score is not None and response.documents[0].score > 0
    assert [e.action for e in runner.history if e.payload is response] == ["eddies.context_retrieval"]
    store.delete("travel", filters={"price": {"$gt": 0}})
    assert replay(runner.plan, list(enumerate(runner.history)), "s1").ok


def test_a_model_searches_a_store_offered_as_a_tool() -> None:
    seen: list[str] = []

    def searcher(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
        results = [m.content for m in messages if m.role is MessageRole.TOOL]
        if results:
            seen.extend(results)
            return ChatMessage(MessageRole.ASSISTANT, "done")
        assert [t.name for t in tools] == ["docs"]
        assert tools[0].parameters["required"] == ["query"]
        return ChatMessage(MessageRole.ASSISTANT, "", [
            ToolCall("1", "docs", {"query": "guesthouse by the river", "max_results": 1}),
            ToolCall("2", "docs", {"max_results": 1})])

    agent = _with_store(ReActAgent("rag", model="llm"), _stocked())
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(searcher))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["docs"]))
    LocalRunner(agent).run([("s1", "where by the river?")])
    found, refused = seen
    assert [d["id"] for d in json.loads(found)] == ["porto-guest"]
    assert "ToolArgumentError" in refused and "query" in refused


@pytest.mark.serial  # its queries must arrive while the writer holds the store: a race for the CPU
def test_queries_that_wait_together_are_answered_together_as_one_at_a_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import random
    import threading

    from eddies.connectors.stores import embedded

    rng = random.Random(7)
    store = EmbeddedVectorStore(embedding_model="emb", collection="c")
    rows = [{"id": f"d{i}", "content": f"doc {i}", "metadata": {"even": i % 2 == 0}} for i in range(3000)]
    store.add("c", rows, [[rng.gauss(0, 1) for _ in range(16)] for _ in rows])
    asks: list[tuple[Any, ...]] = [("c", [rng.gauss(0, 1) for _ in range(16)], rng.randint(1, 9), None)
                                   for _ in range(40)]
    asks += [("c", [rng.gauss(0, 1) for _ in range(16)], 3, {"even": True}) for _ in range(4)]
    asks += [("c", [1.0, 2.0], 3, None), ("nowhere", [1.0] * 16, 3, None)]
    store.create_collection("other")  # the writer's, made now: "nowhere"'s error names it either way
    alone = [_answer_or_error(store, ask) for ask in asks]

    sizes: list[int] = []
    nearest = embedded._Collection.nearest

    def counted(self: Any, vectors: Any, limits: Any) -> Any:
        sizes.append(len(vectors))
        return nearest(self, vectors, limits)

    monkeypatch.setattr(embedded._Collection, "nearest", counted)
    together: list[Any] = [None] * len(asks)
    start = threading.Barrier(len(asks) + 1)

    def writer() -> None:  # holds the store while the queries arrive
        start.wait()
        store.add("other", [{"id": str(i), "content": "x"} for i in range(60_000)],
                  [[1.0] * 16 for _ in range(60_000)])

    def asker(i: int) -> None:
        start.wait()
        together[i] = _answer_or_error(store, asks[i])

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=asker, args=(i,))
                                                   for i in range(len(asks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert max(sizes) > 1, sizes  # some were answered by one matrix product
    for one, both in zip(alone, together, strict=True):
        if isinstance(one, Exception):
            assert type(both) is type(one) and str(both) == str(one)
        else:
            assert [d["id"] for d in both] == [d["id"] for d in one]
            assert [d["score"] for d in both] == pytest.approx([d["score"] for d in one], abs=1e-5)


def _answer_or_error(store: EmbeddedVectorStore, ask: tuple[Any, ...]) -> Any:
    try:
        return store.query(*ask)
    except (ValueError, LookupError) as err:
        return err
