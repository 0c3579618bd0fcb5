"""Flink Agents' long-term memory tests (its Mem0 backend's, python/flink_agents/runtime/
memory/mem0/tests/test_mem0_long_term_memory.py), ported to Eddies' memory sets: each
operation is made in an action, as durable calls on the embedded store, in a sync action
and, with the ``..._async`` forms, in an ``async def`` one. Mem0's items are
MemorySetItems (``value``, ``additional_metadata``); Eddies' are Documents (``content``,
``metadata``, which also holds the item's ``key`` and ``at``). Flink Agents' partition key
(``switch_context``) is the memory set's key here.

Beside them: one item is one item (``add(items="My favorite...")``), a set never written to
holds nothing (it is no error, as a store's unknown collection is), filters given as text."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import (
    EmbeddedVectorStore,
    EmbeddingModelSetup,
    MemorySetSetup,
    OfflineEmbeddingModel,
    ResourceType,
)
from tests.unit.connectors.test_vector_stores_flink_agents import AsyncClerk, Clerk, Desk


class Memory(Desk):
    """A clerk with memory set ``facts`` on the embedded store."""

    def __init__(self, asynchronous: bool) -> None:
        self.store = EmbeddedVectorStore(embedding_model="emb")
        agent = (AsyncClerk if asynchronous else Clerk)("clerk")
        agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, OfflineEmbeddingModel())
        agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
        agent.add_resource("docs", ResourceType.VECTOR_STORE, self.store)
        for name in ("facts", "other"):
            agent.add_resource(name, ResourceType.MEMORY_SET, MemorySetSetup("docs"))
        super().__init__(agent, asynchronous)

    def set(self, op: str, *args: Any, key: str = "test_job_001", name: str = "facts", **kwargs: Any) -> Any:
        """Operation ``op`` of memory set ``name`` of ``key``."""
        return self.call(lambda ctx: ctx.long_term_memory.get_memory_set(name, key=key), op, *args, **kwargs)

    def memory(self, op: str, *args: Any, **kwargs: Any) -> Any:
        """Operation ``op`` of ``ctx.long_term_memory``."""
        return self.call(lambda ctx: ctx.long_term_memory, op, *args, **kwargs)


@pytest.fixture(params=[False, True], ids=["sync", "async"])
def ltm(request: pytest.FixtureRequest) -> Memory:
    return Memory(bool(request.param))


def _values(items: Any) -> list[str]:
    assert isinstance(items, list), items
    return [item["content"] for item in items]


def test_add_and_get(ltm: Memory) -> None:
    ids = ltm.set("add", items="The user prefers Python over Java.")
    assert len(ids) == 1  # one item, not 34 one-letter ones

    items = ltm.set("get")
    assert _values(items) == ["The user prefers Python over Java."]

    [item] = ltm.set("get", ids=ids[0])  # one id, not its characters
    assert item["id"] == ids[0] and item["content"] == "The user prefers Python over Java."


def test_add_multiple_items(ltm: Memory) -> None:
    ids = ltm.set("add", items=["User likes coffee in the morning.", "User works from home on Fridays."])
    assert len(ids) == 2
    assert sorted(_values(ltm.set("get"))) == ["User likes coffee in the morning.",
                                               "User works from home on Fridays."]


def test_search(ltm: Memory) -> None:
    ltm.set("add", items="The capital of France is Paris.")
    ltm.set("add", items="Sourdough needs a starter.")
    results = ltm.set("search", query="What is the capital of France?", limit=5)
    assert _values(results)[0] == "The capital of France is Paris."
    assert results[0]["score"] > results[1]["score"]
    assert _values(ltm.set("search", "What is the capital of France?", 1)) == [  # Flink Agents' order
        "The capital of France is Paris."]


def test_get_with_filters(ltm: Memory) -> None:
    ltm.set("add", items="Important meeting tomorrow.", metadatas={"category": "work"})
    ltm.set("add", items="Buy groceries after work.", metadatas={"category": "personal"})

    work_items = ltm.set("get", filters={"category": "work"})
    assert _values(work_items) == ["Important meeting tomorrow."]
    assert all(item["metadata"]["category"] == "work" for item in work_items)

    personal_items = ltm.set("get", filters={"category": "personal"})
    assert _values(personal_items) == ["Buy groceries after work."]
    # The key's own filter stays: a filter cannot reach another key's items.
    assert ltm.set("get", filters={"key": "someone else"}) == []
    assert ltm.set("get", filters={"category": "work"}, key="someone else") == []


def test_search_with_filters(ltm: Memory) -> None:
    ltm.set("add", items="Python is a great language for data science.", metadatas={"topic": "programming"})
    ltm.set("add", items="The weather in Paris is lovely in spring.", metadatas={"topic": "travel"})

    results = ltm.set("search", query="programming language", limit=5, filters={"topic": "programming"})
    assert _values(results) == ["Python is a great language for data science."]
    assert all(item["metadata"]["topic"] == "programming" for item in results)


def test_metadatas_one_for_all_or_one_each(ltm: Memory) -> None:
    ids = ltm.set("add", ["a fact", "another fact"], metadatas=[{"n": 1}, {"n": 2}])
    assert [item["metadata"]["n"] for item in ltm.set("get", ids)] == [1, 2]
    ids = ltm.set("add", ["a third", "a fourth"], metadatas={"n": 3})
    assert [item["metadata"]["n"] for item in ltm.set("get", ids)] == [3, 3]
    assert ltm.set("add", ["x", "y"], metadatas=[{"n": 1}]) == {
        "refused": "ValueError", "message": "memory set 'facts': 1 metadatas for 2 items"}
    assert ltm.set("add", "x", metadatas="n") == {
        "refused": "TypeError",
        "message": "memory set 'facts': metadatas is a mapping or a list of them, got 'n'"}


def test_delete_by_id(ltm: Memory) -> None:
    ids = ltm.set("add", items=["Memory to delete.", "Memory to keep."])
    assert ltm.set("delete", ids=ids[0]) == 1  # one id, not its characters
    assert [item["id"] for item in ltm.set("get")] == ids[1:]


def test_delete_all(ltm: Memory) -> None:
    ltm.set("add", items="Memory 1")
    ltm.set("add", items="Memory 2")
    ltm.set("add", items="Someone else's memory", key="key_b")
    assert ltm.set("delete") == 2
    assert ltm.set("get") == []
    assert _values(ltm.set("get", key="key_b")) == ["Someone else's memory"]


def test_delete_memory_set(ltm: Memory) -> None:
    ltm.set("add", items="Some content")
    ltm.set("add", items="Other content", name="other")
    assert ltm.memory("delete_memory_set", name="facts", key="test_job_001") is True

    assert ltm.set("get") == []  # getting the set again: a fresh empty one
    assert _values(ltm.set("get", name="other")) == ["Other content"]  # another set stays
    assert ltm.memory("delete_memory_set", "facts", key="test_job_001") is False  # it held nothing


def test_switch_context(ltm: Memory) -> None:
    ltm.set("add", items="Data for key_a", key="key_a")
    # Items of key_a are not visible under key_b in the same memory set.
    assert ltm.set("get", key="key_b") == []
    assert ltm.set("search", "Data", key="key_b") == []
    assert _values(ltm.set("get", key="key_a")) == ["Data for key_a"]


def test_a_set_never_written_to_holds_nothing(ltm: Memory) -> None:
    assert ltm.store.collections() == []
    assert ltm.set("get") == [] and ltm.set("get", "an-id") == []
    assert ltm.set("search", "anything") == []
    assert ltm.set("delete") == 0 and ltm.set("delete", "an-id") == 0
    assert ltm.memory("delete_memory_set", "facts") is False
    assert ltm.store.collections() == []  # and reading it made nothing


def test_filters_given_as_text_are_refused_before_any_call(ltm: Memory) -> None:
    ltm.set("add", items="a fact")
    made = ltm.requests()
    for op, args in [("search", ("a fact",)), ("get", ())]:
        assert ltm.set(op, *args, filters="category") == {
            "refused": "ValueError",
            "message": "memory set 'facts': filters: expected a mapping, got 'category'"}, op
    assert ltm.requests() == made
