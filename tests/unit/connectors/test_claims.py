"""The pure parts of claiming calls: who a started mark names, which mark came first, when
a reader reads a partition again, and what a watched call's UNKNOWN leaves in the journal."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from eddies.connectors.execution.calls import result_event
from eddies.connectors.journal.claims import Claim, Claimant
from eddies.connectors.journal.reading import JournalView
from eddies.connectors.kafka.claiming import (
    DECIDE_READ_TIMEOUT,
    OUTCOME_MARGIN_S,
    CallClaims,
    outcome_wait_left,
)
from eddies.connectors.kafka.journal_tail import JournalTail
from eddies.connectors.kafka.liveness import Liveness
from eddies.connectors.kafka.stalls import StallGate, StallWatch
from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.membership import TANSU_CLUSTER_ID, Membership
from eddies.connectors.runtime.positions import Positions
from eddies.connectors.runtime.records import journal_partition, outcome_key, started_key
from eddies.connectors.runtime.settings import load_settings
from eddies.events import AgentEvent, CallKind, CallStatus, DurableCallRequest, decode, encode


def test_a_mark_names_its_claimant_and_an_earlier_process_of_my_slot_is_dead() -> None:
    me = Claimant("slot-1", "aaaa")
    assert Claimant.parse(me.token) == me
    assert Claimant("slot-1", "bbbb").is_dead_to(me)
    assert not me.is_dead_to(me)  # my own mark: I am alive
    assert not Claimant("slot-2", "aaaa").is_dead_to(me)  # another slot may be alive
    assert Claimant.parse(b"1") == Claimant("", "")  # a mark of an older version names nobody
    assert not Claimant.parse(b"1").is_dead_to(Claimant("", "x"))
    assert Claimant.parse(b"host-7|x|y") == Claimant("host-7|x", "y")


def test_the_first_mark_of_a_call_wins_and_tombstones_clear_it() -> None:
    view = JournalView()
    ref = ("s:r1:i1:c0", 1)
    view.apply(started_key(*ref), b"a|1", 10)
    view.apply(started_key(*ref), b"b|2", 12)
    assert view.started[ref] == Claim(b"a|1", 10)
    assert view.apply(outcome_key(*ref), b"result", 13) == ref
    assert view.outcomes[ref] == b"result"
    view.apply(started_key(*ref), None, 20)
    view.apply(outcome_key(*ref), None, 21)
    assert ref not in view.started and ref not in view.outcomes


def test_a_claim_keeps_when_its_call_started() -> None:
    view = JournalView()
    ref = ("s:r1:i1:c0", 1)
    view.apply(started_key(*ref), b"a|1", 10, time_ms=1_700_000_000_000)
    view.apply(started_key(*ref), b"b|2", 12, time_ms=1_700_000_009_000)  # lost: not the start
    assert view.started[ref] == Claim(b"a|1", 10, 1_700_000_000_000)


def test_another_workers_call_is_waited_for_from_its_start_not_from_each_hand_over() -> None:
    start_ms = 1_700_000_000_000
    at = start_ms / 1000
    # A new owner 10 s after the start waits the rest of the 60 s; the next one, after
    # 40 s, only what is left then: the wait does not begin again at every hand-over.
    assert outcome_wait_left(60, start_ms, at + 10) == 50
    assert outcome_wait_left(60, start_ms, at + 40) == 20
    # Past the wait: the margin, for an outcome on its way (and clocks a little apart).
    assert outcome_wait_left(60, start_ms, at + 300) == OUTCOME_MARGIN_S
    # A claimant whose clock runs ahead cannot make it longer; no record time: all of it.
    assert outcome_wait_left(60, start_ms, at - 30) == 60
    assert outcome_wait_left(60, 0, at) == 60
    assert outcome_wait_left(1.5, start_ms, at + 300) == 1.5  # a wait shorter than the margin


def test_the_executor_waits_from_the_claims_start() -> None:
    executor: Any = SimpleNamespace(settings=SimpleNamespace(outcome_wait_ms=60_000))
    started_ms = int((time.time() - 50) * 1000)  # its claimant started it 50 s ago
    for req, left in [(DurableCallRequest("s:r1:i1:c0", CallKind.TOOL, "add"), 10),
                      (DurableCallRequest("s:r1:i1:c1", CallKind.TOOL, "add", timeout_ms=80_000), 35)]:
        deadline = CallClaims._deadline(executor, req, Claim(b"a|1", 3, started_ms))
        assert left - 1 <= deadline - time.monotonic() <= left + 0.5, req.call_id


def test_learning_calls_keeps_the_earliest_claim() -> None:
    ref = ("s:r1:i1:c0", 1)
    later, earlier = JournalView(), JournalView()
    later.apply(started_key(*ref), b"b|2", 30)
    earlier.apply(started_key(*ref), b"a|1", 5)
    later.learn_calls(earlier)
    assert later.started[ref].offset == 5
    earlier.learn_calls(JournalView(started={ref: Claim(b"c|3", 40)}))
    assert earlier.started[ref].offset == 5


def test_a_gap_is_read_again_once_and_not_at_all_when_switched_off() -> None:
    positions = Positions(reread_gaps=True)
    assert positions.gap(0, 5) is None  # the first record sets the position
    positions.advance(0, 5)
    assert positions.gap(0, 6) is None
    positions.advance(0, 6)
    assert positions.gap(0, 9) == 7  # 7 and 8 skipped: read again from 7
    assert positions.gap(0, 9) is None  # once: a lasting gap (a transaction marker) is accepted
    positions.advance(0, 9)
    assert positions.gap_at_end(0, 12) == 10  # the end is past what was read
    assert positions.gap_at_end(1, 12) is None  # a partition never read has no gap
    positions.forget(0)
    assert positions.gap(0, 100) is None
    off = Positions(reread_gaps=False)
    off.advance(0, 1)
    assert off.gap(0, 5) is None


def test_membership_suits_the_broker() -> None:
    def on(cluster: str, **kw: str | int) -> Membership:
        return Membership.for_broker(load_settings(env={}, overrides=kw), cluster)

    # Static membership needs an instance id, and is off on the embedded broker unless forced.
    assert not on("kafka-cluster").static
    assert on("kafka-cluster", instance_id="w1").static
    assert not on(TANSU_CLUSTER_ID, instance_id="w1").static
    assert on(TANSU_CLUSTER_ID, instance_id="w1", static_membership="true").static
    assert not on("kafka-cluster", instance_id="w1", static_membership="false").static
    # Session timeouts: Apache Kafka's minimum by default, the fast one on the embedded broker.
    assert (on("kafka-cluster").session_timeout_ms, on("kafka-cluster").heartbeat_ms) == (6000, 500)
    assert (on(TANSU_CLUSTER_ID).session_timeout_ms, on(TANSU_CLUSTER_ID).heartbeat_ms) == (1500, 214)
    assert on(TANSU_CLUSTER_ID, session_timeout_ms=10_000).session_timeout_ms == 10_000


def test_skipped_offsets_are_re_read_only_on_the_embedded_broker_without_transactions() -> None:
    plain, transactional = load_settings(env={}), load_settings(env={}, overrides={"exactly_once": True})
    embedded = Membership.for_broker(plain, TANSU_CLUSTER_ID)
    kafka = Membership.for_broker(plain, "kafka-cluster")
    assert embedded.reread_gaps(plain)
    assert not embedded.reread_gaps(transactional)  # markers leave gaps all the time
    assert not kafka.reread_gaps(plain)  # a compacted journal is full of legitimate holes


class _Sink:
    """A producer that keeps what it is given: (topic, value, key)."""

    transactional = False

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes | None, bytes | None]] = []

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                **_kw: Any) -> None:
        self.records.append((topic, value, key))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = 0) -> int:
        return 0


def test_a_call_answered_unknown_after_its_wait_is_answered_from_the_journal_when_asked_again() -> None:
    """Another worker's call, its wait over, is answered UNKNOWN; the next owner of its
    session (restored from a snapshot taken before that answer was applied) issues the
    request again: it is answered from the journal at once, not watched and answered
    UNKNOWN a second time (a kill -9 campaign saw the same executor answer twice)."""
    ex, request = _watching_executor(claimant_started_s_ago=120)
    ex.claims.answer_watched(time.monotonic() + OUTCOME_MARGIN_S + 1)  # its wait is over
    assert ex.answers == []  # UNKNOWN journaled; the answer is the first outcome read back
    # The tail reads back what this worker journaled: the first outcome, so the answer.
    _read_back(ex.tail, ex.producer.records, ex.names.journal, start=4)
    ex.claims.answer_watched(time.monotonic())
    assert [a.payload.status for a in ex.answers] == [CallStatus.UNKNOWN]
    # The request comes again.
    with ex.tail.lock:
        verdict, recorded = ex.claims.verdict(request, 0, 8)
    assert verdict == "outcome"  # answered at once, as the first time
    assert recorded is not None and decode(recorded).payload.status is CallStatus.UNKNOWN  # type: ignore[union-attr]


def _read_back(tail: JournalTail, records: list[tuple[str, bytes | None, bytes | None]],
               topic: str, start: int, partition: int = 0) -> None:
    """The journal tail reads ``records`` of ``topic`` (as its consumer hands them over)."""
    from eddies.connectors.kafka.memory_broker import Record

    for offset, (t, value, key) in enumerate([r for r in records if r[0] == topic and r[2]],
                                             start=start):
        with tail.lock:
            tail._fold(Record(t, partition, offset, key, value), partition)


def _watching_executor(claimant_started_s_ago: float) -> tuple[Any, AgentEvent]:
    """An executor of slot e-f3 watching call s:r1:i1:c0, started by e-f2 long enough ago
    that its wait is over."""
    class Executor:
        def __init__(self) -> None:
            self.settings: Any = SimpleNamespace(outcome_wait_ms=60_000, partitions=6)
            self.names: Any = SimpleNamespace(journal="app.journal", input="app.input")
            self.counters = Counters()
            self.tail = JournalTail(self.settings, self.names.journal)
            self.producer: Any = _Sink()
            self.answers: list[AgentEvent] = []
            self.claims = CallClaims(
                settings=self.settings, names=self.names, counters=self.counters, tail=self.tail,
                claimant=Claimant("e-f3", "41a5"), gate=StallGate(StallWatch(10.0)),
                liveness=Liveness(None), marks=None, producer=self.producer,
                owns=lambda jpart: True, send_result=self._send_result, answer=self._answer)
            self.claims._last_sweep = 0.0

        def _send_result(self, result: AgentEvent, data: bytes | None = None) -> None:
            self.answers.append(result)

        def _answer(self, result: AgentEvent, part: int | None, offset: int,
                    data: bytes | None = None) -> None:
            self._send_result(result, data)

    ex = Executor()
    ref = ("s:r1:i1:c0", 1)
    request = AgentEvent.external("s", DurableCallRequest(ref[0], CallKind.TOOL, "book"),
                                  event_id="req-1", timestamp=0)
    ex.tail.view.started[ref] = Claim(b"e-f2|8ce8", 3,
                                      int((time.time() - claimant_started_s_ago) * 1000))
    with ex.tail.lock:
        assert ex.claims.verdict(request, 0, 7)[0] == "watched"
    return ex, request


def test_a_claimant_that_journals_its_outcome_as_its_watcher_gives_up_decides_the_call() -> None:
    """A paused claimant comes back and journals OK in the very instant its watcher
    journals UNKNOWN (a kill -9 campaign: the claimant's OK a millisecond first, 8 calls at
    once, one of their sessions applying the UNKNOWN): the watcher answers with the first
    outcome in the journal, the claimant's, so every reader of the call sees one outcome."""
    ex, request = _watching_executor(claimant_started_s_ago=120)
    ex.claims.answer_watched(time.monotonic() + OUTCOME_MARGIN_S + 1)  # its wait is over
    journaled = [r for r in ex.producer.records if r[0] == ex.names.journal]
    assert len(journaled) == 1 and decode(journaled[0][1]).payload.status is CallStatus.UNKNOWN  # type: ignore[union-attr,arg-type]
    assert ex.answers == []
    # The claimant's OK reached the journal first; then the watcher's UNKNOWN.
    ok = encode(result_event(request, CallStatus.OK, '"booked"'))
    _read_back(ex.tail, [(ex.names.journal, ok, journaled[0][2]), *journaled], ex.names.journal,
               start=10)
    ex.claims.answer_watched(time.monotonic())
    assert [a.payload.status for a in ex.answers] == [CallStatus.OK]  # type: ignore[union-attr]
    assert ex.answers[0].payload.value == '"booked"'  # type: ignore[union-attr]
    assert ex.tail.view.later_outcomes == 1  # the UNKNOWN: a later outcome, not the call's
    ex.claims.answer_watched(time.monotonic() + 60)  # nothing is answered twice
    assert len(ex.answers) == 1


