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
    merging = text.replace("retention_days: 30}", "compaction_model: llm, similarity: 0.9}") + """\
    chat_model_connections:
      - {name: merger, clazz: scripted, responder: "tests.unit.connectors.test_long_term_memory:merges"}
    chat_model_setups:
      - {name: llm, connection: merger}
"""
    assert LocalRunner(load_yaml_text(merging)).plan.resource("facts", ResourceType.MEMORY_SET) == \
        MemorySetSetup("docs", compaction_model="llm", similarity=0.9)
    with pytest.raises(DefinitionError, match="<yaml>:13:61: chat model 'lm' is not declared"):
        load_yaml_text(merging.replace("compaction_model: llm", "compaction_model: lm"))


serve = Concierge.serve


def merges(messages: list[Any], tools: list[Any]) -> str:
    """A compaction model: the same diet is nothing new; a move updates where Ana lives;
    a word about the weather is not an answer at all; anything else is added."""
    import json

    asked = json.loads(messages[-1].content)
    shown = {m["text"]: m["id"] for m in asked["memories"]}
    new = asked["new"]
    if "vegetarian" in new and "Ana is vegetarian" in shown:
        return json.dumps({"action": "none", "id": shown["Ana is vegetarian"]})
    if "lives in" in new and "Ana lives in Porto" in shown:
        moved = {"action": "update", "id": shown["Ana lives in Porto"], "text": "Ana lives in Lisbon"}
        return f"Sure: {json.dumps(moved)}"
    if "sunny" in new:
        return "It is sunny!"
    return json.dumps({"action": "add"})


def test_a_compaction_model_keeps_one_item_per_fact_and_a_replay_decides_the_same() -> None:
    from eddies import ChatModelSetup, ScriptedChatModel

    calls: list[str] = []

    def counted(messages: list[Any], tools: list[Any]) -> str:
        calls.append(messages[-1].content)
        return merges(messages, tools)

    store = _store()
    agent = _agent(store)
    agent.resources = [r for r in agent.resources if r.name != "facts"]
    agent.add_resource("merger", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(counted))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("merger"))
    agent.add_resource("facts", ResourceType.MEMORY_SET,
                       MemorySetSetup("docs", compaction_model="llm", similarity=0.3))
    runner = LocalRunner(agent)
    [first] = runner.run([("s1", {"user": "ana", "remember": ["Ana is vegetarian", "Ana lives in Porto"]})])
    asked = len(calls)
    [again] = runner.run([("s2", {"user": "ana", "remember": ["Ana is a vegetarian",
                                                              "Ana now lives in Lisbon",
                                                              "Ana finds Lisbon sunny"]})])
    assert again[:2] == first  # the same items: one nothing new, one updated
    kept = sorted(d["content"] for d in store.get("memory.concierge.facts"))
    assert kept == ["Ana finds Lisbon sunny", "Ana is vegetarian", "Ana lives in Lisbon"]
    assert len(calls) > asked  # the model was asked about the near ones
    assert any("sunny" in c for c in calls[asked:])  # and its non-answer added the item
    [updated] = store.get("memory.concierge.facts", [first[1]])
    assert updated["metadata"]["key"] == "ana"

    made = len(calls)
    history = [(i, e) for i, e in enumerate(runner.history) if e.session_id == "s2"]
    report = replay(runner.plan, history, "s2")
    assert report.ok and len(calls) == made  # the recorded decisions, no model call
    agent.resources = [r for r in agent.resources if r.name != "facts"]
    agent.add_resource("facts", ResourceType.MEMORY_SET, MemorySetSetup("docs", compaction_model="docs"))
    with pytest.raises(PlanError, match="compaction_model 'docs' is not a CHAT_MODEL"):
        LocalRunner(agent)


def remembering(messages: list[Any], tools: list[Any]) -> Any:
    """A model that keeps what the user says ("I ...") and recalls for a question ("...?"),
    answering with what it recalled."""
    import json

    from eddies import ChatMessage, MessageRole, ToolCall

    said = json.loads(next(m.content for m in messages if m.role is MessageRole.USER))["say"]
    results = [m.content for m in messages if m.role is MessageRole.TOOL]
    if results:
        return ChatMessage(MessageRole.ASSISTANT, results[-1])
    if said.endswith("?"):
        recall = {"recall": said, "max_results": 1}
        return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("r", "facts", recall)])
    if said == "nothing":
        return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("n", "facts", {"max_results": 1})])
    return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("k", "facts", {"remember": [said]})])


