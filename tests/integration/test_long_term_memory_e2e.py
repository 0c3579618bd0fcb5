"""Flink Agents' long-term memory end-to-end test (its
python/flink_agents/e2e_tests/e2e_tests_integration/long_term_memory_test.py) on the Kafka
worker: four records for two users produced together to APP.input, each user's facts in
their own memory set of the store (the embedded one in a folder, or Postgres with
pgvector), alice's second favorite fruit updating her first through the compaction model;
the answers checked as the in-process port checks them
(tests/unit/connectors/test_long_term_memory_e2e.py), and the store holding what they
say."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from eddies.connectors.runtime.client import input_event, producer, send_event
from eddies.connectors.runtime.settings import Settings
from tests.integration.workers import answers, start_worker, stop_worker, wait_until
from tests.unit.connectors.test_long_term_memory_e2e import RECORDS, check_result

pytestmark = pytest.mark.integration


@pytest.fixture(params=["embedded", "pgvector"])
def store_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The environment that gives the worker's agent (tests/integration/agents.py
    test_store) the store under test."""
    env = {"TEST_STORE_PATH": str(tmp_path / "store")}
    if request.param == "pgvector":
        env |= {"TEST_STORE_DSN": request.getfixturevalue("postgres_dsn"),
                "TEST_STORE_PREFIX": f"t{uuid.uuid4().hex[:8]}_"}
    return env


def _store(env: dict[str, str]) -> Any:
    """The store under test, as the worker's agent has it (tests/integration/agents.py
    test_store); connected."""
    from eddies import EmbeddedVectorStore, PgVectorStore

    store: Any
    if "TEST_STORE_DSN" in env:
        store = PgVectorStore(embedding_model="emb", collection="context", dsn=env["TEST_STORE_DSN"],
                              table_prefix=env["TEST_STORE_PREFIX"])
    else:
        store = EmbeddedVectorStore(embedding_model="emb", collection="context",
                                    path=env["TEST_STORE_PATH"])
    store.collections()
    return store


def _kept(env: dict[str, str]) -> list[tuple[str, str]]:
    """(key, text) of each item of the agent's memory set in the store under test, sorted."""
    store = _store(env)
    items = store.get("memory.ltm.test_ltm")
    if "TEST_STORE_DSN" in env:
        store.close()
    return sorted((d["metadata"]["key"], d["content"]) for d in items)


def test_long_term_memory_of_two_users_delivered_together(
        settings: Settings, tmp_path: Path, store_env: dict[str, str]) -> None:
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.agents:long_term_memory_agent", log,
                          option="--agent", args=(), **store_env)
    try:
        prod = producer(settings)
        start = int(time.time() * 1000)
        for n, record in enumerate(RECORDS):  # one after another, as the lines of a file
            send_event(settings, input_event(record["name"], record, f"ltm-{n}", timestamp=start + n),
                       f"record {n}", prod)
        assert prod.flush(30) == 0
        wait_until("four answers", lambda: len(answers(settings)) == 4, worker, log, 120)
    finally:
        stop_worker(worker)
    outputs = [a.payload for a in answers(settings)]
    assert all(o.error is None for o in outputs), [f"{o.error.type}: {o.error.message}"
                                                   for o in outputs if o.error is not None]
    records = check_result([o.output for o in outputs])
    assert records["alice.1"]["timestamp_before_add"] == start  # the time of alice's first record
    assert _kept(store_env) == [("alice", "My favorite fruit is bananas."), ("bob", "I like swimming."),
                                ("bob", "I'm a vegetarian and allergic to nuts.")]