def test_an_unknown_the_tail_does_not_read_back_is_answered_as_it_is() -> None:
    """The tail is stuck (its broker cut off, say): the UNKNOWN is answered after
    DECIDE_READ_TIMEOUT without being journaled again."""
    ex, _ = _watching_executor(claimant_started_s_ago=120)
    now = time.monotonic() + OUTCOME_MARGIN_S + 1
    ex.claims.answer_watched(now)
    assert ex.answers == []
    ex.claims.answer_watched(now + DECIDE_READ_TIMEOUT + 1)
    assert [a.payload.status for a in ex.answers] == [CallStatus.UNKNOWN]  # type: ignore[union-attr]
    assert len([r for r in ex.producer.records if r[0] == ex.names.journal]) == 1


def _local_executor() -> tuple[Any, _Sink]:
    """A real KafkaExecutor of slot e0 in local mode, its producer a sink (no broker)."""
    from eddies.connectors.kafka.executor import KafkaExecutor
    from eddies.connectors.kafka.memory_broker import MemoryBroker, MemoryClients
    from eddies.connectors.kafka.roles import RoleContext
    from eddies.connectors.runtime.signing import ResultSigner
    from eddies.connectors.runtime.topics import TopicNames
    from eddies.engine import AgentPlan
    from tests.agents import Echo

    settings = load_settings(env={}, overrides={"bootstrap_servers": "127.0.0.1:9", "app": "t",
                                                "partitions": 2, "instance_id": "e0"})
    ctx = RoleContext(settings=settings, names=TopicNames("t"), plan=AgentPlan.compile(Echo()),
                      counters=Counters(), membership=Membership(False, 6000, 2000),
                      signer=ResultSigner([b"k" * 32]), claimant=Claimant("e0", "cccc"),
                      clients=MemoryClients(MemoryBroker(), settings), stalls=StallWatch(3.0))
    executor = KafkaExecutor(ctx, None, local=True)
    sink = _Sink()
    executor.producer = executor.claims.producer = sink  # type: ignore[assignment]
    return executor, sink


