"""Embedding models and vector stores in the Kafka worker: an action's add and query are
durable calls whose outcomes travel as Avro through the topics; the documents a query
found are in the session's history, so a replay from the topics returns them after the
store changed, and calls neither the store nor the embedding model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eddies.connectors.inspect.replay import load_history, replay
from eddies.connectors.runtime.client import send_input
from eddies.connectors.runtime.settings import Settings
from eddies.engine import AgentPlan
from eddies.events import CallKind, DurableCallResult
from tests.integration.workers import answers, start_worker, stop_worker, wait_until

pytestmark = pytest.mark.integration

DOCS = [{"content": "Hostels in Lisbon from 18 euros a night", "metadata": {"price": 18}},
        {"content": "A boutique hotel in Lisbon's Alfama", "metadata": {"price": 140}},
        {"content": "Guesthouses in Porto by the river", "metadata": {"price": 35}}]


def test_a_worker_adds_and_queries_and_a_replay_returns_what_it_found(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "store"
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.agents:librarian", log,
                          TEST_STORE_PATH=str(store))
    try:
        send_input(settings, "s1", json.dumps({"add": DOCS}))
        wait_until("the documents added", lambda: len(answers(settings)) == 1, worker, log, 90)
        send_input(settings, "s1", json.dumps({"ask": "a cheap bed in Lisbon",
                                                "filters": {"price": {"$lt": 100}}}))
        wait_until("the answer", lambda: len(answers(settings)) == 2, worker, log, 90)
    finally:
        stop_worker(worker)
    added, found = (a.payload.output for a in answers(settings))  # type: ignore[union-attr]
    assert len(added) == 3 and len(set(added)) == 3
    assert found == [DOCS[0]["content"], DOCS[2]["content"]]
    history = load_history(settings, "s1")
    kinds = [ev.payload.kind for _, ev in history if isinstance(ev.payload, DurableCallResult)]
    assert kinds == [CallKind.VECTOR_STORE, CallKind.VECTOR_STORE]

    # The store is gone; a replay from the topics still returns what the query found.
    shutil.rmtree(store)
    monkeypatch.setenv("TEST_STORE_PATH", str(tmp_path / "empty"))
    from tests.integration.agents import librarian

    report = replay(AgentPlan.compile(librarian()), history, "s1")
    assert report.ok
    assert not any((tmp_path / "empty").iterdir())  # nothing was written to or asked of it


def test_a_worker_killed_between_a_memory_write_and_its_outcome_writes_the_memory_once(
        settings: Settings, tmp_path: Path) -> None:
    from eddies import EmbeddedVectorStore

    store, mark, log = tmp_path / "store", tmp_path / "died", tmp_path / "worker.log"
    env = {"TEST_STORE_PATH": str(store), "TEST_DIE_MARK": str(mark)}
    first = start_worker(settings, "tests.integration.agents:rememberer", log, **env)
    try:
        send_input(settings, "s1", json.dumps({"user": "ana", "remember": ["Ana is vegetarian",
                                                                           "Ana likes tea"]}))
        first.wait(90)  # it wrote the memory, then was killed before the outcome
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == -9 and mark.exists()
    assert answers(settings) == []
    second = start_worker(settings, "tests.integration.agents:rememberer", log, **env)
    try:
        wait_until("the answer", lambda: answers(settings), second, log, 90)
    finally:
        stop_worker(second)
    [answer] = answers(settings)
    ids = answer.payload.output  # type: ignore[union-attr]
    assert len(ids) == 2
    kept = EmbeddedVectorStore(embedding_model="emb", path=store).get("memory.rememberer.facts")
    assert sorted(d["id"] for d in kept) == sorted(ids)  # once: the second write replaced the first
    writes = (store / "memory.rememberer.facts.jsonl").read_text().splitlines()
    assert len(writes) == 2 and all(json.loads(w)["ids"] == ids for w in writes)
