"""Calls in flight when their partition moves: an idempotent call is not made while its
partition catches up, nor once it is revoked; one being made is handed over (a started
mark naming the old owner) and its outcome awaited; an outcome the journal tail forgot is
read again (a recall) when a call is issued anew."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from eddies.connectors.execution.calls import result_event
from eddies.connectors.journal.claims import Claim, Claimant
from eddies.connectors.journal.reading import JournalView
from eddies.connectors.kafka.journal_tail import JournalTail
from eddies.connectors.runtime.records import outcome_key, started_key
from eddies.connectors.runtime.settings import load_settings
from eddies.events import AgentEvent, CallKind, CallStatus, DurableCallRequest, decode, encode
from tests.unit.connectors.executor_harness import (
    idempotent_call,
    local_executor,
    read_back,
    read_back_view,
)


def test_a_woken_executor_starts_no_call_until_its_partition_is_confirmed() -> None:
    """After a pause its call threads wait; a partition found gone meanwhile is not
    performed for (its new owner does it), one confirmed is."""
    import threading

    from eddies.events import partition_for

    executor, sink = local_executor()
    executor.owned = {0, 1}
    gone = next(sid for sid in ("s1", "s2", "s3", "s4") if partition_for(sid, 2) == 0)
    kept = next(sid for sid in ("s1", "s2", "s3", "s4") if partition_for(sid, 2) == 1)
    executor.ctx.stalls.note()  # it stood still
    threads = [threading.Thread(target=executor.perform, args=(idempotent_call(sid), None, 0))
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
    executor, sink = local_executor()
    executor.owned = {0, 1}
    request = idempotent_call("s1")
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
    executor, sink = local_executor()
    executor.owned = {0, 1}
    request = idempotent_call("s1")
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
    executor, sink = local_executor()
    executor.owned = {0, 1}
    request = idempotent_call("s1")
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

    executor, sink = local_executor()
    executor.owned = {0, 1}
    sessions = [sid for sid in ("s1", "s2", "s3", "s4", "s5", "s6") if partition_for(sid, 2) == 0][:2]
    executor.calls.catch_up.gained({0})
    executor.calls.catch_up.tail = SimpleNamespace(  # its wait is where the revoke comes
        caught_up=lambda jpart, timeout: executor.release({jpart}) or True)
    executor.calls.make_performer = lambda: SimpleNamespace(
        perform=lambda req, scope: pytest.fail("performed on a thread"))
    executor.perform(idempotent_call(sessions[0]), None, 0)
    assert executor.counters.get("calls_dropped") == 1

    executor.owned = {0, 1}
    executor.calls.catch_up.gained({0})
    time.sleep(SHARED_S * 1.5)  # a catch-up of its own, not a share of the one just made
    made: list[str] = []

    async def call() -> int:
        made.append("asked")
        return 3

    coro = call()
    executor.calls.on_loop(idempotent_call(sessions[1]), None, 0, LoopCall("conn", coro))
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

    executor, sink = local_executor()
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
    calls = [threading.Thread(target=executor.perform, args=(idempotent_call(by_part[p]), None, p))
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

    heir, _ = local_executor()  # the new owner, with the mark in its view: it waits
    heir.claimant = heir.claims.claimant = Claimant("e1", "dddd")
    heir.owned = {0, 1}
    heir.tail.view.started[ref] = Claim(executor.claimant.token, 7, int(time.time() * 1000))
    heir.calls.make_performer = lambda: SimpleNamespace(perform=lambda req, scope: pytest.fail("asked"))
    with heir._lock:
        heir._dispatch(idempotent_call(by_part[0]), None, 0, int(time.time() * 1000))
    assert heir.counters.get("calls_awaited") == 1 and heir.tail.watched(ref)


def test_a_call_revoked_after_its_last_journal_check_is_dropped_not_made_unhanded() -> None:
    """The revoke comes while the call looks for an outcome in the journal (the tail's
    lock can be held a while): the call is neither made nor handed over, so the new owner
    makes it (a chaos round saw a worker ask 0.4 s after a revoke that handed its calls
    over, none of those)."""
    executor, sink = local_executor()
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
    executor.perform(idempotent_call("s1"), None, 0)
    assert executor.counters.get("calls_dropped") == 1
    assert sink.records == []  # no mark: the new owner makes it


def test_a_call_taken_by_a_revoke_as_it_starts_is_made_and_handed_over() -> None:
    """The revoke comes between the call noting itself as being made and its check of the
    partition: the revoke took it (its started mark is journaled), so it is made, and its
    new owner waits for its outcome."""
    from eddies.events import partition_for

    executor, sink = local_executor()
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
    executor.perform(idempotent_call(session), None, 0)
    assert made == ["x"] and sink.records[0] == ("t.journal", executor.claimant.token, started_key(*ref))
    journaled = [k for t, _, k in sink.records[1:] if t == "t.journal"]
    assert journaled == [outcome_key(*ref)]  # its outcome, for the new owner


def test_a_call_learned_again_by_a_restore_is_not_forgotten_with_its_earlier_read() -> None:
    """The tail forgets an outcome (and its mark) some time after it read it; a partition
    lost and gained again is restored from its journal, which learns the call anew. The
    earlier read's expiry must not take it away then (a chaos round saw an executor make a
    call again 60.6 s after it made it first, when a restored session issued it anew)."""

    tail = JournalTail(load_settings(env={}, overrides={"bootstrap_servers": "127.0.0.1:9"}), "t.journal",
                       retention_s=0.05)
    request = idempotent_call("s1")
    ref = ("s1:r1:i1:c0", 1)
    outcome = encode(result_event(request, CallStatus.OK, "3"))
    mark = ("t.journal", Claimant("e0", "cccc").token, started_key(*ref))
    read_back(tail, [mark, ("t.journal", outcome, outcome_key(*ref))], "t.journal", start=0)
    assert ref in tail.view.outcomes and ref in tail.view.started
    restored = JournalView()
    read_back_view(restored, [mark, ("t.journal", outcome, outcome_key(*ref))])
    tail.follow(restored)  # lost, then gained again: read from the journal
    time.sleep(0.1)
    tail._prune()  # the first read's time is up
    assert tail.view.outcomes.get(ref) == outcome and ref in tail.view.started

    other = ("s1:r1:i1:c1", 1)  # read by the tail only: forgotten in time, as before
    data = encode(result_event(idempotent_call("s1"), CallStatus.OK, "4"))
    read_back(tail, [("t.journal", data, outcome_key(*other))], "t.journal", start=2)
    time.sleep(0.1)
    tail._prune()
    assert other not in tail.view.outcomes


def test_a_call_issued_anew_after_its_outcome_was_forgotten_is_answered_from_the_journal() -> None:
    """The tail keeps an outcome a minute after it read it, and the call's started mark as
    long as the partition is followed. A request issued anew later (an orchestrator
    restarted after a minute, a Flink job restored from a checkpoint) finds the mark, not
    the outcome: the partition is read again, and the journal's outcome answers it. The
    call is neither made again nor waited for."""
    from eddies.events import partition_for

    executor, sink = local_executor()
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


def test_a_recall_whose_read_fails_leaves_the_call_to_what_is_known() -> None:
    """The partition cannot be read again (its broker cut off, say): the request is not
    an error of the executor's; the call is watched on its started mark, as before."""
    from eddies.connectors.kafka.journal_tail import RECALL_TIMEOUT_S, JournalTail

    tail = JournalTail(SimpleNamespace(outcome_wait_ms=60_000, partitions=2), "t.journal")
    ref = ("s1:r1:i1:c0", 1)
    tail.view.started[ref] = Claim(b"e0|dead", 0, int(time.time() * 1000) - 120_000)

    asked: list[float] = []

    def cut(partitions: set[int], timeout: float) -> Any:
        asked.append(timeout)
        raise TimeoutError(f"no progress reading t.journal for {timeout} s")

    tail.recall(ref, 0, cut)
    assert ref in tail.view.started and ref not in tail.view.outcomes
    assert asked == [RECALL_TIMEOUT_S]  # bounded: the executor's lock is held meanwhile