def test_a_dead_process_of_my_slot_leaves_its_call_unknown_journaled_and_answered_once() -> None:
    """The call a killed process of this worker's slot started is UNKNOWN at once, and that
    answer is journaled: asked again (a session's next owner re-issues it), it is answered
    from the journal, not decided again."""
    executor, sink = _local_executor()
    ref = ("s:r1:i1:c0", 1)
    request = AgentEvent.external("s", DurableCallRequest(ref[0], CallKind.TOOL, "book"),
                                  event_id="req-1", timestamp=0)
    executor.tail.view.started[ref] = Claim(Claimant("e0", "dead").token, 3, int(time.time() * 1000))
    now_ms = int(time.time() * 1000)
    executor._dispatch(request, None, 0, now_ms)
    journaled = [(v, k) for t, v, k in sink.records if t == "t.journal"]
    assert [k for _, k in journaled] == [outcome_key(*ref)]
    assert decode(journaled[0][0] or b"").payload.status is CallStatus.UNKNOWN  # type: ignore[union-attr]
    assert [t for t, _, _ in sink.records] == ["t.journal"]  # answered once read back:
    _read_back(executor.tail, sink.records, "t.journal", start=4,  # the first outcome
               partition=journal_partition("s", executor.settings.partitions))
    executor.claims.answer_watched(time.monotonic())
    executor._dispatch(request, None, 1, now_ms)
    answers = [decode(v or b"").payload.status for t, v, _ in sink.records if t == "t.input"]  # type: ignore[union-attr]
    assert answers == [CallStatus.UNKNOWN, CallStatus.UNKNOWN]  # the second from the journal
    assert executor.counters.get("results_unknown") == 1 and executor.counters.get("results_resent") == 1
    assert len(sink.records) == 3  # journaled once


