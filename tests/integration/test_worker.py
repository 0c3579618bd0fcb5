"""The Kafka worker end to end on a real broker."""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from eddies.connectors.inspect.replay import load_history, replay
from eddies.connectors.kafka.worker import Worker
from eddies.connectors.runtime.client import producer, read_events, read_records, send_input
from eddies.connectors.runtime.outbox import DeliveryFailedError, Outbox
from eddies.connectors.runtime.records import DLQ_REASON_HEADER, DLQ_SOURCE_HEADER, HEADERS, header
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicError, TopicNames, ensure_topics
from eddies.demo import PROMPTS, calculator_agent
from eddies.events import AgentEvent, CustomEvent, InputEvent, OutputEvent, encode

pytestmark = pytest.mark.integration


def answers_to_prompts(settings: Settings, *workers: Worker) -> list[AgentEvent]:
    """Send the demo's prompts to running ``workers``, then stop them; their outputs."""
    try:
        assert all(w.wait_assigned(60) for w in workers)
        prod = producer(settings)
        for session, prompt in PROMPTS:
            send_input(settings, session, prompt, prod=prod)
        prod.flush(30)
        return outputs(settings, len(PROMPTS))
    finally:
        for w in workers:
            w.stop()


def outputs(settings: Settings, n: int, timeout: float = 60.0) -> list[AgentEvent]:
    """The first ``n`` distinct outputs (by event id), waiting up to ``timeout``."""
    seen: dict[str, AgentEvent] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < n and time.monotonic() < deadline:
        for ev in read_events(settings, TopicNames(settings.app).output):
            seen.setdefault(ev.event_id, ev)
        if len(seen) < n:
            time.sleep(0.2)
    return list(seen.values())


@pytest.mark.parametrize("exactly_once", [False, True], ids=["idempotent", "transactions"])
def test_demo_scenario_end_to_end(settings: Settings, exactly_once: bool) -> None:
    settings.exactly_once = exactly_once
    worker = Worker(settings, calculator_agent()).start()
    got = answers_to_prompts(settings, worker)
    by_session = defaultdict(list)
    for ev in got:
        assert isinstance(ev.payload, OutputEvent) and ev.payload.error is None
        by_session[ev.session_id].append((ev.run, ev.payload.output))
    assert by_session == {
        "alice": [(1, "The result is 5."), (2, "The result is 15.")],
        "bob": [(1, "The result is 42.")],
    }
    report = replay(worker.plan, load_history(settings, "alice"), "alice")
    assert report.ok and len(report.steps) == 24
    # Role "all": the in-process executor got the requests in memory, not through the topic.
    assert worker.counters.get("calls_performed") == 3 * len(PROMPTS)
    assert not list(read_records(settings, TopicNames(settings.app).requests))
    # Results were applied at their delivery report, not after a fetch brought them back
    # (local_results.py); never under transactions, whose results are not visible until
    # the transaction commits. Each applied once: the answers above are exactly these.
    applied_early = worker.counters.get("results_applied_on_delivery")
    assert applied_early == 0 if exactly_once else applied_early > 0


def test_separate_orchestrator_and_executor_roles(settings: Settings) -> None:
    """Requests travel through APP.requests when the executor is another worker."""
    orchestrator = Worker(dataclasses.replace(settings, role="orchestrator"), calculator_agent()).start()
    executor = Worker(dataclasses.replace(settings, role="executor"), calculator_agent()).start()
    got = answers_to_prompts(settings, orchestrator, executor)
    assert sorted(ev.payload.output for ev in got) == [  # type: ignore[attr-defined]
        "The result is 15.", "The result is 42.", "The result is 5."]
    assert orchestrator.executor is None and executor.orchestrator is None
    assert executor.counters.get("calls_performed") == 3 * len(PROMPTS)  # model, tool, model
    requests = list(read_records(settings, TopicNames(settings.app).requests))
    assert len(requests) == 3 * len(PROMPTS)


