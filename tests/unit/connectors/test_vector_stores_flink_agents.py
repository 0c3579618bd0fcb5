"""Flink Agents' vector store tests (its Chroma store's, python/flink_agents/integrations/
vector_stores/chroma/tests), ported to Eddies: each operation is made through the handle an
action gets, as a durable call, on the embedded store, in a sync action and, with the
``..._async`` forms, in an ``async def`` one. Where Flink Agents and Eddies differ, the test
says so: Eddies' scores are cosine similarities (nearer is higher), its filters take
operators, its handle deletes nothing unless told what, and a query of a collection the
store does not have is an error naming it (Chroma makes the collection and answers nothing).

Beside them, what Flink Agents users write and Eddies got wrong: one id or one document
where a list goes (``delete(ids="doc3")``), unknown collections, filters given as text."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from eddies import (
    Agent,
    Document,
    DurableCallError,
    EmbeddedVectorStore,
    EmbeddingModelSetup,
    InputEvent,
    LocalRunner,
    OfflineEmbeddingModel,
    OutputEvent,
    ResourceType,
    action,
)
from eddies.engine.vector_stores import CollectionNotFoundError
from eddies.events import CallKind, DurableCallRequest

#: The operations the clerks make, by the name their input gives.
STEPS: dict[str, Callable[[Any], Any]] = {}


def _json(value: Any) -> Any:
    """What an operation returned, as an output holds it: a document as a mapping."""
    if isinstance(value, Document):
        doc = {"id": value.id, "content": value.content, "metadata": dict(value.metadata)}
        return doc if value.score is None else {**doc, "score": value.score}
    if isinstance(value, list):
        return [_json(v) for v in value]
    return value


def _failure(err: Exception) -> dict[str, str]:
    """A failed call's error, or an argument refused before any call."""
    if isinstance(err, DurableCallError):
        # An unknown collection is a LookupError too, as Chroma's NotFoundError is.
        assert isinstance(err, LookupError) == (err.error_type == "CollectionNotFoundError")
        return {"failed": err.error_type, "message": err.message}
    return {"refused": type(err).__name__, "message": str(err)}


class Clerk(Agent):
    """Makes the operation its input names, in a sync action; answers with what it returned."""

    @action(InputEvent)
    def work(event: InputEvent, ctx: Any) -> None:
        try:
            out = _json(STEPS[event.input](ctx))
        except (DurableCallError, TypeError, ValueError) as err:
            out = _failure(err)
        ctx.send_event(OutputEvent(output=out))


class AsyncClerk(Agent):
    """The same, in an ``async def`` action awaiting the ``..._async`` forms."""

    @action(InputEvent)
    async def work(event: InputEvent, ctx: Any) -> None:
        try:
            made = STEPS[event.input](ctx)
            out = _json(await made if inspect.isawaitable(made) else made)
        except (DurableCallError, TypeError, ValueError) as err:
            out = _failure(err)
        ctx.send_event(OutputEvent(output=out))


class Desk:
    """A runner of a clerk agent: ``desk.call(reach, op, *args)`` makes operation ``op``
    (its ``_async`` form in the async clerk) of what ``reach(ctx)`` gives, in an action,
    and returns what it returned, as JSON."""

    def __init__(self, agent: Agent, asynchronous: bool) -> None:
        self.asynchronous = asynchronous
        self.runner = LocalRunner(agent)

    def call(self, reach: Callable[[Any], Any], op: str, *args: Any, **kwargs: Any) -> Any:
        name = f"step-{len(STEPS)}"
        method = op + ("_async" if self.asynchronous else "")
        STEPS[name] = lambda ctx: getattr(reach(ctx), method)(*args, **kwargs)
        [out] = self.runner.run([("s1", name)])
        return out

    def docs(self, op: str, *args: Any, **kwargs: Any) -> Any:
        """Operation ``op`` of the VECTOR_STORE handle ``docs``."""
        return self.call(lambda ctx: ctx.get_resource("docs", ResourceType.VECTOR_STORE), op, *args, **kwargs)

    def requests(self) -> int:
        """How many VECTOR_STORE calls the runs asked for."""
        return sum(1 for e in self.runner.history if isinstance(e.payload, DurableCallRequest)
                   and e.payload.kind is CallKind.VECTOR_STORE)


