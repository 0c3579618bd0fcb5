"""Long-term memory: memory sets shared across sessions by the key an action chooses,
searched by meaning, forgotten past their retention; reads and writes are durable calls,
so a replay returns what was read then and a write made again writes once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from eddies import (
    Agent,
    EmbeddedVectorStore,
    EmbeddingModelSetup,
    InputEvent,
    LocalRunner,
    MemorySetSetup,
    OfflineEmbeddingModel,
    OutputEvent,
    PlanError,
    ResourceType,
    action,
)
from eddies.connectors.inspect.replay import replay

DAY_MS = 24 * 3600 * 1000


class Concierge(Agent):
    """{"user", "remember": [...]} remembers; {"user", "ask": text} answers with the user's
    nearest memories; {"user", "forget": true} forgets them all."""

    @action(InputEvent)
    def serve(event: InputEvent, ctx: Any) -> None:
        asked = event.input
        facts = ctx.long_term_memory.get_memory_set("facts", key=asked["user"])
        if "remember" in asked:
            out: Any = facts.add(asked["remember"])
        elif "forget" in asked:
            out = facts.delete()
        else:
            out = [d.content for d in facts.search(asked["ask"], limit=2)]
        ctx.send_event(OutputEvent(output=out))


def _agent(store: EmbeddedVectorStore, retention: timedelta | None = None) -> Concierge:
    agent = Concierge("concierge")
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, OfflineEmbeddingModel())
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
    agent.add_resource("docs", ResourceType.VECTOR_STORE, store)
    agent.add_resource("facts", ResourceType.MEMORY_SET, MemorySetSetup("docs", retention=retention))
    return agent


def _store() -> EmbeddedVectorStore:
    return EmbeddedVectorStore(embedding_model="emb", collection="default")


def test_a_users_memories_follow_them_across_sessions_and_no_one_else() -> None:
    store = _store()
    runner = LocalRunner(_agent(store))
    [ids] = runner.run([("monday", {"user": "ana", "remember": ["Ana is vegetarian",
                                                                 "Ana prefers window seats"]})])
    assert len(ids) == 2
    runner.run([("also-monday", {"user": "bo", "remember": ["Bo eats everything"]})])
    [found] = runner.run([("tuesday", {"user": "ana", "ask": "what food does she eat?"})])
    assert found[0] == "Ana is vegetarian" and "Bo eats everything" not in found
    [nothing] = runner.run([("tuesday-2", {"user": "cy", "ask": "what food?"})])
    assert nothing == []
    assert store.collections() == ["memory.concierge.facts"]
    [item] = [d for d in store.get("memory.concierge.facts") if d["content"] == "Ana is vegetarian"]
    assert item["metadata"]["key"] == "ana" and isinstance(item["metadata"]["at"], int)
    [gone] = runner.run([("wednesday", {"user": "ana", "forget": True})])
    assert gone == 2 and [d["content"] for d in store.get("memory.concierge.facts")] == ["Bo eats everything"]


def test_memories_past_their_retention_are_not_read_and_are_forgotten_at_the_next_write() -> None:
    store = _store()
    runner = LocalRunner(_agent(store, retention=timedelta(days=30)))
    for session, asked, day in [("s1", {"remember": ["Ana is vegetarian"]}, 1),
                                ("s2", {"ask": "food?"}, 20), ("s3", {"ask": "food?"}, 40),
                                ("s4", {"remember": ["Ana likes tea"]}, 41)]:
        runner.submit(session, {"user": "ana", **asked}, timestamp=day * DAY_MS)
        runner.run_until_idle()  # one after another, each at its day
    outputs = [e.payload.output for e in runner.outputs]  # type: ignore[union-attr]
    assert outputs[1] == ["Ana is vegetarian"] and outputs[2] == []
    assert [d["content"] for d in store.get("memory.concierge.facts")] == ["Ana likes tea"]


def test_a_replay_returns_the_memories_read_then() -> None:
    store = _store()
    runner = LocalRunner(_agent(store))
    runner.run([("s1", {"user": "ana", "remember": ["Ana is vegetarian"]})])
    runner.run([("s2", {"user": "ana", "ask": "food?"})])
    store.delete_collection("memory.concierge.facts")
    for session in ("s1", "s2"):
        history = [(n, e) for n, e in enumerate(runner.history) if e.session_id == session]
        assert replay(runner.plan, history, session).ok
    assert store.collections() == []  # the replay wrote nothing back


def test_a_memory_set_needs_its_store() -> None:
    agent = Concierge("c")
    agent.add_resource("facts", ResourceType.MEMORY_SET, MemorySetSetup("nope"))
    with pytest.raises(PlanError, match="vector_store 'nope' is not a VECTOR_STORE resource"):
        LocalRunner(agent)
    with pytest.raises(ValueError, match="retention must be a positive timedelta"):
        MemorySetSetup("docs", retention=timedelta(0))


def test_memory_sets_in_yaml() -> None:
    from eddies.connectors.declarative.located import DefinitionError
    from eddies.connectors.declarative.yaml_agents import load_yaml_text

    text = """\
agents:
  - name: concierge
    actions:
      - {name: serve, function: "tests.unit.connectors.test_long_term_memory:serve",
         trigger_conditions: [input]}
    embedding_model_connections:
      - {name: emb_conn, clazz: offline}
    embedding_model_setups:
      - {name: emb, connection: emb_conn}
    vector_stores:
      - {name: docs, clazz: embedded, embedding_model: emb}
    memory_sets:
      - {name: facts, vector_store: docs, retention_days: 30}
"""
    runner = LocalRunner(load_yaml_text(text))
    assert runner.plan.resource("facts", ResourceType.MEMORY_SET) == MemorySetSetup(
        "docs", retention=timedelta(days=30))
    runner.run([("s1", {"user": "ana", "remember": ["Ana is vegetarian"]})])
    assert runner.run([("s2", {"user": "ana", "ask": "food?"})]) == [["Ana is vegetarian"]]
    with pytest.raises(DefinitionError, match="<yaml>:13:59: retention_days: expected a positive"):
        load_yaml_text(text.replace("retention_days: 30", "retention_days: -1"))


serve = Concierge.serve