def test_a_process_taken_for_dead_whose_outcome_comes_first_decides_its_call() -> None:
    """A request for a call whose claimant is taken for dead (here: an earlier process of
    this slot) journals UNKNOWN, but the claimant journaled its OK first (it was only
    paused): the request is answered OK, as every reader of the journal takes it."""
    executor, sink = _local_executor()
    ref = ("s:r1:i1:c0", 1)
    request = AgentEvent.external("s", DurableCallRequest(ref[0], CallKind.TOOL, "book"),
                                  event_id="req-1", timestamp=0)
    executor.tail.view.started[ref] = Claim(Claimant("e0", "dead").token, 3, int(time.time() * 1000))
    executor._dispatch(request, None, 0, int(time.time() * 1000))
    [unknown] = [(t, v, k) for t, v, k in sink.records if t == "t.journal"]
    ok = encode(result_event(request, CallStatus.OK, '"booked"'))
    _read_back(executor.tail, [("t.journal", ok, unknown[2]), unknown], "t.journal", start=4,
               partition=journal_partition("s", executor.settings.partitions))
    executor.claims.answer_watched(time.monotonic())
    answers = [decode(v or b"").payload for t, v, _ in sink.records if t == "t.input"]
    assert [(a.status, a.value) for a in answers] == [(CallStatus.OK, '"booked"')]  # type: ignore[union-attr]


def test_an_unknown_for_a_request_older_than_the_journal_retention_is_not_journaled() -> None:
    """Its run may be over and its journal keys tombstoned: journaling would bring one back."""
    executor, sink = _local_executor()
    request = AgentEvent.external("s", DurableCallRequest("s:r1:i1:c0", CallKind.TOOL, "book"),
                                  event_id="req-1", timestamp=0)
    long_ago = int(time.time() * 1000) - executor.settings.journal_retention_ms - 60_000
    executor._dispatch(request, None, 0, long_ago)
    assert [t for t, _, _ in sink.records] == ["t.input"]
    assert decode(sink.records[0][1] or b"").payload.status is CallStatus.UNKNOWN  # type: ignore[union-attr]


