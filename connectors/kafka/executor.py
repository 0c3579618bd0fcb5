"""The executor role: decides durable-call requests, and has the calls it decides to make
made (:mod:`.call_running`: on call threads, or as tasks on a call loop when the client is
asynchronous).

Requests come from ``APP.requests`` (its own consumer group) or, in a worker with both
roles, from its orchestrator in memory. Each is decided on the journal as it is when the
call is about to run (a :class:`.journal_tail.JournalTail` follows the owned partitions):

- a call with a recorded outcome is answered from the journal (the result may have been
  lost in a crash after the outcome was written); in an evaluation's app, one answered by
  the evaluated app's recording, or refused, is answered so and journaled;
- a call another live worker started is waited for: its outcome is sent on when the tail
  reads it; after the request's ``timeout_ms`` plus 5 s (or ``outcome_wait_ms``) the
  outcome counts as unknown. A mark of a dead process of this worker slot is unknown at once;
- a request for a partition this process no longer owns is dropped before it starts (its
  new owner re-issues it);
- a non-idempotent call is claimed first: a started mark naming this process is appended
  to the journal and read back; the call runs only if that mark is the call's first
  (:mod:`.claiming`). A crash from then on leaves the outcome unknown, never repeated.

Calls running when their partition is revoked finish and journal their outcome, which
the new owner waits for (an idempotent one gets a started mark as it is revoked:
``CallClaims.hand_over``). A request due later (a timer, a back-off) is held until then,
one whose run ended is dropped (:mod:`.timekeeping`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from eddies.connectors.execution.call_deadlines import CallDeadlines
from eddies.connectors.execution.calls import Resolver, result_event
from eddies.connectors.execution.held_requests import HeldRequests
from eddies.connectors.execution.recorded_calls import RecordedCalls
from eddies.connectors.journal.reading import CallRef, JournalView
from eddies.connectors.kafka.answered import AnsweredHere
from eddies.connectors.kafka.call_running import CallRunner
from eddies.connectors.kafka.claiming import CallClaims
from eddies.connectors.kafka.journal_tail import JournalTail
from eddies.connectors.kafka.liveness import Liveness
from eddies.connectors.kafka.local_results import LocalResults
from eddies.connectors.kafka.ownership import MembershipCheck, confirm_membership
from eddies.connectors.kafka.request_offsets import RequestOffsets
from eddies.connectors.kafka.roles import RoleContext
from eddies.connectors.kafka.stalls import StallGate
from eddies.connectors.kafka.timekeeping import CallDone, Timekeeper
from eddies.connectors.runtime.client import next_batch
from eddies.connectors.runtime.dead_letters import DeadLetters
from eddies.connectors.runtime.outbox import IDLE_FLUSH_S
from eddies.connectors.runtime.records import CANCEL_HEADER, HEADERS, header, journal_partition
from eddies.connectors.runtime.signing import SIGNATURE_HEADER, ResultSigner
from eddies.connectors.runtime.sink import produce
from eddies.events import (
    AgentEvent,
    CallStatus,
    DecodeError,
    DurableCallRequest,
    decode,
    encode,
)

if TYPE_CHECKING:
    from eddies.connectors.observability.prometheus import WorkerMetrics

log = logging.getLogger("eddies.worker")


def _kafka() -> Any:
    import confluent_kafka

    return confluent_kafka


# A request in the executor: the event, its APP.requests partition and offset (None and 0
# for a request handed over in memory) and its record's timestamp (0: unknown).
Item = tuple[AgentEvent, int | None, int]


class KafkaExecutor:
    """Performs requests (``executor_concurrency`` call threads, ``max_calls_in_flight`` on
    the call loop): those of APP.requests
    (its own consumer group), or with ``local`` those its process's orchestrator hands it
    in memory (:meth:`submit`, with partitions gained through :meth:`restore` and lost
    through :meth:`release`)."""

    def __init__(self, ctx: RoleContext, resolver: Resolver | None, local: bool = False,
                 gate: StallGate | None = None, recorded: RecordedCalls | None = None) -> None:
        s = ctx.settings
        self.ctx = ctx
        #: An evaluation's app: the calls answered from a recording, or refused, instead of
        #: being made (connectors/evaluation/call_rules.py).
        self.recorded = recorded
        self.settings = s
        self.names = ctx.names
        self.counters = ctx.counters
        self.resolver = resolver
        self.claimant = ctx.claimant
        #: No call starts after a stall, or past the membership lease, until membership is
        #: confirmed: by this role's loop, or (local mode, ``gate`` given) by the
        #: orchestrator's, whose partitions these are.
        self.gate = gate or StallGate(ctx.stalls)
        #: Split mode: which APP.requests offsets may be committed.
        self.offsets = RequestOffsets()
        self._touched: set[int] = set()  # partitions a rebalance callback took or gave
        #: The member id the group gave what is owned under (see confirm_membership).
        self._member: str | None = None
        #: Whether the group still counts this executor (split mode; ownership.py).
        self.membership = MembershipCheck(self.gate, self._ask_group, self._evicted, self._ping)
        #: Which claimants of watched calls left the app's groups (dead or cut off).
        self.liveness = Liveness(ctx.clients.group_members(),
                                 min_gap_s=max(1.0, ctx.membership.session_timeout_ms / 3000))
        self.assigned = threading.Event()
        self.finished = threading.Event()  # set when run() has returned
        self.inflight: set[CallRef] = set()  # queued or running here
        self.answered = AnsweredHere()  # answered lately, maybe not read back yet
        self.owned: set[int] = set()  # session partitions whose calls this process may start
        self.reread_gaps = ctx.membership.reread_gaps(s)
        self.tail = JournalTail(s, self.names.journal, retention_s=min(60.0, s.journal_retention_ms / 1000),
                                reread_gaps=self.reread_gaps)
        # Call threads report what became of each request here (see CallDone).
        self._done: queue.SimpleQueue[CallDone] = queue.SimpleQueue()
        self._interval = s.commit_interval_ms / 1000
        self._last_commit = time.monotonic()
        # Local mode: each result's delivery report hands it to this process's orchestrator
        # (see local_results.py).
        self.producer = ctx.clients.outbox("executor", successes=local)
        self.dead_letters = DeadLetters(self.producer, self.names.dlq, s.max_record_bytes,
                                        self.counters)
        self.signer: ResultSigner = ctx.signer
        # Started marks must be durable before the side effect, outside any transaction;
        # each one's delivery report gives its offset (for the claim check).
        self.marks = ctx.clients.marks_producer()
        #: Local mode: the results this executor hands the orchestrator of its process.
        self.results = LocalResults(self.producer.delivery.report if local else None)
        self.consumer = None if local else ctx.clients.group_consumer("executor")
        # Local mode: the orchestrator's thread dispatches requests itself (no hop through
        # this executor's loop); the lock guards what dispatching and draining share
        # (inflight, the offsets of done requests).
        self._lock = threading.Lock()
        self._uncommitted = False  # local results produced since the last commit
        # Requests held until their not_before time, no thread each (see Timekeeper).
        self.held: HeldRequests[tuple[AgentEvent, int | None, int, int]] = HeldRequests()
        # Running calls with a timeout_ms: (request, partition, offset) of each.
        self.deadlines: CallDeadlines[tuple[AgentEvent, int | None, int]] = CallDeadlines()
        self._on_loop: set[CallRef] = set()  # the unfinished calls of inflight on the call loop
        #: Claims of non-idempotent calls, and waits for other workers' calls.
        self.claims = CallClaims(settings=s, names=self.names, counters=self.counters,
                                 tail=self.tail, claimant=self.claimant, gate=self.gate,
                                 liveness=self.liveness, marks=self.marks, producer=self.producer,
                                 owns=self._owns, send_result=self._send_result,
                                 answer=self._answer)
        #: The call threads and the call loop, where decided calls are made.
        self.calls = CallRunner(ctx=ctx, resolver=resolver, claims=self.claims, tail=self.tail,
                                deadlines=self.deadlines, done=self._done, lock=self._lock,
                                send_result=self._send_result)
        #: Held requests released when due or dropped; calls abandoned at their timeout.
        self.timers = Timekeeper(counters=self.counters, dead_letters=self.dead_letters,
                                 held=self.held, deadlines=self.deadlines, lock=self._lock,
                                 done=self._done, settle=self.offsets.settle, dispatch=self._dispatch,
                                 send_result=self._send_result,
                                 journal_outcome=self.claims.journal_outcome,
                                 replace_thread=self.calls.replace_thread)
        self.metrics: WorkerMetrics | None = ctx.metrics
        if self.metrics is not None:
            self.metrics.watch_held(self.held, lambda item: item[0].payload.kind.value)
            self.metrics.watch_providers(self.calls.gates.snapshot)

    @property
    def local(self) -> bool:
        """Whether requests come from this process's orchestrator (no consumer of its own)."""
        return self.consumer is None

    # --- partitions --------------------------------------------------------------------------
    def restore(self, partitions: set[int]) -> JournalView:
        """Partitions gained: read their journal to its end, follow it from there, and
        start their calls from now on. Returns what was read (snapshots included)."""
        view = self.ctx.clients.read_journal(partitions)
        if not self.tail.started:
            self.tail.start()
        self.tail.follow(view)
        with self._lock:
            self.owned |= partitions
            # Only where another process worked may an outcome still come from it.
            self.calls.catch_up.gained({p for p in partitions if view.written_by_others(p, self.claimant)})
            self._recut()
        return view

    def release(self, partitions: set[int], *, revoked: bool = False) -> None:
        """Partitions lost: their queued calls are dropped before they start, their
        watched calls left to the new owner; calls already running finish. ``revoked``
        (handed to another member in order, not taken from a process that stood still):
        the idempotent calls running are handed over (CallClaims.hand_over)."""
        with self._lock:
            self.owned -= partitions  # first: see CallRunner._start_asking
            self.claims.release(partitions)
            self._recut()
        running = self.calls.take_asking(partitions) if revoked else []
        if running:
            marked = self.claims.hand_over(running)
            log.info("handed %d calls being made to the next owner of partitions %s",
                     marked, sorted(partitions))
        left = self.tail.release(partitions)
        if left:
            log.info("left %d calls started elsewhere to the new owner of partitions %s",
                     len(left), sorted(partitions))

    def _recut(self) -> None:
        # The share of every provider's limits this executor takes: what it owns of the app.
        self.calls.recut(len(self.owned) / self.settings.partitions)

    def _owns(self, jpart: int) -> bool:
        return jpart in self.owned

    # --- requests ----------------------------------------------------------------------------
    def submit(self, request: AgentEvent) -> None:
        """Local mode: perform ``request``, answer it from the journal, or answer UNKNOWN
        (decided at once, on the caller's thread; the call runs on a call thread)."""
        # Asked now, by the orchestrator that holds its live run: never too old to perform,
        # whatever its due time (a timer of a session on an old logical clock is due at once).
        with self._lock:
            self._dispatch(request, None, 0, int(time.time() * 1000))

    def drop_held(self, refs: Iterable[CallRef]) -> None:
        """Stop holding the requests of calls ``refs`` whose run ended (:mod:`.timekeeping`)."""
        self.timers.drop_held(refs)

    def run(self, stop: threading.Event) -> None:
        """Consume until ``stop`` is set; running calls finish before it returns, queued
        ones are dropped (their sessions' next owner re-issues them)."""
        consumer = self.consumer
        if consumer is None:
            self.assigned.set()
        else:
            consumer.subscribe([self.names.requests], on_assign=self._on_assign,
                               on_revoke=self._on_revoke, on_lost=self._on_lost)
        limit = self.settings.executor_concurrency * 4 + self.settings.max_calls_in_flight
        next_lag = 0.0  # when consumer lag is sampled next (with metrics)
        try:
            while not stop.is_set():
                if consumer is not None:
                    self.membership.check()
                self.timers.release_due()
                self.timers.abandon_expired()
                if consumer is None:  # requests arrive through submit()
                    self._drain(block=True)
                    continue
                room = limit - len(self.inflight)
                if room <= 0:
                    self._drain(block=True)
                    continue
                for msg in next_batch(consumer, min(room, self.settings.batch_size), 0.02,
                                      self._touched):
                    self._handle(msg)
                self._drain(block=False)
                if self.metrics is not None and time.monotonic() >= next_lag:
                    # From its position: requests fetched but still queued are not lag.
                    self.metrics.sample_lag(consumer, self.names.requests, {})
                    next_lag = time.monotonic() + 1.0
        finally:
            with self._lock:
                self.owned.clear()  # queued calls are dropped, not started
            self.calls.close()  # those running finish
            self._drain(block=False, force=True)
            self.producer.flush(10)
            self.tail.stop()
            if consumer is not None:
                consumer.close()
            self.finished.set()

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self._touched |= {tp.partition for tp in partitions}
        self._member = consumer.memberid()
        numbers = {tp.partition for tp in partitions} - self.owned
        if numbers:
            view = self.restore(numbers)
            log.info("executor assigned partitions %s: %d journal records", sorted(numbers),
                     view.records)
        self.assigned.set()

    def _on_revoke(self, consumer: Any, partitions: list[Any], revoked: bool = True) -> None:
        self._drain(block=False, force=True)
        numbers = {tp.partition for tp in partitions}
        self._touched |= numbers
        log.info("executor partitions %s: %s", "revoked" if revoked else "lost", sorted(numbers))
        self.release(numbers, revoked=revoked)
        self.offsets.forget(numbers)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self._on_revoke(consumer, partitions, revoked=False)

    def _ask_group(self) -> tuple[dict[int, int], bool | None]:
        """(The partitions owned; whether the group still counts this executor as a
        member): see ownership.py."""
        held = set(self.owned)
        return dict.fromkeys(held, 0), confirm_membership(
            self.consumer, self.names.requests, held, self.offsets.committed, self._member)

    def _ping(self, timeout: float) -> object:
        """A cheap round trip to the brokers: the requests topic's metadata."""
        return self.marks.list_topics(self.names.requests, timeout=timeout)

    def _evicted(self, asked: float, held: dict[int, int]) -> None:
        """The group evicted this executor (asked at ``asked``): its partitions of then are
        released at once, their queued calls dropped."""
        gone = set(held) & self.owned
        if gone:
            log.warning("executor partitions lost while this process stood still or was cut "
                        "off: %s; their queued calls are dropped", sorted(gone))
            self.counters.inc("partitions_fenced", len(gone))
            self._on_lost(self.consumer, [_kafka().TopicPartition(self.names.requests, p)
                                          for p in sorted(gone)])

    def _handle(self, msg: Any) -> None:
        err = msg.error()
        if err is not None:
            return
        part, offset = msg.partition(), msg.offset()
        if part not in self.owned:
            return  # revoked while this request waited: its next owner reads it again
        self.offsets.read(part, offset)
        if header(msg.headers(), CANCEL_HEADER) is not None:
            self.timers.cancel(msg, part, offset)
            return
        try:
            request = decode(msg.value() or b"")
            req = request.payload
            if not isinstance(req, DurableCallRequest):
                raise DecodeError(f"{request.type} is not a DurableCallRequest")
        except DecodeError as err:
            self.dead_letters.write(msg.value(), msg.key(), f"undecodable request: {err}",
                                    source=msg)
            self.offsets.settle(part, offset)
            return
        with self._lock:
            self._dispatch(request, part, offset, msg.timestamp()[1])

    def _answer(self, result: AgentEvent, part: int | None, offset: int,
                data: bytes | None = None) -> None:
        """Answer a request without performing it (``data``: ``result`` encoded, if it is)."""
        self._send_result(result, data)
        self._uncommitted = True
        self.offsets.settle(part, offset)

    def _dispatch(self, request: AgentEvent, part: int | None, offset: int, produced_ms: int) -> None:
        """Decide a request (under ``_lock``): answer it from the journal, wait for another
        worker's outcome, answer UNKNOWN, or queue it for a call thread."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        ref = (req.call_id, req.attempt)
        if ref in self.held:  # a re-issued request for a call held here: that one counts
            self.offsets.settle(part, offset)
            return
        if req.not_before is not None and req.not_before > time.time() * 1000:
            # A timer, or a signal wait's deadline: held without a thread until it is due
            # (its request offset stays uncommitted meanwhile, so a restart reads it again).
            self.held.hold(req.not_before, ref, (request, part, offset, produced_ms))
            if self.calls.streams is not None:
                self.calls.streams.waiting(request)
            return
        if ref in self.inflight or ref in self.answered:
            # Re-issued for a call queued, running or just answered here: that answer counts.
            self.offsets.settle(part, offset)
            return
        self.tail.recall(ref, journal_partition(request.session_id, self.settings.partitions),
                         self.ctx.clients.read_journal)
        with self.tail.lock:
            verdict, recorded = self.claims.verdict(request, part, offset)
        if verdict == "duplicate":  # the call is watched already: that request answers
            self.offsets.settle(part, offset)
            return
        if verdict == "watched":  # settled when its outcome arrives or its wait ends
            return
        if recorded is not None:
            self._answer(self.claims.recorded(request, recorded), part, offset)
            self.counters.inc("results_resent")
            return
        if self.recorded is not None and (answer := self.recorded.answer(request)) is not None:
            data = encode(answer)  # journaled like a call's outcome: decided once
            self.claims.journal_outcome(request, data)
            self._answer(answer, part, offset, data)
            self.counters.inc("results_from_recording")
            return
        # (A held request's age counts from its due time: a long timer is not too old.)
        asked = max(produced_ms, req.not_before or 0)
        too_old = asked > 0 and time.time() * 1000 - asked > self.settings.journal_retention_ms
        if too_old:
            # A request older than the journal retention may belong to a run whose outcome was
            # already tombstoned: never perform it again; UNKNOWN is ignored by a finished run.
            # Not journaled: that would bring a finished run's key back.
            self._answer(result_event(request, CallStatus.UNKNOWN), part, offset)
            self.counters.inc("results_unknown")
            return
        if verdict == "unknown":  # started by a dead process (of this slot, or one seen gone)
            # Answered with the journal's first outcome once read back: a claimant taken for
            # dead may still journal its own (see CallClaims.decide_unknown).
            self.claims.decide_unknown(request, part, offset, time.monotonic())
            return
        self.inflight.add(ref)
        if (call := self.calls.asynchronous(request)) is not None:
            self._on_loop.add(ref)
            self.calls.on_loop(request, part, offset, call)
            return
        self.calls.on_thread(request, part, offset)

    def _send_result(self, result: AgentEvent, data: bytes | None = None) -> None:
        # Results enter the session machine through the input topic, in partition order.
        if data is None:
            data = encode(result)
        # Signed: the orchestrator accepts results from executors only (connectors/runtime/signing.py).
        headers = [*HEADERS, (SIGNATURE_HEADER, self.signer.sign(data))]
        key = result.session_id.encode()
        if self.local and not self.producer.transactional:
            self.results.sent(data, result, reported=True)
            produce(self.producer, self.names.input, data, key, headers=headers,
                    on_delivery=self.results.delivered)
            return
        if self.local:  # under transactions delivered is not yet committed: read back only
            self.results.sent(data, result)
        produce(self.producer, self.names.input, data, key, headers=headers)

    @property
    def running(self) -> int:
        """How many calls are being performed now, on call threads and the call loop (what a
        stop waits for)."""
        return self.calls.running

    def perform(self, request: AgentEvent, part: int | None, offset: int) -> None:
        """Make one decided call on the calling thread (see :meth:`.CallRunner.perform`)."""
        self.calls.perform(request, part, offset)

    def overloaded(self) -> bool:
        """Local mode: whether the calls waiting in memory are as many as the input should
        let there be: 64 per call thread (``executor_concurrency``) for calls run on
        threads, or on the call loop ``max_calls_in_flight`` running and as many waiting
        for a place. Its orchestrator pauses the input meanwhile."""
        on_loop = len(self._on_loop)
        return (len(self.inflight) - on_loop >= self.settings.executor_concurrency * 64
                or on_loop >= 2 * self.settings.max_calls_in_flight)

    @property
    def awaiting_results(self) -> bool:
        """Local mode: a call runs, or its result is not reported delivered yet."""
        return bool(self.inflight) or self.results.undelivered > 0

    # --- the executor's loop -------------------------------------------------------------------
    def _drain(self, block: bool, force: bool = False) -> None:
        TopicPartition = _kafka().TopicPartition
        done = self._done
        try:
            item: CallDone | None = (
                done.get(timeout=0.05) if block else done.get_nowait())
        except queue.Empty:
            item = None
        now = time.monotonic()
        drained = item is not None
        with self._lock:
            while item is not None:
                part, offset, ref, settled, again = item
                if part is None:
                    self._uncommitted = True
                elif settled:
                    self.offsets.settle(part, offset)
                if settled:
                    self.answered.add(ref, now)
                self.inflight.discard(ref)
                self._on_loop.discard(ref)
                if again is not None:  # decided here, under the lock (see CallClaims.claim)
                    self._dispatch(again, part, offset, 0)
                try:
                    item = done.get_nowait()
                except queue.Empty:
                    item = None
            self.claims.answer_watched(now)
            if self.consumer is not None:  # (local requests come in memory: no offsets)
                self.offsets.advance()
        # Local results need no offsets, only the transaction (if any) committed.
        work = self.offsets.pending or (self._uncommitted and self.producer.transactional)
        due = work and now - self._last_commit >= self._interval
        if not force and not due:
            if drained and not self.inflight and not self.producer.transactional:
                # The last running call ended: no result is coming to batch with these, so
                # they leave now rather than after linger.ms (an idle turn's latency).
                self.producer.flush(IDLE_FLUSH_S)
            else:
                self.producer.poll(0)
            return
        commits = [TopicPartition(self.names.requests, p, o) for p, o in self.offsets.take().items()]
        self._uncommitted = False
        self._last_commit = now
        try:  # results durable before their requests are committed
            self.producer.commit(self.consumer, offsets=commits, sync=force)
        except _kafka().KafkaException as err:
            if self.producer.transactional:
                raise  # see Outbox.commit: stop, restart, recover
            log.info("executor commit skipped: %s", err)  # re-delivery is safe
        self.producer.poll(0)
