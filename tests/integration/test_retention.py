"""The journal does not grow without bound: finished runs' call records and idle sessions'
snapshots get tombstones; a restarted worker still finds what it needs."""

from __future__ import annotations

import time

import pytest

from eddies.connectors.journal.reading import read_journal
from eddies.connectors.kafka.worker import Worker
from eddies.connectors.runtime.client import producer, read_events, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.demo import calculator_agent

pytestmark = pytest.mark.integration


def _answers(settings: Settings, n: int) -> int:
    deadline = time.monotonic() + 60
    seen: set[str] = set()
    while len(seen) < n and time.monotonic() < deadline:
        seen = {e.event_id for e in read_events(settings, TopicNames(settings.app).output)}
        time.sleep(0.2)
    return len(seen)


def test_finished_runs_and_idle_sessions_are_tombstoned(settings: Settings) -> None:
    settings.journal_retention_ms = 1500  # tombstone soon after a run finishes
    settings.session_ttl_ms = 20_000  # far beyond the first phase; sweeps every 2 s
    names = TopicNames(settings.app)
    worker = Worker(settings, calculator_agent()).start()
    try:
        assert worker.wait_assigned(60)
        prod = producer(settings)
        for s in ("a", "b", "c"):
            send_input(settings, s, '{"a": 1, "b": 2}', prod=prod)
        prod.flush(30)
        assert _answers(settings, 3) == 3
        deadline = time.monotonic() + 30
        while worker.counters.get("tombstones") < 3 * 3 * 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        view = read_journal(settings, names.journal, set(range(settings.partitions)))
        assert view.outcomes == {} and view.started == {}  # 3 calls per run, all gone
        assert set(view.snapshots) == {"a", "b", "c"}  # sessions are still open
        # Now let them age past the TTL (their logical clock is the input's timestamp).
        for st in worker.orchestrator.states.values():  # type: ignore[union-attr]
            st.clock -= 60_000
        deadline = time.monotonic() + 30
        while worker.counters.get("sessions_closed") < 3 and time.monotonic() < deadline:
            send_input(settings, "d", '{"a": 0, "b": 0}')  # keeps commits happening
            time.sleep(0.5)
    finally:
        worker.stop()
    view = read_journal(settings, names.journal, set(range(settings.partitions)))
    assert not {"a", "b", "c"} & set(view.snapshots)
