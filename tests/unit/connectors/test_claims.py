"""The pure parts of claiming calls: who a started mark names, which mark came first, when
a reader reads a partition again, and what a watched call's UNKNOWN leaves in the journal."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

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
from tests.unit.connectors.executor_harness import (
    Sink,
    local_executor,
    read_back,
)


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


def test_a_call_answered_unknown_after_its_wait_is_answered_from_the_journal_when_asked_again() -> None:
    """Another worker's call, its wait over, is answered UNKNOWN; the next owner of its
    session (restored from a snapshot taken before that answer was applied) issues the
    request again: it is answered from the journal at once, not watched and answered
    UNKNOWN a second time (a kill -9 campaign saw the same executor answer twice)."""
    ex, request = _watching_executor(claimant_started_s_ago=120)
    ex.claims.answer_watched(time.monotonic() + OUTCOME_MARGIN_S + 1)  # its wait is over
    assert ex.answers == []  # UNKNOWN journaled; the answer is the first outcome read back
    # The tail reads back what this worker journaled: the first outcome, so the answer.
    read_back(ex.tail, ex.producer.records, ex.names.journal, start=4)
    ex.claims.answer_watched(time.monotonic())
    assert [a.payload.status for a in ex.answers] == [CallStatus.UNKNOWN]
    # The request comes again.
    with ex.tail.lock:
        verdict, recorded = ex.claims.verdict(request, 0, 8)
    assert verdict == "outcome"  # answered at once, as the first time
    assert recorded is not None and decode(recorded).payload.status is CallStatus.UNKNOWN  # type: ignore[union-attr]


def _watching_executor(claimant_started_s_ago: float) -> tuple[Any, AgentEvent]:
    """An executor of slot e-f3 watching call s:r1:i1:c0, started by e-f2 long enough ago
    that its wait is over."""
    class Executor:
        def __init__(self) -> None:
            self.settings: Any = SimpleNamespace(outcome_wait_ms=60_000, partitions=6)
            self.names: Any = SimpleNamespace(journal="app.journal", input="app.input")
            self.counters = Counters()
            self.tail = JournalTail(self.settings, self.names.journal)
            self.producer: Any = Sink()
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
    read_back(ex.tail, [(ex.names.journal, ok, journaled[0][2]), *journaled], ex.names.journal,
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


def test_a_dead_process_of_my_slot_leaves_its_call_unknown_journaled_and_answered_once() -> None:
    """The call a killed process of this worker's slot started is UNKNOWN at once, and that
    answer is journaled: asked again (a session's next owner re-issues it), it is answered
    from the journal, not decided again."""
    executor, sink = local_executor()
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
    read_back(executor.tail, sink.records, "t.journal", start=4,  # the first outcome
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
    executor, sink = local_executor()
    ref = ("s:r1:i1:c0", 1)
    request = AgentEvent.external("s", DurableCallRequest(ref[0], CallKind.TOOL, "book"),
                                  event_id="req-1", timestamp=0)
    executor.tail.view.started[ref] = Claim(Claimant("e0", "dead").token, 3, int(time.time() * 1000))
    executor._dispatch(request, None, 0, int(time.time() * 1000))
    [unknown] = [(t, v, k) for t, v, k in sink.records if t == "t.journal"]
    ok = encode(result_event(request, CallStatus.OK, '"booked"'))
    read_back(executor.tail, [("t.journal", ok, unknown[2]), unknown], "t.journal", start=4,
               partition=journal_partition("s", executor.settings.partitions))
    executor.claims.answer_watched(time.monotonic())
    answers = [decode(v or b"").payload for t, v, _ in sink.records if t == "t.input"]
    assert [(a.status, a.value) for a in answers] == [(CallStatus.OK, '"booked"')]  # type: ignore[union-attr]


def test_an_unknown_for_a_request_older_than_the_journal_retention_is_not_journaled() -> None:
    """Its run may be over and its journal keys tombstoned: journaling would bring one back."""
    executor, sink = local_executor()
    request = AgentEvent.external("s", DurableCallRequest("s:r1:i1:c0", CallKind.TOOL, "book"),
                                  event_id="req-1", timestamp=0)
    long_ago = int(time.time() * 1000) - executor.settings.journal_retention_ms - 60_000
    executor._dispatch(request, None, 0, long_ago)
    assert [t for t, _, _ in sink.records] == ["t.input"]
    assert decode(sink.records[0][1] or b"").payload.status is CallStatus.UNKNOWN  # type: ignore[union-attr]


def test_a_claim_lost_to_a_process_taken_for_dead_is_decided_by_the_journals_first_outcome() -> None:
    """A call thread marks a call and reads the journal back: an earlier process of this
    slot (taken for dead, only paused) marked it first. The call thread decides nothing;
    the executor's loop journals UNKNOWN and answers with the first outcome read back: the
    earlier process's OK, journaled before the UNKNOWN when it came back."""
    executor, sink = local_executor()
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
        read_back(executor.tail, [("t.journal", r.value(), r.key())
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
    read_back(executor.tail, [("t.journal", ok, unknown[2]), unknown], "t.journal", start=2,
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
