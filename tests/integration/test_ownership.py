"""Partitions moving between live workers while calls run: the old owner finishes what it
started, the new owner waits for that outcome instead of running the call again or
calling it unknown, and calls queued on the old owner are dropped and run by the new one."""

from __future__ import annotations

import dataclasses
import time

import pytest

from eddies.connectors.kafka.worker import Worker
from eddies.connectors.runtime.client import producer, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.events import OutputEvent, partition_for
from tests.integration.sessions import sessions_on_every_partition
from tests.integration.test_worker import outputs

pytestmark = pytest.mark.integration


def _wait(predicate: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)
    assert predicate(), "timed out"  # type: ignore[operator]


def _start_two(settings: Settings, sessions: list[str], running: int) -> tuple[Worker, Worker]:
    """A owns every partition, ``running`` calls running (gated) and the others queued
    behind them; then B joins and takes some partitions. (Two workers, two slots.)"""
    from tests.agents import GATE, GATED_CALLS, Gated

    GATE.clear()
    GATED_CALLS.clear()
    settings.executor_concurrency = running
    first = Worker(dataclasses.replace(settings, instance_id="a"), Gated()).start()
    assert first.wait_assigned(60)
    prod = producer(settings)
    for i, sid in enumerate(sessions):
        send_input(settings, sid, i, prod=prod)
        prod.flush(30)
        if i == running - 1:  # these run; the others queue behind them
            _wait(lambda: sum(GATED_CALLS.values()) == running)
    _wait(lambda: first.counters.get("requests") == len(sessions))
    second = Worker(dataclasses.replace(settings, instance_id="b"), Gated()).start()
    a, b = first.orchestrator, second.orchestrator
    assert a is not None and b is not None
    _wait(lambda: b.partitions and not a.partitions & b.partitions
          and len(a.partitions | b.partitions) == settings.partitions)
    return first, second


def test_the_old_owner_finishes_a_running_call_and_the_new_owner_takes_its_outcome(
        settings: Settings) -> None:
    from tests.agents import GATE, GATED_CALLS

    settings.partitions = 2
    sessions = sessions_on_every_partition("g", 2, 3)
    began_ms = int(time.time() * 1000)
    # One call running on A per partition, the others queued behind them: whichever
    # partition moves, B finds a call A is running (and waits for it) and calls A has
    # queued (A drops them, B runs them).
    first, second = _start_two(settings, sessions, running=2)
    try:
        assert sorted(GATED_CALLS) == [0, 1]
        _wait(lambda: second.counters.get("calls_awaited") == 1)
        GATE.set()
        got = outputs(settings, len(sessions))
    finally:
        GATE.set()
        first.stop()
        second.stop()
    assert sorted(e.payload.output for e in got) == list(range(len(sessions)))  # type: ignore[attr-defined]
    for e in got:
        assert isinstance(e.payload, OutputEvent) and e.payload.error is None, e.payload
    assert {i: 1 for i in range(len(sessions))} == GATED_CALLS  # every call ran once
    assert first.counters.get("calls_dropped") == 2  # queued on A, moved to B
    assert second.counters.get("results_awaited") == 1  # B passed on A's outcome
    assert second.counters.get("results_unknown") == 0 and first.counters.get("results_unknown") == 0
    # Each claim read back knows when its call started (a new owner's wait counts from it).
    from eddies.connectors.journal.reading import read_journal
    from eddies.connectors.runtime.topics import TopicNames

    claims = read_journal(settings, TopicNames(settings.app).journal, {0, 1}).started.values()
    assert len(claims) == len(sessions)
    assert all(began_ms <= c.time_ms <= time.time() * 1000 for c in claims), list(claims)


def test_the_wait_for_another_workers_outcome_is_bounded(settings: Settings) -> None:
    """The call of the session that moves never finishes within outcome_wait_ms: the new
    owner answers UNKNOWN (the run fails closed), and still nothing runs twice."""
    from tests.agents import GATE, GATED_CALLS

    settings.partitions = 2
    settings.outcome_wait_ms = 1500
    sessions = sessions_on_every_partition("g", 2, 1)
    first, second = _start_two(settings, sessions, running=2)
    try:
        b = second.orchestrator
        assert b is not None
        [moved] = [i for i, sid in enumerate(sessions) if partition_for(sid, 2) in b.partitions]
        [unknown] = outputs(settings, 1, timeout=60)
        GATE.set()
        got = outputs(settings, 2, timeout=60)
    finally:
        GATE.set()
        first.stop()
        second.stop()
    assert unknown.session_id == sessions[moved]
    assert isinstance(unknown.payload, OutputEvent) and unknown.payload.error is not None
    assert unknown.payload.error.type == "DurableCallUnknownError"
    [kept] = [e for e in got if e.session_id != sessions[moved]]
    assert kept.payload.output == 1 - moved  # type: ignore[attr-defined]
    assert GATED_CALLS == {0: 1, 1: 1}  # never run twice, even after the wait ran out
    assert second.counters.get("calls_awaited") == 1 and second.counters.get("results_unknown") == 1