def test_bad_records_go_to_the_dlq_and_good_sessions_complete(settings: Settings) -> None:
    names = TopicNames(settings.app)
    settings.max_record_bytes = 2000
    worker = Worker(settings, calculator_agent()).start()
    try:
        assert worker.wait_assigned(60)
        prod = producer(settings)
        prod.produce(names.input, b"\x00\xffgarbage", b"s-bad")
        prod.produce(names.input, encode(AgentEvent.external("s-nokey", InputEvent("x"), event_id="",
                                                             timestamp=1)), None)
        prod.produce(names.input, encode(AgentEvent.external("s-other", InputEvent("x"), event_id="",
                                                             timestamp=1)), b"s-mismatch")
        prod.produce(names.input, encode(AgentEvent.external("s-wrong", CustomEvent("Nope", {}),
                                                             event_id="", timestamp=1)), b"s-wrong")
        big = AgentEvent.external("s-big", InputEvent("x" * 3000), event_id="", timestamp=1)
        prod.produce(names.input, encode(big), b"s-big")
        stranger = AgentEvent.external("s-agent", InputEvent("x"), event_id="", timestamp=1)
        stranger.agent = "someone-else"
        prod.produce(names.input, encode(stranger), b"s-agent")
        send_input(settings, "good", '{"a": 1, "b": 1}', prod=prod)
        prod.flush(30)
        got = outputs(settings, 1)
        assert [e.payload.output for e in got] == ["The result is 2."]  # type: ignore[attr-defined]
        dead: list[Any] = []
        deadline = time.monotonic() + 30
        while len(dead) < 6 and time.monotonic() < deadline:
            dead = list(read_records(settings, names.dlq))
    finally:
        worker.stop()
    reasons = sorted((header(m.headers(), DLQ_REASON_HEADER) or b"").decode() for m in dead)
    assert len(reasons) == 6, reasons
    assert any("exceeds max_record_bytes=2000" in r for r in reasons)
    assert any("unknown agent 'someone-else'" in r for r in reasons)
    assert any("undecodable" in r for r in reasons)
    assert any("no key" in r for r in reasons)
    assert any("differs from the event's session_id" in r for r in reasons)
    assert any("is not accepted" in r for r in reasons)
    for m in dead:
        assert (header(m.headers(), DLQ_SOURCE_HEADER) or b"").startswith(names.input.encode())
    assert worker.counters.get("dlq") == 6


def test_two_workers_share_sessions_and_keep_each_sessions_order(settings: Settings) -> None:
    agent = calculator_agent()
    first = Worker(settings, agent).start()
    second = Worker(settings, agent).start()
    try:
        assert first.wait_assigned(60) and second.wait_assigned(60)
        deadline = time.monotonic() + 30  # wait until the group has settled on both members
        while time.monotonic() < deadline:
            a, b = first.orchestrator.partitions, second.orchestrator.partitions  # type: ignore[union-attr]
            if a and b and not a & b and len(a | b) == settings.partitions:
                break
            time.sleep(0.2)
        prod = producer(settings)
        sessions = [f"user-{i}" for i in range(8)]
        for k in range(3):
            for s in sessions:
                send_input(settings, s, f'{{"a": {k}, "b": 100}}', prod=prod)
        prod.flush(30)
        got = outputs(settings, 24)
    finally:
        first.stop()
        second.stop()
    assert first.counters.get("inputs") > 0 and second.counters.get("inputs") > 0
    per_session: dict[str, list[Any]] = defaultdict(list)
    for ev in got:
        per_session[ev.session_id].append((ev.run, ev.payload.output))  # type: ignore[attr-defined]
    assert set(per_session) == set(sessions)
    for s in sessions:  # read in offset order: runs and answers come in input order
        assert per_session[s] == [(k + 1, f"The result is {k + 100}.") for k in range(3)]


def test_topics_with_another_partition_count_are_refused(settings: Settings) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(settings.client_config())
    names = TopicNames(settings.app)
    assert set(ensure_topics(admin, names, 4)) == set(names.all())
    assert ensure_topics(admin, names, 4) == []
    with pytest.raises(TopicError, match=f"{names.input} has 4 partitions, expected 8"):
        ensure_topics(admin, names, 8)


@pytest.mark.parametrize("exactly_once", [False, True], ids=["idempotent", "transactions"])
def test_a_record_that_is_not_delivered_stops_the_commit(settings: Settings, exactly_once: bool) -> None:
    """Offsets are never committed past work whose output was lost: the commit raises."""
    settings.exactly_once = exactly_once
    settings.kafka["message.timeout.ms"] = "2000"
    names = TopicNames(settings.app)
    ensure_topics(AdminClient({"bootstrap.servers": settings.bootstrap_servers}), names,
                  settings.partitions)
    outbox = Outbox(settings, "orchestrator")
    outbox.produce(names.output, b"fine", b"s1")
    if exactly_once:  # a transactional producer refuses it at once: the role stops there
        with pytest.raises(KafkaException, match="Unknown partition"):
            outbox.produce(names.output, b"lost", b"s1", partition=settings.partitions + 3)
        return
    outbox.produce(names.output, b"lost", b"s1", partition=settings.partitions + 3)
    with pytest.raises(DeliveryFailedError, match=r"not delivered.*Unknown partition"):
        outbox.commit(None)


