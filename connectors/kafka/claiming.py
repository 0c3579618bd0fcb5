"""How an executor decides a call against the journal: a non-idempotent call is claimed
first (a started mark appended and read back: only the call's first mark may run it),
another live worker's call is waited for, a dead process's call is UNKNOWN; a call starts
only on a partition still owned here, with no stall unconfirmed, and its outcome is
journaled here (unless one was journaled meanwhile).

A collaborator of :class:`.executor.KafkaExecutor` (which holds one :class:`CallClaims`):
the module docstring there tells the whole procedure.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from eddies.connectors.execution.calls import result_event
from eddies.connectors.journal.claims import Claim, Claimant
from eddies.connectors.runtime.json_logs import ids
from eddies.connectors.runtime.outbox import DeliveryFailedError
from eddies.connectors.runtime.records import journal_partition, outcome_key, started_key
from eddies.connectors.runtime.sink import produce
from eddies.events import AgentEvent, CallStatus, DecodeError, DurableCallRequest, decode, encode

if TYPE_CHECKING:
    from eddies.connectors.kafka.journal_tail import JournalTail
    from eddies.connectors.kafka.liveness import Liveness
    from eddies.connectors.kafka.stalls import StallGate
    from eddies.connectors.runtime.counters import Counters
    from eddies.connectors.runtime.settings import Settings
    from eddies.connectors.runtime.topics import TopicNames

log = logging.getLogger("eddies.worker")

#: How long a claim check waits for the journal tail to read the claim's own mark.
CLAIM_READ_TIMEOUT = 30.0
#: Margin over a request's own timeout_ms before another worker's call counts as unknown.
OUTCOME_MARGIN_S = 5.0
#: How long an UNKNOWN journaled for another worker's call waits for the tail to read which
#: outcome is first (it reads one back within a fetch or two) before it is answered as is.
DECIDE_READ_TIMEOUT = 10.0
#: How long a revoke may wait for the started marks of the calls it hands over.
HAND_OVER_FLUSH_S = 2.0


def outcome_wait_left(wait_s: float, started_ms: int, now_s: float) -> float:
    """Seconds left to wait for the outcome of a call another worker started at
    ``started_ms`` (its mark's record time; 0: unknown), ``wait_s`` in all. Counted from the
    start, so a call whose partition moves again is not waited for anew by each new owner
    (partitions that moved every half minute kept a dead worker's call undecided for
    minutes); at least OUTCOME_MARGIN_S after this owner sees it, for the claimant's
    outcome on its way and for the two workers' clocks.

        outcome_wait_left(60, started_ms=1_000_000, now_s=1_050.0)  # 10.0
    """
    if started_ms <= 0:
        return wait_s
    return min(wait_s, max(wait_s - (now_s - started_ms / 1000), OUTCOME_MARGIN_S))


#: A started mark's offset when its delivery report gave none (see :meth:`CallClaims.claim`).
UNREPORTED = -2


class _Mark:
    """The delivery of one started mark: its offset, once the broker acknowledged it."""

    __slots__ = ("delivered", "error", "offset")

    def __init__(self) -> None:
        self.delivered = threading.Event()
        self.offset = -1
        self.error: str | None = None

    def report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.error = str(err)
        else:
            # None: delivered, its offset not reported (a send retried after a cut, which
            # the broker already had: the idempotent producer's duplicate).
            offset = msg.offset()
            self.offset = UNREPORTED if offset is None else offset
        self.delivered.set()


class SendResult(Protocol):
    """Sends a result to APP.input (``data``: ``result`` encoded, if it is)."""

    def __call__(self, result: AgentEvent, data: bytes | None = None, /) -> None: ...


class Answer(Protocol):
    """Answers a request without performing it, and settles its APP.requests offset
    (called under the executor's lock)."""

    def __call__(self, result: AgentEvent, part: int | None, offset: int,
                 data: bytes | None = None, /) -> None: ...


class CallClaims:
    """Claims and waits (see the module's docstring), for the Kafka executor. It calls
    back into its executor only through ``owns`` (whether this process owns a journal
    partition now), ``send_result`` and ``answer``."""

    def __init__(self, *, settings: Settings, names: TopicNames, counters: Counters,
                 tail: JournalTail, claimant: Claimant, gate: StallGate, liveness: Liveness,
                 marks: Any, producer: Any, owns: Callable[[int], bool],
                 send_result: SendResult, answer: Answer) -> None:
        self.settings = settings
        self.names = names
        self.counters = counters
        self.tail = tail
        self.claimant = claimant
        self.gate = gate
        self.liveness = liveness
        #: Started marks, durable before the side effect (outside any transaction).
        self.marks = marks
        #: Outcomes are journaled through the executor's producer (with its results).
        self.producer = producer
        self.owns = owns
        self.send_result = send_result
        self.answer = answer
        self._last_sweep = time.monotonic()
        #: Watched calls this process journaled UNKNOWN for, waiting for the tail to read
        #: which outcome the journal holds first (see :meth:`decide_unknown`): their
        #: journal partitions.
        self._deciding: dict[tuple[str, int], int] = {}

    def may_start(self, jpart: int) -> bool:
        """Whether a call of journal partition ``jpart`` may start: the partition is still
        owned here, and no stall is left unconfirmed (a call thread that wakes from a pause
        waits for its role's loop to confirm, or to find the partition gone)."""
        while self.owns(jpart):
            if self.gate.wait_sure(0.2):
                return self.owns(jpart)
        return False

    async def may_start_soon(self, jpart: int) -> bool:
        """:meth:`may_start` for a call on an event loop: it waits without holding the
        loop's thread (the loop's other calls go on meanwhile)."""
        while self.owns(jpart):
            if not self.gate.unsure():
                return True
            await asyncio.sleep(0.05)
        return False

    def unknown(self, request: AgentEvent) -> None:
        """Journal UNKNOWN as the outcome of ``request`` (its claimant died, or its wait is
        over), as a timed-out call's error is: the request issued again (by the next owner
        of its session, from a snapshot taken before this answer was applied) is answered
        from the journal at once, here or by any executor, not decided (and waited for)
        again."""
        self.journal_outcome(request, encode(result_event(request, CallStatus.UNKNOWN)))
        self.counters.inc("results_unknown")

    def journal_outcome(self, request: AgentEvent, data: bytes) -> None:
        """Journal ``data``, a result encoded, as the outcome of ``request``'s call: a
        restart, or the request issued again, is answered from it, not decided again."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        produce(self.producer, self.names.journal, data, outcome_key(req.call_id, req.attempt),
                partition=journal_partition(request.session_id, self.settings.partitions))

    def outcome(self, request: AgentEvent, ref: tuple[str, int], result: AgentEvent,
                data: bytes) -> None:
        """A call performed here returned ``result`` (``data``: encoded): journal it as the
        call's outcome and send it, unless an outcome was journaled meanwhile."""
        with self.tail.lock:
            first = self.tail.view.outcomes.get(ref)
        if first is not None:  # decided meanwhile (this process stood still): that stands
            self.counters.inc("outcomes_superseded")
            self.send_result(self.recorded(request, first))
            return
        self.journal_outcome(request, data)
        self.send_result(result, data)

    def recorded(self, request: AgentEvent, data: bytes) -> AgentEvent:
        """The result of ``request`` from its journaled outcome; UNKNOWN if no outcome can
        be read from it (no worker writes such a record: never repeat the call for it)."""
        try:
            return decode(data)
        except DecodeError as err:
            req = request.payload
            assert isinstance(req, DurableCallRequest)
            log.error("the journaled outcome of call %s cannot be read (%s); answering "
                      "UNKNOWN", req.call_id, err, extra=ids(call=req.call_id))
            self.counters.inc("outcomes_unreadable")
            return result_event(request, CallStatus.UNKNOWN)

    def _deadline(self, req: DurableCallRequest, claim: Claim) -> float:
        """When another worker's call counts as unknown (a ``time.monotonic()`` value)."""
        wait = (req.timeout_ms / 1000 + OUTCOME_MARGIN_S if req.timeout_ms
                else self.settings.outcome_wait_ms / 1000)
        return time.monotonic() + outcome_wait_left(wait, claim.time_ms, time.time())

    def verdict(self, request: AgentEvent, part: int | None, offset: int,
                my_mark: int = -1) -> tuple[str, bytes | None]:
        """What the journal says of a request now (under ``tail.lock``): ("outcome", its
        outcome), ("perform", None) when no other claim came first (``my_mark``: the offset
        of this process's own mark, if it wrote one), ("unknown", None) when a dead process
        of this slot started it, ("watched", None): another worker started it and this
        process now waits for its outcome, or ("duplicate", None): it waits already."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        ref = (req.call_id, req.attempt)
        tail = self.tail
        if tail.watched(ref):
            return "duplicate", None
        recorded = tail.view.outcomes.get(ref)
        if recorded is not None:
            return "outcome", recorded
        claim = tail.view.started.get(ref)
        if claim is None or claim.offset == my_mark:
            return "perform", None
        claimant = Claimant.parse(claim.token)
        if claimant.is_dead_to(self.claimant) or self.liveness.dead(claimant):
            return "unknown", None
        jpart = journal_partition(request.session_id, self.settings.partitions)
        recorded = tail.watch(ref, jpart, self._deadline(req, claim), (request, part, offset),
                              claimant)
        if recorded is not None:
            return "outcome", recorded
        self.counters.inc("calls_awaited")
        return "watched", None

    def claim(self, request: AgentEvent, jpart: int, part: int | None, offset: int) -> str:
        """Claim a non-idempotent call: append a started mark naming this process, read the
        journal back past it, and decide on what came first. Returns "perform", "answered"
        (from an outcome), "unknown" (a process taken for dead claimed it first: the caller
        dispatches the request again, to :meth:`decide_unknown`) or "left" (dropped: not
        owned here; or watched)."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        ref = (req.call_id, req.attempt)
        tail = self.tail
        with tail.checking(jpart):
            if not self.owns(jpart):  # revoked while queued: its new owner re-issues it
                self.counters.inc("calls_dropped")
                return "left"
            mark = _Mark()
            produce(self.marks, self.names.journal, self.claimant.token, started_key(*ref),
                    partition=jpart, on_delivery=mark.report)
            left = self.marks.flush(CLAIM_READ_TIMEOUT)
            if left or not mark.delivered.wait(CLAIM_READ_TIMEOUT) or mark.error:
                raise DeliveryFailedError(
                    f"the started mark of {ref[0]} was not delivered: {mark.error or 'timed out'}")
            if mark.offset == UNREPORTED:
                mark.offset = self._own_mark(ref)
            # The partition stays followed while this check holds it, so the tail gets there.
            if not tail.wait_past(jpart, mark.offset, CLAIM_READ_TIMEOUT):
                raise TimeoutError(f"the journal tail did not read partition {jpart} past "
                                   f"offset {mark.offset} within {CLAIM_READ_TIMEOUT} s")
            with tail.lock:
                first = tail.view.started.get(ref)
                if not self.owns(jpart) and first is not None and first.offset != mark.offset:
                    self.counters.inc("claims_lost")
                    return "left"  # lost, and no longer ours to wait for
                verdict, recorded = self.verdict(request, part, offset, mark.offset)
        if verdict == "perform":
            return verdict
        self.counters.inc("claims_lost")
        if verdict in ("watched", "duplicate"):
            return "left"
        if recorded is None:  # lost to a process taken for dead: decided like any such call,
            return "unknown"  # under the executor's lock (see decide_unknown)
        self.send_result(self.recorded(request, recorded))
        self.counters.inc("results_resent")
        return "answered"

    def _own_mark(self, ref: tuple[str, int]) -> int:
        """The offset of this process's started mark of ``ref`` when its delivery report
        gave none: the first mark's, once the tail reads one, if it is this process's; -1
        (no offset: it came later) if another's came first."""
        tail = self.tail
        deadline = time.monotonic() + CLAIM_READ_TIMEOUT
        with tail.lock:
            while (first := tail.view.started.get(ref)) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"the journal tail read no started mark of {ref[0]} within "
                                       f"{CLAIM_READ_TIMEOUT} s")
                tail.lock.wait(min(left, 0.5))
        return first.offset if first.token == self.claimant.token else -1

    def answer_watched(self, now: float) -> None:
        """Answer watched calls (under the executor's lock): with the outcome another worker
        journaled, or UNKNOWN once their wait is over."""
        arrived = self.tail.arrived
        while True:
            try:
                (request, part, offset), data = arrived.get_nowait()
            except queue.Empty:
                break
            req = request.payload
            self._deciding.pop((getattr(req, "call_id", ""), getattr(req, "attempt", 0)), None)
            self.answer(self.recorded(request, data), part, offset)
            self.counters.inc("results_awaited")
        if now - self._last_sweep < 0.2 or self.gate.unsure():
            return  # after a stall the tail reads on first: an outcome may be on its way
        self._last_sweep = now
        for request, part, offset in self.tail.expired(now):
            cid = getattr(request.payload, "call_id", "?")
            if self.decide_unknown(request, part, offset, now):
                log.warning("call %s: no outcome from the worker that started it within the "
                            "wait; journaled UNKNOWN", cid, extra=ids(call=cid))
        dead = self.liveness.look(self.tail.claimants(), now)
        for request, part, offset in self.tail.owed_by(dead):
            self.counters.inc("claimants_dead")
            cid = getattr(request.payload, "call_id", "?")
            if self.decide_unknown(request, part, offset, now):
                log.warning("call %s: the worker that started it left the app's groups (dead, or "
                            "cut off); journaled UNKNOWN", cid, extra=ids(call=cid))

    def decide_unknown(self, request: AgentEvent, part: int | None, offset: int,
                       now: float) -> bool:
        """(Under the executor's lock.) A call another process started, whose outcome did
        not come (its wait is over, or that process is taken for dead): journal UNKNOWN as
        its outcome, and answer with the outcome the journal holds first once the tail has
        read it. That is this UNKNOWN, unless the claimant journaled its own outcome before
        it: a paused or cut-off claimant that comes back may finish the call in the very
        instant its watcher gives up on it (seen in a kill -9 campaign: 8 calls whose
        claimant's OK was journaled a millisecond before their watcher's UNKNOWN), and the
        first outcome is the one every reader takes. True when UNKNOWN was journaled now;
        the answer comes later."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        ref = (req.call_id, req.attempt)
        if self._deciding.pop(ref, None) is not None:  # not read back in time: UNKNOWN, as is
            self.answer(result_event(request, CallStatus.UNKNOWN), part, offset)
            return False
        # Watched again before UNKNOWN is journaled: whichever outcome the tail reads first
        # from now on (the claimant's, or this UNKNOWN) is handed over, once.
        jpart = journal_partition(request.session_id, self.settings.partitions)
        with self.tail.lock:
            first = self.tail.watch(ref, jpart, now + DECIDE_READ_TIMEOUT, (request, part, offset))
        if first is not None:  # the claimant's came meanwhile
            self.answer(self.recorded(request, first), part, offset)
            self.counters.inc("results_awaited")
            return False
        self._deciding[ref] = jpart
        self.unknown(request)
        return True

    def hand_over(self, calls: list[tuple[tuple[str, int], int]]) -> int:
        """Idempotent ``calls`` (ref, journal partition) still being made here when their
        partitions are revoked: journal a started mark naming this process for each, before
        the partitions move, so their new owner waits for the outcome this process
        journals (a call of a mark whose claimant is alive is watched, see
        :meth:`verdict`) instead of asking the provider beside it. If this process dies
        first, they are UNKNOWN to the new owner, and asked again (they are idempotent).
        How many marks were delivered within :data:`HAND_OVER_FLUSH_S`."""
        if not calls:
            return 0
        for (call_id, attempt), jpart in calls:
            produce(self.marks, self.names.journal, self.claimant.token, started_key(call_id, attempt),
                    partition=jpart)
        left: int = self.marks.flush(HAND_OVER_FLUSH_S)
        self.counters.inc("calls_handed_over", len(calls) - left)
        return len(calls) - left

    def release(self, partitions: set[int]) -> None:
        """``partitions`` are lost: their calls' decisions are the new owner's (the watches
        themselves go with the tail's)."""
        for ref in [r for r, jpart in self._deciding.items() if jpart in partitions]:
            del self._deciding[ref]