def _idempotent_call(session: str) -> AgentEvent:
    return AgentEvent.external(session, DurableCallRequest(
        f"{session}:r1:i1:c0", CallKind.FUNCTION, "builtins:abs", '{"args":[-3],"kwargs":{}}',
        idempotent=True), event_id="req-1", timestamp=0)


def test_a_woken_executor_starts_no_call_until_its_partition_is_confirmed() -> None:
    """After a pause its call threads wait; a partition found gone meanwhile is not
    performed for (its new owner does it), one confirmed is."""
    import threading

    from eddies.events import partition_for

    executor, sink = _local_executor()
    executor.owned = {0, 1}
    gone = next(sid for sid in ("s1", "s2", "s3", "s4") if partition_for(sid, 2) == 0)
    kept = next(sid for sid in ("s1", "s2", "s3", "s4") if partition_for(sid, 2) == 1)
    executor.ctx.stalls.note()  # it stood still
    threads = [threading.Thread(target=executor.perform, args=(_idempotent_call(sid), None, 0))
               for sid in (gone, kept)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    assert sink.records == []  # neither call started
    executor.release({0})  # the orchestrator found partition 0 gone
    threads[0].join(5)
    assert not threads[0].is_alive() and executor.counters.get("calls_dropped") == 1
    assert sink.records == []
    executor.gate.confirmed(time.monotonic())  # and partition 1 still its own
    threads[1].join(5)
    answered = [decode(v or b"") for t, v, _ in sink.records if t == "t.input"]
    assert [e.session_id for e in answered] == [kept]
    assert answered[0].payload.value == "3"  # type: ignore[union-attr]


def test_a_call_asked_again_before_its_outcome_is_read_back_is_not_made_again() -> None:
    """A restore re-issues the requests of a session's open calls while their first copies
    are still on APP.requests: a copy that comes after the call returned, but before this
    executor's tail read its outcome back, is settled by the answer already sent."""
    executor, sink = _local_executor()
    executor.owned = {0, 1}
    request = _idempotent_call("s1")
    made: list[str] = []

    def perform(req: Any, scope: Any) -> int:
        made.append(req.call_id)
        return 3

    executor.calls.make_performer = lambda: SimpleNamespace(perform=perform)
    for offset in (0, 1):
        executor.offsets.read(0, offset)
        with executor._lock:
            executor._dispatch(request, 0, offset, int(time.time() * 1000))
        deadline = time.monotonic() + 5
        while executor.inflight and time.monotonic() < deadline:
            executor._drain(block=True)
    assert made == ["s1:r1:i1:c0"]
    assert [t for t, _, _ in sink.records] == ["t.journal", "t.input"]  # answered once
    executor.offsets.advance()
    assert executor.offsets.pending == {0: 2}  # both copies settled


def test_an_outcome_journaled_while_the_call_ran_is_the_answer() -> None:
    """A process that stood still while it performed a call finds the call decided by
    another (UNKNOWN, say): it journals nothing over it and answers what the journal says."""
    executor, sink = _local_executor()
    executor.owned = {0, 1}
    request = _idempotent_call("s1")
    ref = ("s1:r1:i1:c0", 1)

    def decided_while_it_runs(req: Any, scope: Any) -> int:
        executor.tail.view.outcomes[ref] = encode(result_event(request, CallStatus.UNKNOWN))
        return 3

    executor.calls.make_performer = lambda: SimpleNamespace(perform=decided_while_it_runs)
    executor.perform(request, None, 0)
    assert [t for t, _, _ in sink.records] == ["t.input"]  # nothing journaled
    assert decode(sink.records[0][1] or b"").payload.status is CallStatus.UNKNOWN  # type: ignore[union-attr]
    assert executor.counters.get("outcomes_superseded") == 1


def test_an_idempotent_call_answered_while_it_waited_to_start_is_not_made() -> None:
    """Decided while it waited for a thread (the session's previous owner journaled its
    outcome since it was dispatched): answered from the journal, not performed."""
    executor, sink = _local_executor()
    executor.owned = {0, 1}
    request = _idempotent_call("s1")
    executor.tail.view.outcomes[("s1:r1:i1:c0", 1)] = encode(result_event(request, CallStatus.OK, "3"))
    executor.calls.make_performer = lambda: SimpleNamespace(
        perform=lambda req, scope: pytest.fail("performed"))
    executor.perform(request, None, 0)
    assert [t for t, _, _ in sink.records] == ["t.input"]  # nothing journaled, the outcome sent
    assert decode(sink.records[0][1] or b"").payload.value == "3"  # type: ignore[union-attr]
    assert executor.counters.get("results_resent") == 1


def test_an_idempotent_call_whose_partition_is_revoked_while_it_catches_up_is_not_made() -> None:
    """A call of a partition gained from another process waits to catch up with its
    journal; revoked meanwhile (a rebalance moved it on), it is dropped on a call thread
    and on the call loop alike: its new owner makes it, and this process does not ask the
    provider beside it (a chaos round saw a worker ask 1.3 s after the revoke)."""
    import asyncio

    from eddies.connectors.execution.calls import LoopCall
    from eddies.connectors.kafka.catching_up import SHARED_S
    from eddies.events import partition_for

    executor, sink = _local_executor()
    executor.owned = {0, 1}
    sessions = [sid for sid in ("s1", "s2", "s3", "s4", "s5", "s6") if partition_for(sid, 2) == 0][:2]
    executor.calls.catch_up.gained({0})
    executor.calls.catch_up.tail = SimpleNamespace(  # its wait is where the revoke comes
        caught_up=lambda jpart, timeout: executor.release({jpart}) or True)
    executor.calls.make_performer = lambda: SimpleNamespace(
        perform=lambda req, scope: pytest.fail("performed on a thread"))
    executor.perform(_idempotent_call(sessions[0]), None, 0)
    assert executor.counters.get("calls_dropped") == 1

    executor.owned = {0, 1}
    executor.calls.catch_up.gained({0})
    time.sleep(SHARED_S * 1.5)  # a catch-up of its own, not a share of the one just made
    made: list[str] = []

    async def call() -> int:
        made.append("asked")
        return 3

    coro = call()
    executor.calls.on_loop(_idempotent_call(sessions[1]), None, 0, LoopCall("conn", coro))
    deadline = time.monotonic() + 5
    while executor.counters.get("calls_dropped") < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert made == [] and executor.counters.get("calls_dropped") == 2
    assert sink.records == []  # nothing journaled, nothing answered
    assert asyncio.iscoroutine(coro) and coro.cr_frame is None  # closed, never run
    executor.calls.close()


def test_idempotent_calls_being_made_are_handed_over_when_their_partition_is_revoked() -> None:
    """A revoke (in order) journals a started mark naming this process for each idempotent
    call it is still making of the partition; the new owner then waits for the outcome this
    process journals, not asking the provider beside it (a chaos round saw hundreds of
    model calls asked twice on every rebalance). A partition lost (taken while this process
    stood still) gets none: the new owner has it already."""
    import threading

    from eddies.events import partition_for

    executor, sink = _local_executor()
    executor.claims.marks = sink
    executor.owned = {0, 1}
    by_part = {partition_for(sid, 2): sid for sid in ("s1", "s2", "s3", "s4", "s5", "s6")}
    going = threading.Event()
    asked: list[str] = []

    def ask(req: Any, scope: Any) -> int:
        asked.append(req.call_id)
        going.wait(5)
        return 3

    executor.calls.make_performer = lambda: SimpleNamespace(perform=ask)
    calls = [threading.Thread(target=executor.perform, args=(_idempotent_call(by_part[p]), None, p))
             for p in (0, 1)]
    for t in calls:
        t.start()
    deadline = time.monotonic() + 5
    while len(asked) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    executor.release({0}, revoked=True)
    executor.release({1})  # lost
    ref = (f"{by_part[0]}:r1:i1:c0", 1)
    assert sink.records == [("t.journal", executor.claimant.token, started_key(*ref))]
    assert executor.counters.get("calls_handed_over") == 1
    going.set()
    for t in calls:
        t.join(5)
    assert executor.calls.take_asking({0, 1}) == []
    assert sorted(k or b"" for t, _, k in sink.records[1:] if t == "t.journal") == sorted(
        outcome_key(f"{by_part[p]}:r1:i1:c0", 1) for p in (0, 1))  # both still journaled

    heir, _ = _local_executor()  # the new owner, with the mark in its view: it waits
    heir.claimant = heir.claims.claimant = Claimant("e1", "dddd")
    heir.owned = {0, 1}
    heir.tail.view.started[ref] = Claim(executor.claimant.token, 7, int(time.time() * 1000))
    heir.calls.make_performer = lambda: SimpleNamespace(perform=lambda req, scope: pytest.fail("asked"))
    with heir._lock:
        heir._dispatch(_idempotent_call(by_part[0]), None, 0, int(time.time() * 1000))
    assert heir.counters.get("calls_awaited") == 1 and heir.tail.watched(ref)


def test_a_call_revoked_after_its_last_journal_check_is_dropped_not_made_unhanded() -> None:
    """The revoke comes while the call looks for an outcome in the journal (the tail's
    lock can be held a while): the call is neither made nor handed over, so the new owner
    makes it (a chaos round saw a worker ask 0.4 s after a revoke that handed its calls
    over, none of those)."""
    executor, sink = _local_executor()
    executor.claims.marks = sink
    executor.owned = {0, 1}
    inner = executor.tail.lock

    class RevokedMeanwhile:
        def __enter__(self) -> Any:
            executor.tail.lock = inner  # (once)
            executor.release({0, 1}, revoked=True)
            return inner.__enter__()

        def __exit__(self, *exc: Any) -> Any:
            return inner.__exit__(*exc)

    executor.tail.lock = RevokedMeanwhile()
    executor.calls.make_performer = lambda: SimpleNamespace(perform=lambda req, scope: pytest.fail("made"))
    executor.perform(_idempotent_call("s1"), None, 0)
    assert executor.counters.get("calls_dropped") == 1
    assert sink.records == []  # no mark: the new owner makes it


def test_a_call_taken_by_a_revoke_as_it_starts_is_made_and_handed_over() -> None:
    """The revoke comes between the call noting itself as being made and its check of the
    partition: the revoke took it (its started mark is journaled), so it is made, and its
    new owner waits for its outcome."""
    from eddies.events import partition_for

    executor, sink = _local_executor()
    executor.claims.marks = sink
    executor.owned = {0, 1}
    session = next(sid for sid in ("s1", "s2", "s3", "s4") if partition_for(sid, 2) == 0)
    ref = (f"{session}:r1:i1:c0", 1)
    owns = executor.claims.owns

    def revoked_as_it_asks(jpart: int) -> bool:
        if ref in executor.calls._asking:  # noted as being made: the revoke comes now
            executor.claims.owns = owns
            executor.release({0}, revoked=True)
        return owns(jpart)

    executor.claims.owns = revoked_as_it_asks
    made: list[str] = []
    executor.calls.make_performer = lambda: SimpleNamespace(perform=lambda req, scope: made.append("x") or 3)
    executor.perform(_idempotent_call(session), None, 0)
    assert made == ["x"] and sink.records[0] == ("t.journal", executor.claimant.token, started_key(*ref))
    journaled = [k for t, _, k in sink.records[1:] if t == "t.journal"]
    assert journaled == [outcome_key(*ref)]  # its outcome, for the new owner


def test_a_call_learned_again_by_a_restore_is_not_forgotten_with_its_earlier_read() -> None:
    """The tail forgets an outcome (and its mark) some time after it read it; a partition
    lost and gained again is restored from its journal, which learns the call anew. The
    earlier read's expiry must not take it away then (a chaos round saw an executor make a
    call again 60.6 s after it made it first, when a restored session issued it anew)."""
    from eddies.connectors.journal.reading import JournalView

    tail = JournalTail(load_settings(env={}, overrides={"bootstrap_servers": "127.0.0.1:9"}), "t.journal",
                       retention_s=0.05)
    request = _idempotent_call("s1")
    ref = ("s1:r1:i1:c0", 1)
    outcome = encode(result_event(request, CallStatus.OK, "3"))
    mark = ("t.journal", Claimant("e0", "cccc").token, started_key(*ref))
    _read_back(tail, [mark, ("t.journal", outcome, outcome_key(*ref))], "t.journal", start=0)
    assert ref in tail.view.outcomes and ref in tail.view.started
    restored = JournalView()
    _read_back_view(restored, [mark, ("t.journal", outcome, outcome_key(*ref))])
    tail.follow(restored)  # lost, then gained again: read from the journal
    time.sleep(0.1)
    tail._prune()  # the first read's time is up
    assert tail.view.outcomes.get(ref) == outcome and ref in tail.view.started

    other = ("s1:r1:i1:c1", 1)  # read by the tail only: forgotten in time, as before
    data = encode(result_event(_idempotent_call("s1"), CallStatus.OK, "4"))
    _read_back(tail, [("t.journal", data, outcome_key(*other))], "t.journal", start=2)
    time.sleep(0.1)
    tail._prune()
    assert other not in tail.view.outcomes


def _read_back_view(view: Any, records: list[tuple[str, bytes | None, bytes | None]]) -> None:
    """``view`` folds ``records`` as a journal read does (offsets from 0, partition 0)."""
    from eddies.connectors.journal.reading import fold
    from eddies.connectors.kafka.memory_broker import Record

    for offset, (t, value, key) in enumerate(records):
        fold(view, Record(t, 0, offset, key, value))


def test_a_call_issued_anew_after_its_outcome_was_forgotten_is_answered_from_the_journal() -> None:
    """The tail keeps an outcome a minute after it read it, and the call's started mark as
    long as the partition is followed. A request issued anew later (an orchestrator
    restarted after a minute, a Flink job restored from a checkpoint) finds the mark, not
    the outcome: the partition is read again, and the journal's outcome answers it. The
    call is neither made again nor waited for."""
    from eddies.events import partition_for

    executor, sink = _local_executor()
    session = "s1"
    jpart = partition_for(session, 2)
    request = AgentEvent.external(session, DurableCallRequest(
        f"{session}:r1:i1:c0", CallKind.TOOL, "book", '{"args":[],"kwargs":{}}'),
        event_id="req-1", timestamp=0)
    ref = (f"{session}:r1:i1:c0", 1)
    long_ago = int(time.time() * 1000) - 120_000
    broker = executor.ctx.clients.broker
    broker.create("t.journal", 2)
    broker.append("t.journal", jpart, started_key(*ref), executor.claimant.token, timestamp=long_ago)
    outcome = encode(result_event(request, CallStatus.OK, '"booked"'))
    broker.append("t.journal", jpart, outcome_key(*ref), outcome, timestamp=long_ago + 500)
    executor.owned = {0, 1}
    executor.tail.view.started[ref] = Claim(executor.claimant.token, 0, long_ago)  # its outcome forgotten
    executor.calls.make_performer = lambda: SimpleNamespace(perform=lambda req, scope: pytest.fail("made"))
    with executor._lock:
        executor._dispatch(request, None, 0, int(time.time() * 1000))
    answered = [decode(v or b"") for t, v, _ in sink.records if t == "t.input"]
    assert [a.payload.value for a in answered] == ['"booked"']  # type: ignore[union-attr]
    assert executor.counters.get("calls_awaited") == 0


def test_a_claim_lost_to_a_process_taken_for_dead_is_decided_by_the_journals_first_outcome() -> None:
    """A call thread marks a call and reads the journal back: an earlier process of this
    slot (taken for dead, only paused) marked it first. The call thread decides nothing;
    the executor's loop journals UNKNOWN and answers with the first outcome read back: the
    earlier process's OK, journaled before the UNKNOWN when it came back."""
    executor, sink = _local_executor()
    executor.owned = {0, 1}
    ref = ("s:r1:i1:c0", 1)
    request = AgentEvent.external("s", DurableCallRequest(ref[0], CallKind.TOOL, "book"),
                                  event_id="req-1", timestamp=0)
    jpart = journal_partition("s", executor.settings.partitions)
    broker = executor.ctx.clients.broker
    broker.create("t.journal", executor.settings.partitions)
    broker.append("t.journal", jpart, started_key(*ref), Claimant("e0", "dead").token)

    def read_past(partition: int, offset: int, timeout: float) -> bool:
        """The tail reads the journal past this process's mark."""
        assert (partition, offset) == (jpart, 1)  # this process's mark, after the first
        _read_back(executor.tail, [("t.journal", r.value(), r.key())
                                   for r in broker.topics["t.journal"][jpart] if r is not None],
                   "t.journal", start=0, partition=jpart)
        return True

    executor.tail.wait_past = read_past  # type: ignore[method-assign]
    executor.perform(request, None, 0)  # on a call thread
    assert sink.records == []  # nothing journaled or answered by the call thread
    executor._drain(block=False)  # the executor's loop takes it
    [unknown] = sink.records
    assert unknown[0] == "t.journal" and decode(unknown[1] or b"").payload.status is CallStatus.UNKNOWN  # type: ignore[union-attr]
    ok = encode(result_event(request, CallStatus.OK, '"booked"'))
    _read_back(executor.tail, [("t.journal", ok, unknown[2]), unknown], "t.journal", start=2,
               partition=jpart)
    executor._drain(block=False)
    answers = [decode(v or b"").payload for t, v, _ in sink.records if t == "t.input"]
    assert [(a.status, a.value) for a in answers] == [(CallStatus.OK, '"booked"')]  # type: ignore[union-attr]
    assert executor.counters.get("claims_lost") == 1


def test_a_mark_delivered_without_its_offset_is_found_by_its_token_in_the_journal() -> None:
    """A started mark whose delivery report names no offset (a send retried after a network
    cut, which the broker already had) is known by the claimant's token once the journal
    tail reads the call's first mark: its offset if the mark is this process's, else -1 (the
    claim is lost). Before, the offset's None reached a comparison and stopped the worker."""
    import threading

    from eddies.connectors.kafka.claiming import UNREPORTED, _Mark

    mark = _Mark()
    mark.report(None, SimpleNamespace(offset=lambda: None))
    assert mark.delivered.is_set() and mark.offset == UNREPORTED and mark.error is None
    me, other = Claimant("slot-1", "aaaa"), Claimant("slot-2", "bbbb")
    ref = ("s:r1:i1:c0", 1)
    for first, found in [(me, 7), (other, -1)]:
        tail = SimpleNamespace(lock=threading.Condition(), view=JournalView())

        def read_later(token: bytes = first.token, tail: Any = tail) -> None:
            time.sleep(0.2)
            with tail.lock:
                tail.view.apply(started_key(*ref), token, 7)
                tail.lock.notify_all()

        threading.Thread(target=read_later).start()
        claims: Any = SimpleNamespace(tail=tail, claimant=me)
        assert CallClaims._own_mark(claims, ref) == found