class Axes:
    """Flink Agents' _FixedVecEmbeddingModel: alpha, beta and gamma on the first three axes,
    every other text (a query) on alpha's."""

    AXES: ClassVar[dict[str, int]] = {"beta": 1, "gamma": 2}

    def embed(self, texts: list[str], **kw: Any) -> tuple[list[list[float]], dict[str, Any]]:
        return ([[1.0 if i == self.AXES.get(t, 0) else 0.0 for i in range(5)] for t in texts],
                {"prompt_tokens": len(texts)})


def _desk(asynchronous: bool, store: EmbeddedVectorStore, embeddings: Any = None) -> Desk:
    agent: Agent = (AsyncClerk if asynchronous else Clerk)("clerk")
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       embeddings or OfflineEmbeddingModel())
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
    agent.add_resource("docs", ResourceType.VECTOR_STORE, store)
    return Desk(agent, asynchronous)


@pytest.fixture(params=[False, True], ids=["sync", "async"])
def asynchronous(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


DOCS = [Document("ChromaDB is a vector database for AI applications",
                 {"category": "database", "source": "test"}, "doc1"),
        Document("Apache Flink Agents is an Agentic AI framework based on Apache Flink.",
                 {"category": "ai-agent", "source": "test"}, "doc2")]
EXPECTED = [_json(d) for d in DOCS]


def _populated(desk: Desk, collection: str) -> None:
    """Flink Agents' _populate_test_data: the collection made, and its two documents."""
    assert desk.docs("add", DOCS, collection=collection) == ["doc1", "doc2"]


def test_local_chroma_vector_store(asynchronous: bool) -> None:
    desk = _desk(asynchronous, EmbeddedVectorStore(embedding_model="emb", collection="test_collection"))
    _populated(desk, "test_collection")
    [found] = desk.docs("query", "What is Flink Agent?", limit=1)
    assert found["id"] == "doc2" and found["score"] > 0


def test_collection_management(asynchronous: bool) -> None:
    store = EmbeddedVectorStore(embedding_model="emb", collection="test_collection")
    desk = _desk(asynchronous, store)
    store.create_collection("collection_management")
    assert desk.docs("get", collection="collection_management") == []
    assert store.delete_collection("collection_management")
    # Chroma raises NotFoundError; Eddies' action sees the call's CollectionNotFoundError.
    assert desk.docs("get", collection="collection_management") == {
        "failed": "CollectionNotFoundError",
        "message": "collection 'collection_management' does not exist in vector store 'docs' "
                   "(it has no collections)"}


def test_document_management(asynchronous: bool) -> None:
    store = EmbeddedVectorStore(embedding_model="emb", collection="test_collection")
    desk = _desk(asynchronous, store)
    store.create_collection("document_management")
    _populated(desk, "document_management")
    assert desk.docs("get", collection="document_management") == EXPECTED
    # One id, not its four characters.
    assert desk.docs("get", ids="doc1", collection="document_management") == EXPECTED[:1]
    assert desk.docs("delete", ids="doc1", collection="document_management") == 1
    assert desk.docs("get", collection="document_management") == EXPECTED[1:]
    # Flink Agents' delete() with nothing named deletes all; Eddies' handle wants to be told
    # what, so its users name the filter that holds for all.
    assert desk.docs("delete", filters={"source": "test"}, collection="document_management") == 1
    assert desk.docs("get", collection="document_management") == []
    assert desk.docs("delete", filters={"source": "test"}, collection="document_management") == 0
    assert desk.docs("get", collection="document_management") == []
    assert desk.docs("delete", collection="document_management") == {
        "refused": "ValueError", "message": "docs.delete: name the ids or filters of what to delete"}


# --- Flink Agents' filter tests, on documents on three axes ---------------------------------
FILTERED = [Document("alpha", {"category": "a", "score": 10}, "doc1"),
            Document("beta", {"category": "a", "score": 20}, "doc2"),
            Document("gamma", {"category": "b", "score": 30}, "doc3")]


def _filter_test_desk(asynchronous: bool) -> Desk:
    desk = _desk(asynchronous, EmbeddedVectorStore(embedding_model="emb", collection="filter_tests"), Axes())
    assert desk.docs("add", FILTERED) == ["doc1", "doc2", "doc3"]
    return desk


def _ids(found: Any) -> list[str]:
    assert isinstance(found, list), found
    return [d["id"] for d in found]


def test_query_with_shorthand_equality_filter(asynchronous: bool) -> None:
    desk = _filter_test_desk(asynchronous)
    assert sorted(_ids(desk.docs("query", "x", limit=5, filters={"category": "a"}))) == ["doc1", "doc2"]


def test_query_with_multi_key_implicit_and_filter(asynchronous: bool) -> None:
    desk = _filter_test_desk(asynchronous)
    assert _ids(desk.docs("query", "x", limit=5, filters={"category": "a", "score": 20})) == ["doc2"]


def test_query_with_operators_in_the_filter(asynchronous: bool) -> None:
    # Flink Agents passes Chroma's native `where` for operators; Eddies' filters take them.
    desk = _filter_test_desk(asynchronous)
    assert sorted(_ids(desk.docs("query", "x", limit=5, filters={"score": {"$gte": 20}}))) == ["doc2", "doc3"]


def test_query_scores_populated(asynchronous: bool) -> None:
    desk = _filter_test_desk(asynchronous)
    scores = {d["id"]: d["score"] for d in desk.docs("query", "x", limit=3)}
    # Cosine similarity: the same direction is 1 (Chroma's distance 0), orthogonal ones 0.
    assert scores == {"doc1": pytest.approx(1.0), "doc2": pytest.approx(0.0), "doc3": pytest.approx(0.0)}


def test_get_with_filter(asynchronous: bool) -> None:
    desk = _filter_test_desk(asynchronous)
    assert _ids(desk.docs("get", filters={"category": "b"})) == ["doc3"]


def test_get_respects_explicit_limit(asynchronous: bool) -> None:
    desk = _filter_test_desk(asynchronous)
    assert len(desk.docs("get", limit=2)) == 2
    assert desk.docs("get", limit=0) == {
        "refused": "ValueError", "message": "docs.get: limit must be None or a positive int, got 0"}


def test_get_unbounded_when_limit_is_none(asynchronous: bool) -> None:
    desk = _filter_test_desk(asynchronous)
    assert len(desk.docs("get", limit=None)) == 3


def test_delete_with_filter(asynchronous: bool) -> None:
    desk = _filter_test_desk(asynchronous)
    assert desk.docs("delete", filters={"category": "a"}) == 2
    assert _ids(desk.docs("get")) == ["doc3"]


def test_update_document(asynchronous: bool) -> None:
    desk = _filter_test_desk(asynchronous)
    updated = Document("alpha-v2", {"category": "a", "score": 99}, "doc1")
    assert desk.docs("update", updated) == 1  # one Document, not a list of one
    [got] = desk.docs("get", ids="doc1")
    assert got["content"] == "alpha-v2" and got["metadata"]["score"] == 99
    assert desk.docs("update", Document("no id")) == {
        "refused": "ValueError", "message": "docs.update: every document needs its id"}


# --- what Flink Agents users write, and Eddies got wrong ------------------------------------
def test_one_id_or_one_document_is_one_never_its_characters(asynchronous: bool) -> None:
    store = EmbeddedVectorStore(embedding_model="emb", collection="c")
    desk = _desk(asynchronous, store, Axes())
    # Single-letter ids: a text taken as a list of its characters would name these.
    assert desk.docs("add", [Document("alpha", id="a"), Document("beta", id="b"),
                             Document("gamma", id="ab")]) == ["a", "b", "ab"]
    assert _ids(desk.docs("get", "ab")) == ["ab"]
    assert desk.docs("delete", "ab") == 1
    assert sorted(_ids(desk.docs("get"))) == ["a", "b"]
    assert _ids(desk.docs("get", ("b", "a"))) == ["b", "a"]  # a tuple, in its order
    assert _ids(desk.docs("get", {"b", "a"})) == ["a", "b"]  # a set, sorted: the same call everywhere
    assert desk.docs("get", ["a", 1]) == {
        "refused": "TypeError", "message": "docs.get: ids: an id is a str, got 1"}
    assert desk.docs("delete", 7) == {
        "refused": "TypeError",
        "message": "docs.delete: ids: expected an id (a str) or a list of them, got 7"}
    # One text, one document given as a mapping, one Document: one document each.
    said = "My favorite color is blue and I like long walks"
    [one] = desk.docs("add", said)
    assert [d["content"] for d in desk.docs("get", one)] == [said]
    assert desk.docs("add", {"content": "beta", "id": "m", "metadata": {"k": 1}}) == ["m"]
    assert desk.docs("add", Document("gamma", id="d")) == ["d"]
    assert store.count() == 5
    assert desk.docs("update", {"content": "gamma", "id": "m"}) == 1


def test_a_query_or_read_of_an_unknown_collection_is_an_error_naming_it(asynchronous: bool) -> None:
    store = EmbeddedVectorStore(embedding_model="emb", collection="travel")
    desk = _desk(asynchronous, store, Axes())
    # The store's own collection is not made until something is added to it.
    missing = {"failed": "CollectionNotFoundError",
               "message": "collection 'travel' does not exist in vector store 'docs' (it has no collections)"}
    assert desk.docs("query", "x") == missing and desk.docs("get") == missing
    assert desk.docs("add", [Document("alpha", id="a")]) == ["a"]  # an add makes it, as in Flink Agents
    assert store.collections() == ["travel"]
    misspelt = {"failed": "CollectionNotFoundError",
                "message": "collection 'travl' does not exist in vector store 'docs' (its collections: "
                           "'travel')"}
    for op, args in [("query", ("x",)), ("get", ()), ("get", ("a",)), ("delete", ("a",)),
                     ("update", (Document("beta", id="a"),))]:
        assert desk.docs(op, *args, collection="travl") == misspelt, op
    assert store.collections() == ["travel"]  # a read or a failed write makes nothing
    assert _ids(desk.docs("get", "a")) == ["a"]  # and changed nothing
    # An empty collection is one that exists: its reads answer nothing.
    store.create_collection("empty")
    assert desk.docs("query", "x", collection="empty") == [] and desk.docs("get", collection="empty") == []
    assert desk.docs("delete", "a", collection="empty") == 0


def test_filters_given_as_text_are_refused_before_any_call(asynchronous: bool) -> None:
    desk = _filter_test_desk(asynchronous)
    made = desk.requests()
    for op, args, kwargs in [("query", ("x",), {"filters": "category"}), ("get", (), {"filters": "category"}),
                             ("delete", (), {"filters": "category"}), ("get", ("doc1",), {"filters": ["a"]})]:
        assert desk.docs(op, *args, **kwargs) == {
            "refused": "ValueError",
            "message": f"docs.{op}: filters: expected a mapping, got {kwargs['filters']!r}"}, op
    assert desk.requests() == made  # nothing was asked of the store


def test_the_stores_own_operations_take_one_id_and_refuse_filters_given_as_text() -> None:
    store = EmbeddedVectorStore(embedding_model="emb", collection="c")
    store.add("c", [{"id": i, "content": i} for i in ("a", "b", "ab")], [[1.0, 0.0]] * 3)
    assert [d["id"] for d in store.get("c", "ab")] == ["ab"]
    assert [d["id"] for d in store.get("c", ["b", "b", "a"])] == ["b", "a"]  # each once, as in Postgres
    assert store.delete("c", "ab") == 1 and store.count() == 2
    for call in (lambda: store.query("c", [1.0, 0.0], 5, "city"),  # type: ignore[arg-type]
                 lambda: store.get("c", filters="city"),  # type: ignore[arg-type]
                 lambda: store.delete("c", filters="city")):  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="^filters: expected a mapping, got 'city'$"):
            call()
    with pytest.raises(CollectionNotFoundError, match="collection 'd' does not exist in this vector store "
                                                      "\\(its collections: 'c'\\)") as err:
        store.get("d")
    assert isinstance(err.value, LookupError) and err.value.collection == "d"
    assert store.add("new", [], []) == [] and store.collections() == ["c"]  # nothing to add makes nothing
