"""Flink Agents' long-term memory end-to-end test (its
python/flink_agents/e2e_tests/e2e_tests_integration/long_term_memory_test.py), ported to
Eddies and run in-process (tests/integration/test_long_term_memory_e2e.py runs it on the
Kafka worker). Four records for two users are delivered together: each user's facts go
to their own memory set (Flink Agents' key is the user; here, the session), the second
of alice's favorite fruits updates the first (Mem0's LLM there; a scripted compaction
model here), and the records of one user do not hold back the other's.

Where Flink Agents' items (MemorySetItems) have ``created_at`` and ``updated_at``, an
Eddies item has the logical time of its last write (``at``) in its metadata, and keeps
its id when it is updated: the update is seen as the first add's id with the second
fact's text and time. Timestamps are the actions' ``ctx.now()`` (deterministic: the
input's time, moved on by each outcome read), where Flink Agents' read the wall clock.
"""

from __future__ import annotations

from typing import Any

from eddies import EmbeddedVectorStore, LocalRunner
from eddies.connectors.inspect.replay import replay
from eddies.events import CallKind, DurableCallRequest, OutputEvent
from tests.integration.agents import long_term_memory_agent

#: Flink Agents' python/flink_agents/e2e_tests/resources/long_term_memory_test/input.txt
RECORDS: list[dict[str, str]] = [
    {"name": "alice", "fact": "My favorite fruit is watermelon."},
    {"name": "bob", "fact": "I like swimming."},
    {"name": "bob", "fact": "I'm a vegetarian and allergic to nuts."},
    {"name": "alice", "fact": "My favorite fruit is bananas."},
]


def check_result(outputs: list[Any]) -> dict[str, dict[str, Any]]:
    """Flink Agents' check_result, on the agent's output values; the records by
    ``name.count``."""
    records = {f"{r['name']}.{r['count']}": r for r in outputs}
    assert sorted(records) == ["alice.1", "alice.2", "bob.1", "bob.2"], sorted(records)

    values = [item["value"] for item in records["alice.2"]["items"] or []]
    bob_values = [item["value"] for item in records["bob.2"]["items"] or []]
    assert bob_values, f"bob's memory set is empty (alice's set: {values})"
    bob_leaked = [v for v in bob_values if "watermelon" in v.lower() or "bananas" in v.lower()]
    assert not bob_leaked, f"bob's set contains alice's facts: {bob_values}"
    assert values, f"alice's memory set is empty (bob's set: {bob_values})"
    leaked = [v for v in values if "swimming" in v.lower() or "vegetarian" in v.lower()]
    assert not leaked, f"alice's set contains bob's facts: {values}"

    # The scripted compaction model decides as its policy says (Mem0's LLM may paraphrase,
    # or keep two items): bananas updates watermelon, bob's two facts are two items.
    assert values == ["My favorite fruit is bananas."]
    assert sorted(bob_values) == ["I like swimming.", "I'm a vegetarian and allergic to nuts."]
    # created before it was updated: the first add made the item, the second changed it
    # (same id), stamped with the time of that write.
    [item] = records["alice.2"]["items"]
    assert records["alice.1"]["ids"] == records["alice.2"]["ids"] == [item["id"]]
    assert item["metadata"] == {"key": "alice", "at": records["alice.2"]["timestamp_before_add"]}
    assert records["alice.1"]["timestamp_before_add"] < item["metadata"]["at"]
    assert all(isinstance(i["metadata"]["at"], int) for i in records["bob.2"]["items"])
    assert records["alice.1"]["items"] is None and records["bob.1"]["items"] is None

    # Flink Agents' "async add doesn't block process other key"
    assert records["alice.1"]["timestamp_before_add"] < records["bob.1"]["timestamp_after_add"]
    return records


def test_long_term_memory_of_two_users_delivered_together() -> None:
    store = EmbeddedVectorStore(embedding_model="emb")
    runner = LocalRunner(long_term_memory_agent(store))
    for record in RECORDS:  # delivered together: all queued before any is applied
        runner.submit(record["name"], record)
    runner.run_until_idle()
    outputs = [o.payload for o in runner.outputs if isinstance(o.payload, OutputEvent)]
    assert len(outputs) == 4 and all(o.error is None for o in outputs), outputs
    check_result([o.output for o in outputs])
    kept = sorted((d["metadata"]["key"], d["content"]) for d in store.get("memory.ltm.test_ltm"))
    assert kept == [("alice", "My favorite fruit is bananas."), ("bob", "I like swimming."),
                    ("bob", "I'm a vegetarian and allergic to nuts.")]

    # One user's add does not wait for the other's run: bob's first memory call was asked
    # before alice's first answer.
    order = [(e.session_id, type(e.payload).__name__) for e in runner.history if not e.scope and (
        isinstance(e.payload, OutputEvent) or (isinstance(e.payload, DurableCallRequest)
                                               and e.payload.kind is CallKind.VECTOR_STORE))]
    assert order.index(("bob", "DurableCallRequest")) < order.index(("alice", "OutputEvent"))

    # Each session replays from its history (calling nothing): the same events.
    for user in ("alice", "bob"):
        history = [(i, e) for i, e in enumerate(runner.history) if e.session_id == user]
        assert replay(runner.plan, history, user).ok