def test_offset_gaps_in_the_input_are_read_again_once(settings: Settings) -> None:
    """Inputs from a transactional producer leave a commit marker after each record: on the
    embedded broker (which can hide a record behind a gap) the worker re-reads once from
    every gap it sees, elsewhere it does not; either way it answers every input once."""
    from confluent_kafka import Producer

    worker = Worker(settings, calculator_agent()).start()
    try:
        assert worker.wait_assigned(60)
        names = TopicNames(settings.app)
        prod = Producer({"bootstrap.servers": settings.bootstrap_servers,
                         "partitioner": "murmur2_random",
                         "transactional.id": f"{settings.app}-test-producer"})
        prod.init_transactions(30)
        sessions = [f"g{i}" for i in range(4)]
        for round_ in range(2):
            for sid in sessions:
                prod.begin_transaction()
                prod.produce(names.input, encode(AgentEvent.external(
                    sid, InputEvent(f'{{"a": {round_}, "b": 1}}'), event_id=f"{sid}-{round_}",
                    timestamp=1)), sid.encode(), headers=HEADERS)
                prod.commit_transaction(30)
        got = outputs(settings, 2 * len(sessions))
    finally:
        worker.stop()
    answers = sorted((ev.session_id, ev.run, ev.payload.output) for ev in got)  # type: ignore[attr-defined]
    assert answers == sorted((sid, r + 1, f"The result is {r + 1}.") for sid in sessions for r in range(2))
    if worker.membership.embedded:
        assert worker.counters.get("input_gaps") > 0
    else:  # Apache Kafka skips no records: a gap is a marker (or compaction), not re-read
        assert worker.counters.get("input_gaps") == 0


def _committed_input_offset(settings: Settings, session: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    from eddies.events import partition_for

    c = Consumer(settings.client_config(**{"group.id": f"{settings.app}.orchestrator"}))
    try:
        tp = TopicPartition(TopicNames(settings.app).input, partition_for(session, settings.partitions))
        return int(c.committed([tp], timeout=10)[0].offset)
    finally:
        c.close()


def _snapshots_of(settings: Settings, session: str) -> int:
    return sum(1 for m in read_records(settings, TopicNames(settings.app).journal)
               if m.key().startswith(b"snap") and m.key().partition(b"/")[2] == session.encode())


@pytest.mark.parametrize("delay_ms", [60_000, 300])
def test_a_run_in_its_middle_holds_the_committed_offset_until_snapshotted(
        settings: Settings, delay_ms: int) -> None:
    """A session waiting on a call is snapshotted when its run ends (or after
    snapshot_delay_ms); until then its input partition's committed offset stays at its input."""
    from tests.agents import GATE, Gated

    settings.snapshot_delay_ms = delay_ms
    GATE.clear()
    worker = Worker(settings, Gated()).start()
    try:
        assert worker.wait_assigned(60)
        send_input(settings, "held", 7)
        deadline = time.monotonic() + 30
        while worker.counters.get("requests") < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # ten commit intervals with the call still running
        first = next(m for m in read_records(settings, TopicNames(settings.app).input)
                     if m.key() == b"held")
        if delay_ms > 1000:
            assert _snapshots_of(settings, "held") == 0
            assert _committed_input_offset(settings, "held") <= first.offset()
        else:  # unsaved for longer than the delay: snapshotted in the middle of its run
            assert _snapshots_of(settings, "held") == 1
            assert _committed_input_offset(settings, "held") > first.offset()
        GATE.set()
        got = outputs(settings, 1)
        assert [ev.payload.output for ev in got] == [7]  # type: ignore[attr-defined]
        deadline = time.monotonic() + 10
        while _committed_input_offset(settings, "held") <= first.offset() + 1 and time.monotonic() < deadline:
            time.sleep(0.1)  # past the input and the result once the run's end is snapshotted
        assert _committed_input_offset(settings, "held") > first.offset() + 1
        assert _snapshots_of(settings, "held") == (1 if delay_ms > 1000 else 2)
    finally:
        GATE.set()
        worker.stop()


def test_input_pauses_while_the_local_executor_has_too_many_unfinished_calls(settings: Settings) -> None:
    """Requests waiting for the in-process executor are held in memory: past
    executor_concurrency * 64 unfinished calls the worker stops reading input until calls
    finish, and then completes everything."""
    from tests.agents import GATE, Gated

    settings.executor_concurrency = 1  # at most 64 unfinished calls
    settings.batch_size = 8
    GATE.clear()
    worker = Worker(settings, Gated()).start()
    try:
        assert worker.wait_assigned(60)
        prod = producer(settings)
        for i in range(120):
            send_input(settings, f"p{i}", i, prod=prod)
        prod.flush(30)
        deadline = time.monotonic() + 30
        while worker.counters.get("input_pauses") < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # paused: no more requests while the gate is shut
        held = worker.counters.get("requests")
        assert worker.counters.get("input_pauses") >= 1
        assert 64 <= held < 64 + 4 * settings.batch_size, held
        GATE.set()
        got = outputs(settings, 120)
        assert sorted(ev.payload.output for ev in got) == list(range(120))  # type: ignore[attr-defined]
    finally:
        GATE.set()
        worker.stop()
