"""Embedding models and vector stores in the Kafka worker, on the embedded store and on a
real Postgres server with pgvector: an action's add and query are durable calls whose
outcomes travel as Avro through the topics; the documents a query found are in the
session's history, so a replay from the topics returns them after the store changed, and
calls neither the store nor the embedding model; a write interrupted by a SIGKILL is
made again, once."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from eddies.connectors.inspect.replay import load_history, replay
from eddies.connectors.runtime.client import send_input
from eddies.connectors.runtime.settings import Settings
from eddies.engine import AgentPlan
from eddies.events import CallKind, DurableCallResult
from tests.integration.workers import answers, start_worker, stop_worker, wait_until

pytestmark = pytest.mark.integration

@pytest.fixture(params=["embedded", "pgvector"])
def store_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The environment that gives the test agents (tests/integration/agents.py test_store)
    the store under test."""
    env = {"TEST_STORE_PATH": str(tmp_path / "store")}
    if request.param == "pgvector":
        env |= {"TEST_STORE_DSN": request.getfixturevalue("postgres_dsn"),
                "TEST_STORE_PREFIX": f"t{uuid.uuid4().hex[:8]}_"}
    return env


def _store(env: dict[str, str], collection: str) -> Any:
    from eddies import EmbeddedVectorStore, PgVectorStore

    if "TEST_STORE_DSN" in env:
        return PgVectorStore(embedding_model="emb", collection=collection,
                             dsn=env["TEST_STORE_DSN"], table_prefix=env["TEST_STORE_PREFIX"])
    return EmbeddedVectorStore(embedding_model="emb", collection=collection,
                               path=env["TEST_STORE_PATH"])


DOCS = [{"content": "Hostels in Lisbon from 18 euros a night", "metadata": {"price": 18}},
        {"content": "A boutique hotel in Lisbon's Alfama", "metadata": {"price": 140}},
        {"content": "Guesthouses in Porto by the river", "metadata": {"price": 35}}]


def test_a_worker_adds_and_queries_and_a_replay_returns_what_it_found(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        store_env: dict[str, str]) -> None:
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.agents:librarian", log, **store_env)
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

    # The store is gone; a replay from the topics still returns what the query found, and
    # asks nothing of a store: the embedded one's folder stays empty, and the Postgres
    # one's server is a port nothing listens on.
    store = _store(store_env, "travel")
    assert store.count() == 3
    if "TEST_STORE_DSN" in store_env:
        store.delete_collection("travel")
        store.close()
        monkeypatch.setenv("TEST_STORE_DSN", "postgresql://eddies@127.0.0.1:9/nowhere")
        monkeypatch.setenv("TEST_STORE_PREFIX", store_env["TEST_STORE_PREFIX"])
    shutil.rmtree(store_env["TEST_STORE_PATH"], ignore_errors=True)
    monkeypatch.setenv("TEST_STORE_PATH", str(tmp_path / "empty"))
    from tests.integration.agents import librarian

    report = replay(AgentPlan.compile(librarian()), history, "s1")
    assert report.ok
    assert not (tmp_path / "empty").exists() or not any((tmp_path / "empty").iterdir())


def test_a_worker_killed_between_a_memory_write_and_its_outcome_writes_the_memory_once(
        settings: Settings, tmp_path: Path, store_env: dict[str, str]) -> None:
    mark, log = tmp_path / "died", tmp_path / "worker.log"
    env = {**store_env, "TEST_DIE_MARK": str(mark)}
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
    kept = _store(env, "default").get("memory.rememberer.facts")
    assert sorted(d["id"] for d in kept) == sorted(ids)  # once: the second write replaced the first
    assert sorted(d["content"] for d in kept) == ["Ana is vegetarian", "Ana likes tea"]
    if "TEST_STORE_DSN" not in env:  # its file shows both writes, of the same ids
        writes = (Path(env["TEST_STORE_PATH"]) / "memory.rememberer.facts.jsonl").read_text()
        assert len(writes.splitlines()) == 2
        assert all(json.loads(w)["ids"] == ids for w in writes.splitlines())