def _remembering_agent(store: EmbeddedVectorStore, key: str = "input:user") -> Any:
    from eddies import ChatModelSetup, ReActAgent, ScriptedChatModel

    agent = ReActAgent("concierge", model="llm")
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, OfflineEmbeddingModel())
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
    agent.add_resource("docs", ResourceType.VECTOR_STORE, store)
    agent.add_resource("facts", ResourceType.MEMORY_SET, MemorySetSetup("docs", key=key))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(remembering))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["facts"]))
    return agent


def test_a_model_remembers_and_recalls_through_a_memory_set_offered_as_a_tool() -> None:
    import json

    store = _store()
    runner = LocalRunner(_remembering_agent(store))
    spec = runner.plan.tool_specs("llm")[0]
    assert spec.name == "facts"
    assert set(spec.parameters["properties"]) == {"remember", "recall", "max_results"}
    said = runner.run([("s1", {"user": "ana", "say": "I am vegetarian"}),
                       ("s2", {"user": "bo", "say": "I eat everything"})])
    assert [json.loads(s) for s in said] == [{"remembered": 1}, {"remembered": 1}]
    [ana] = runner.run([("s3", {"user": "ana", "say": "what do I eat?"})])
    assert [r["content"] for r in json.loads(ana)["recalled"]] == ["I am vegetarian"]  # hers, not bo's
    [nobody] = runner.run([("s4", {"user": "cy", "say": "what do I eat?"})])
    assert json.loads(nobody) == {"recalled": []}
    items = {d["content"]: d["metadata"]["key"] for d in store.get("memory.concierge.facts")}
    assert items == {"I am vegetarian": "ana", "I eat everything": "bo"}

    [refused] = runner.run([("s5", {"user": "ana", "say": "nothing"})])
    assert "ToolArgumentError" in refused and "'remember', 'recall'" in refused
    [keyless] = runner.run([("s6", {"say": "what do I eat?"})])  # the input names no user
    assert "ToolArgumentError" in keyless and "input:user" in keyless

    history = [(i, e) for i, e in enumerate(runner.history) if e.session_id == "s3"]
    store.delete_collection("memory.concierge.facts")
    report = replay(runner.plan, history, "s3")
    assert report.ok  # the recorded recall, though the store forgot it


def test_a_memory_sets_key_is_a_session_an_input_field_config_or_short_term_memory() -> None:
    with pytest.raises(ValueError, match="key is 'session', 'input:FIELD'"):
        MemorySetSetup("docs", key="user")
    with pytest.raises(ValueError, match="key is 'session'"):
        MemorySetSetup("docs", key="input:")
    store = _store()
    runner = LocalRunner(_remembering_agent(store, key="session"))
    runner.run([("s1", {"say": "I am vegetarian"})])
    assert runner.run([("s1", {"say": "what do I eat?"})]) != runner.run([("s2", {"say": "what do I eat?"})])
    assert {d["metadata"]["key"] for d in store.get("memory.concierge.facts")} == {"s1"}


def test_a_react_agent_in_yaml_remembers_with_a_memory_set_as_a_tool() -> None:
    import json

    from eddies.connectors.declarative.located import DefinitionError
    from eddies.connectors.declarative.yaml_agents import load_yaml_text

    text = """\
agents:
  - name: concierge
    type: react
    model: llm
    chat_model_connections:
      - {name: conn, clazz: scripted, responder: "tests.unit.connectors.test_long_term_memory:remembering"}
    chat_model_setups:
      - {name: llm, connection: conn, tools: [facts]}
    embedding_model_connections:
      - {name: emb_conn, clazz: offline}
    embedding_model_setups:
      - {name: emb, connection: emb_conn}
    vector_stores:
      - {name: docs, clazz: embedded, embedding_model: emb}
    memory_sets:
      - {name: facts, vector_store: docs, key: "input:user"}
"""
    runner = LocalRunner(load_yaml_text(text))
    assert runner.plan.resource("facts", ResourceType.MEMORY_SET) == MemorySetSetup("docs", key="input:user")
    runner.run([("s1", {"user": "ana", "say": "I am vegetarian"})])
    [ana] = runner.run([("s2", {"user": "ana", "say": "what do I eat?"})])
    assert [r["content"] for r in json.loads(ana)["recalled"]] == ["I am vegetarian"]
    with pytest.raises(DefinitionError, match="<yaml>:16:9: MemorySetSetup: key is .session."):
        load_yaml_text(text.replace('key: "input:user"', 'key: "user"'))
