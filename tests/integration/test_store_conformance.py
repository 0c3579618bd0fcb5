"""Every vector store does the same: the embedded one and Postgres with pgvector (a real
server, tests/postgres.py) answer the same operations with the same documents, and their
metadata filters agree with each other on generated documents and filters."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eddies import EmbeddedVectorStore, OfflineEmbeddingModel
from eddies.connectors.stores.filters import matches
from eddies.engine.vector_stores import CollectionNotFoundError
from tests.strategies import metadata, metadata_filters

pytestmark = pytest.mark.integration

DOCS = [
    {"id": "lisbon-hostel", "content": "Hostels in Lisbon from 18 euros a night",
     "metadata": {"city": "Lisbon", "price": 18}},
    {"id": "lisbon-hotel", "content": "A boutique hotel in Lisbon's Alfama",
     "metadata": {"city": "Lisbon", "price": 140}},
    {"id": "porto-guest", "content": "Cheap guesthouses in Porto by the river",
     "metadata": {"city": "Porto", "price": 35}},
    {"id": "bread", "content": "Sourdough bread, step by step", "metadata": {"topic": "baking"}},
]
_MODEL = OfflineEmbeddingModel()


def _vectors(texts: list[str]) -> list[list[float]]:
    return _MODEL.embed(texts)[0]


Store = Any
MakeStore = Callable[[], Store]


@pytest.fixture(params=["embedded", "pgvector"])
def make_store(request: pytest.FixtureRequest) -> MakeStore:
    """Makes an empty store of the kind under test (its own tables on the shared server)."""
    if request.param == "embedded":
        return lambda: EmbeddedVectorStore(embedding_model="emb", collection="travel")
    from eddies import PgVectorStore

    dsn = request.getfixturevalue("postgres_dsn")
    made: list[Any] = []

    def make() -> Store:
        made.append(PgVectorStore(embedding_model="emb", collection="travel", dsn=dsn,
                                  table_prefix=f"t{uuid.uuid4().hex[:8]}_"))
        return made[-1]

    request.addfinalizer(lambda: [s.close() for s in made])
    return make


def _stocked(make_store: MakeStore) -> Store:
    store = make_store()
    store.add("travel", DOCS, _vectors([d["content"] for d in DOCS]))
    return store


def test_a_store_queries_filters_gets_updates_and_deletes(make_store: MakeStore) -> None:
    store = _stocked(make_store)
    [q] = _vectors(["a cheap bed in Lisbon"])
    assert [d["id"] for d in store.query("travel", q, 2)] == ["lisbon-hostel", "lisbon-hotel"]
    hits = store.query("travel", q, 5, {"price": {"$lt": 100}})
    assert [d["id"] for d in hits] == ["lisbon-hostel", "porto-guest"]
    assert hits[0]["score"] > hits[1]["score"] and hits[0]["metadata"] == {"city": "Lisbon", "price": 18}
    assert abs(hits[0]["score"] - 0.654) < 0.01  # cosine similarity, the same in every store
    assert [d["id"] for d in store.query("travel", q, 5, {"$or": [{"topic": "baking"},
                                                                   {"city": {"$in": ["Porto"]}}]})] \
        == ["porto-guest", "bread"]
    assert store.query("travel", q, 5, {"city": "Oslo"}) == []
    got = store.get("travel", ["bread", "nope", "porto-guest"])
    assert [d["id"] for d in got] == ["bread", "porto-guest"]
    got = store.get("travel", filters={"city": "Lisbon"})
    assert [d["id"] for d in got] == ["lisbon-hostel", "lisbon-hotel"]
    assert [d["id"] for d in store.get("travel", filters={"city": "Lisbon"}, limit=1)] == ["lisbon-hostel"]
    moved = {"id": "bread", "content": "Rye bread in Lisbon", "metadata": {"city": "Lisbon"}}
    assert store.update("travel", [moved, {"id": "nope", "content": "x"}],
                        _vectors([moved["content"], "x"])) == 1
    assert store.get("travel", ["bread"])[0]["content"] == "Rye bread in Lisbon"
    assert store.get("travel", ["nope"]) == []  # an update adds nothing
    again = {**DOCS[2], "content": "Guesthouses in Porto, again"}
    assert store.add("travel", [again], _vectors([again["content"]])) == ["porto-guest"]
    assert store.count() == 4  # an add of an id it holds replaces the document
    assert store.delete("travel", filters={"city": "Lisbon"}) == 3
    assert [d["content"] for d in store.get("travel")] == ["Guesthouses in Porto, again"]
    assert store.delete("travel", ["porto-guest", "porto-guest"]) == 1 and store.count() == 0


def test_collections_are_apart_and_made_and_dropped(make_store: MakeStore) -> None:
    store = _stocked(make_store)
    store.add("other", [{"id": "x", "content": "Lisbon"}], _vectors(["Lisbon"]))
    assert store.collections() == ["other", "travel"] and store.count("other") == 1
    [q] = _vectors(["Lisbon"])
    assert [d["id"] for d in store.query("other", q, 5)] == ["x"]
    assert store.delete_collection("other") and store.collections() == ["travel"]
    assert not store.delete_collection("other")
    # A query, read, update or delete of a collection the store does not have names it.
    gone = "collection 'other' does not exist in this vector store \\(its collections: 'travel'\\)"
    for op in (lambda: store.query("other", q, 5), lambda: store.get("other"),
               lambda: store.get("other", "x"), lambda: store.delete("other", ["x"]),
               lambda: store.update("other", [{"id": "x", "content": "y"}], _vectors(["y"]))):
        with pytest.raises(CollectionNotFoundError, match=gone):
            op()
    assert store.collections() == ["travel"] and store.count("other") == 0
    store.create_collection("other")  # made empty: its reads answer nothing
    assert store.query("other", q, 5) == [] and store.get("other") == [] and store.delete("other", "x") == 0
    with pytest.raises(ValueError, match="dimensions"):
        store.add("travel", [{"id": "y", "content": "y"}], [[0.1, 0.2, 0.3]])
    with pytest.raises(ValueError, match=r"filters\.price: \$less is not an operator"):
        store.query("travel", q, 5, {"price": {"$less": 3}})
    with pytest.raises(TypeError, match="metadata must be JSON"):
        store.add("travel", [{"id": "z", "content": "z", "metadata": {"at": object()}}], _vectors(["z"]))


def test_one_id_is_one_id_and_filters_given_as_text_are_refused(make_store: MakeStore) -> None:
    # Flink Agents' users write get(ids="doc1") and delete(ids="doc1"); single-letter ids
    # would be what a text taken as a list of its characters names.
    store = make_store()
    rows = [{"id": i, "content": i} for i in ("a", "b", "ab")]
    store.add("travel", rows, _vectors(["a", "b", "ab"]))
    assert [d["id"] for d in store.get("travel", "ab")] == ["ab"]
    assert [d["id"] for d in store.get("travel", ["b", "b", "a"])] == ["b", "a"]
    assert store.delete("travel", "ab") == 1
    assert sorted(d["id"] for d in store.get("travel")) == ["a", "b"]
    [q] = _vectors(["a"])
    for op in (lambda: store.query("travel", q, 5, "city"), lambda: store.get("travel", filters="city"),
               lambda: store.delete("travel", filters="city")):
        with pytest.raises(ValueError, match="^filters: expected a mapping, got 'city'$"):
            op()
    assert store.count() == 2
    assert store.add("new", [], []) == [] and store.collections() == ["travel"]  # nothing made


def test_a_second_store_on_the_same_place_sees_the_documents(make_store: MakeStore,
                                                             request: pytest.FixtureRequest) -> None:
    if "embedded" in request.node.callspec.id:
        pytest.skip("the embedded store shares through its path (test_vector_stores.py)")
    from eddies import PgVectorStore

    first = _stocked(make_store)
    other = PgVectorStore(embedding_model="emb", collection="travel", dsn=first.dsn,
                          table_prefix=first.table_prefix)
    try:
        [q] = _vectors(["bread"])
        assert other.query("travel", q, 1)[0]["id"] == "bread"  # another worker's view
        first.delete_collection("travel")  # dropped under the other's feet
        with pytest.raises(CollectionNotFoundError, match="collection 'travel' does not exist"):
            other.query("travel", q, 1)
        with pytest.raises(CollectionNotFoundError, match="collection 'travel' does not exist"):
            other.delete("travel", filters={"city": "Lisbon"})
        assert other.count() == 0
        assert other.add("travel", DOCS[:1], _vectors([DOCS[0]["content"]])) == ["lisbon-hostel"]
        # Vectors wider than pgvector's HNSW limit (2,000) are kept and searched exactly.
        wide = [[1.0 if k == i else 0.0 for k in range(3072)] for i in range(3)]
        other.add("wide", [{"id": str(i), "content": f"doc {i}"} for i in range(3)], wide)
        assert [d["id"] for d in other.query("wide", wide[2], 1)] == ["2"]
    finally:
        other.close()


def test_a_postgres_store_declared_in_yaml(postgres_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from eddies import LocalRunner
    from eddies.connectors.declarative.yaml_agents import load_yaml_text
    from tests.unit.connectors.test_vector_stores import YAML

    monkeypatch.setenv("TEST_PG_DSN", postgres_dsn)  # a secret stays out of the file
    yaml = YAML.replace("clazz: embedded,", 'clazz: pgvector, dsn: "${TEST_PG_DSN}", table_prefix: '
                        f"t{uuid.uuid4().hex[:8]}_,")
    assert "pgvector" in yaml
    runner = LocalRunner(load_yaml_text(yaml))
    runner.run([("s1", "stock")])
    assert runner.run([("s1", {"text": "a guesthouse in Porto", "limit": 1})]) == [
        [["porto-guest", "Cheap guesthouses in Porto by the river"]]]


def test_postgres_filters_mean_what_the_embedded_store_s_mean(postgres_dsn: str) -> None:
    from eddies import PgVectorStore

    store = PgVectorStore(embedding_model="emb", collection="f", dsn=postgres_dsn,
                          table_prefix=f"t{uuid.uuid4().hex[:8]}_")

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(docs=st.lists(metadata, min_size=1, max_size=8), filters=metadata_filters)
    def agree(docs: list[dict[str, Any]], filters: dict[str, Any]) -> None:
        store.delete("f")
        rows = [{"id": str(i), "content": "x", "metadata": m} for i, m in enumerate(docs)]
        store.add("f", rows, [[1.0, float(i)] for i in range(len(rows))])
        expected = [r["id"] for r in rows if matches(r["metadata"], filters)]
        assert [d["id"] for d in store.get("f", filters=filters)] == expected, (docs, filters)

    try:
        store.create_collection("f")  # its first example deletes before anything was added
        agree()
    finally:
        store.close()


def test_actions_see_one_id_unknown_collections_and_memory_sets_the_same(make_store: MakeStore) -> None:
    # The ports of Flink Agents' tests (tests/unit/connectors/test_*_flink_agents.py), run
    # on each store: through the handle and a memory set, as durable calls.
    from eddies import Document, EmbeddingModelSetup, MemorySetSetup, ResourceType
    from tests.unit.connectors.test_vector_stores_flink_agents import Clerk, Desk

    store = make_store()
    agent = Clerk("clerk")
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, _MODEL)
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
    agent.add_resource("docs", ResourceType.VECTOR_STORE, store)
    agent.add_resource("facts", ResourceType.MEMORY_SET, MemorySetSetup("docs"))
    desk = Desk(agent, asynchronous=False)
    missing = {"failed": "CollectionNotFoundError",
               "message": "collection 'travel' does not exist in vector store 'docs' (it has no collections)"}
    assert desk.docs("query", "a bed") == missing and desk.docs("get", "a") == missing
    assert desk.docs("add", [Document("alpha", id="a"), Document("beta", id="b"),
                             Document("gamma", id="ab")]) == ["a", "b", "ab"]
    assert desk.docs("delete", "ab") == 1 and [d["id"] for d in desk.docs("get", "a")] == ["a"]
    assert desk.docs("get", collection="travl")["message"] == (
        "collection 'travl' does not exist in vector store 'docs' (its collections: 'travel')")

    def facts(op: str, *args: Any, **kwargs: Any) -> Any:
        return desk.call(lambda ctx: ctx.long_term_memory.get_memory_set("facts", key="ana"), op,
                         *args, **kwargs)

    assert facts("get") == [] and facts("search", "food") == [] and facts("delete") == 0  # never written
    [one] = facts("add", "Ana is vegetarian", metadatas={"topic": "food"})
    assert [d["content"] for d in facts("get", one)] == ["Ana is vegetarian"]
    assert [d["id"] for d in facts("get", filters={"topic": "food"})] == [one]
    assert desk.call(lambda ctx: ctx.long_term_memory, "delete_memory_set", "facts", key="ana") is True
    assert facts("get") == []


def test_stores_connecting_to_a_new_database_at_once_all_get_the_extension(postgres_dsn: str) -> None:
    """Each store makes the pgvector extension on its first connection if the database has
    none: connections of a new database that make it in the same instant race (all but
    one get a duplicate key in pg_extension), which is no error."""
    import threading

    import psycopg

    from eddies import PgVectorStore

    name = f"fresh_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    dsn = psycopg.conninfo.make_conninfo(postgres_dsn, dbname=name)
    start, errors = threading.Barrier(4), []

    def connect() -> None:
        store = PgVectorStore(embedding_model="emb", collection="c", dsn=dsn)
        start.wait()
        try:
            store.collections()
        except Exception as err:  # what the test reports
            errors.append(err)
        finally:
            store.close()

    threads = [threading.Thread(target=connect) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
