"""The orchestrator role: drives the session machine over ``APP.input``.

``APP.input`` carries everything that enters the session machine: InputEvents from users
and DurableCallResults from executors. One topic means one order per partition, so
re-processing after a crash applies the same records in the same order and emits the same
event ids. What the machine emits is produced at once (every event to ``app.events``, the
history; requests to ``app.requests`` or to its own executor in memory; outputs to
``app.output``). After a crash the orchestrator re-reads from the last commit: records
already reflected in a snapshot are dropped by the machine (known input ids, calls that
have their outcome), the others are applied again in the same order and emit the same event
ids, so a consumer that drops seen event ids sees each event once.

The role is four parts, as Kafka Streams splits its stream thread:

- this loop: consumes, hands each record of a held partition to the step, commits when due;
- :class:`~.ownership.Ownership`: the partitions held and their epochs; every write asks it;
- :class:`~.session_step.SessionStep`: one record through the door, the machine, the router;
- :class:`~.checkpoints.Checkpoints`: snapshots, tombstones and offset commits.

Partitions move incrementally (cooperative-sticky). A gained partition gets an epoch
marker in the journal, then ``app.journal`` is read to PARTITION_EOF past the marker and
its sessions are restored from their snapshots, each when a record of it arrives or, for
the others, a slice at a time between batches (:mod:`.restoring`), and their requests
without a recorded outcome issued again;
a revoked one is committed and snapshotted first; the others keep running through a
rebalance. A lost one (the group went on without this worker) is dropped without writing
anything: its new owner may already be writing. After this process stood still or waited
on the brokers past the group's patience, it applies nothing and writes nothing until the
broker has accepted a commit from it again (a member it evicted is refused): records
fetched meanwhile wait, and partitions it lost are dropped, not written.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from eddies.connectors.journal.epochs import ORCHESTRATOR, state_of
from eddies.connectors.journal.reading import JournalView
from eddies.connectors.kafka.checkpoints import Checkpoints
from eddies.connectors.kafka.executor import KafkaExecutor
from eddies.connectors.kafka.ownership import MembershipCheck, Ownership, confirm_membership
from eddies.connectors.kafka.restoring import Gained, Restoring
from eddies.connectors.kafka.roles import RoleContext
from eddies.connectors.kafka.session_step import SessionStep
from eddies.connectors.observability.otel_export import LiveSpans, live_spans
from eddies.connectors.runtime.admission import Admission
from eddies.connectors.runtime.client import PARTITION_EOF, next_batch
from eddies.connectors.runtime.dead_letters import DeadLetters
from eddies.connectors.runtime.outbox import IDLE_FLUSH_S
from eddies.connectors.runtime.positions import Positions
from eddies.connectors.runtime.routing import Router
from eddies.connectors.runtime.signing import identity_signer
from eddies.engine import SessionMachine, SessionState
from eddies.events import partition_for

if TYPE_CHECKING:
    from eddies.connectors.observability.prometheus import WorkerMetrics

log = logging.getLogger("eddies.worker")

#: On stop, how long running calls may take to finish before the worker leaves its group.
STOP_CALLS_WAIT_S = 20.0
#: A batch this small means the input had no backlog: what it produced is flushed at once.
IDLE_BATCH = 16
#: Between batches, how long the loop restores sessions of gained partitions (restoring.py)
#: before it reads again: a record waits at most this much longer meanwhile.
RESTORE_SLICE_S = 0.02


def _kafka() -> Any:
    import confluent_kafka

    return confluent_kafka


class Orchestrator:
    """Consumes inputs and call results, drives the session machine, produces its output."""

    def __init__(self, ctx: RoleContext) -> None:
        s = ctx.settings
        self.settings = s
        self.names = ctx.names
        self.counters = ctx.counters
        self.metrics: WorkerMetrics | None = ctx.metrics
        self.stalls = ctx.stalls
        metrics = self.metrics
        self.machine = SessionMachine(ctx.plan, None if metrics is None else metrics.action_metric,
                                      max_memory_bytes=s.max_memory_bytes)
        # The OpenTelemetry export (otel_endpoint, or the standard OTEL_EXPORTER_OTLP_*
        # variables): None, and nothing of OpenTelemetry imported, unless configured. First:
        # a missing package stops the worker before it has clients to close.
        self.spans: LiveSpans | None = live_spans(s, ctx.plan, self.counters)
        self.clients = ctx.clients
        self.producer = ctx.clients.outbox("orchestrator")
        self.consumer = ctx.clients.group_consumer("orchestrator")
        self.ownership = Ownership(ORCHESTRATOR, ctx.claimant, self.names.journal,
                                   ctx.clients.marks_producer(), ctx.stalls)
        self.dead_letters = DeadLetters(self.producer, self.names.dlq, s.max_record_bytes,
                                        self.counters)
        router_args = (s, self.names, self.producer, self.counters, self.dead_letters)
        if metrics is None:
            self.router = Router(*router_args)
        else:
            from eddies.connectors.observability.prometheus import MeteredRouter

            self.router = MeteredRouter(*router_args, metrics=metrics)
        self.router.spans = self.spans
        admission = Admission(partitions=s.partitions, max_record_bytes=s.max_record_bytes,
                              agent_name=ctx.plan.agent_name, signer=ctx.signer,
                              input_topic=self.names.input, counters=self.counters,
                              identities=identity_signer(s.identity_key_env,
                                                         allow_dev_key=ctx.membership.embedded))
        self.step = SessionStep(self.machine, self.router, admission, self.counters, metrics)
        if metrics is not None:
            metrics.watch_sessions(self.machine.stats, self.step.states)
        # Next offset per input partition of the records actually applied. Offsets are
        # committed from here, never from consumer positions: a rebalance callback can run
        # while records already returned by the consumer wait to be applied. Skipped offsets
        # are re-read on the embedded broker only (positions.py).
        self._positions = Positions(reread_gaps=ctx.membership.reread_gaps(s))
        self.checkpoints = Checkpoints(s, self.names.journal, self.names.input, self.producer,
                                       self.step, self.ownership, self._positions, self.counters,
                                       ctx.stalls)
        #: Whether the group still counts this process (ownership.py).
        self.membership = MembershipCheck(self.ownership.gate, self._ask_group, self._evicted,
                                          self._ping)
        self._assignments = 0  # partitions gained so far (a paused input pauses new ones too)
        self.assigned = threading.Event()
        # Records fetched while ownership was in doubt (after a stall): applied, in order,
        # once it is confirmed; those of partitions found lost are dropped.
        self._backlog: list[Any] = []
        #: The sessions of gained partitions not restored yet (restoring.py).
        self.restoring = Restoring(self.step, self.checkpoints, self.counters,
                                   self.router.request, s.partitions)
        self._executor: KafkaExecutor | None = None
        # Partitions a rebalance callback took or gave during the current batch.
        self._touched: set[int] = set()
        #: The member id the group gave what is held under (see confirm_membership).
        self._member: str | None = None
        self._paused = False  # input paused (busy local executor, or ownership in doubt)
        self._paused_at = 0  # self._assignments when it was paused
        self._next_lag = 0.0

    @property
    def executor(self) -> KafkaExecutor | None:
        """The in-process executor (role "all"), given requests in memory; None: they go
        to APP.requests for executor processes."""
        return self._executor

    @executor.setter
    def executor(self, executor: KafkaExecutor | None) -> None:
        self._executor = self.router.executor = executor

    @property
    def partitions(self) -> set[int]:
        """The input partitions held."""
        return self.ownership.held

    @property
    def states(self) -> dict[str, SessionState]:
        """The sessions' states, by session id."""
        return self.step.states

    def run(self, stop: threading.Event) -> None:
        """Consume until ``stop`` is set."""
        self.open()
        try:
            while not stop.is_set():
                self.turn()
        finally:
            stop.set()  # also when this loop failed: the executor winds down too
            self.close()

    def open(self) -> None:
        """Join the group (partitions arrive in :meth:`turn`)."""
        self.consumer.subscribe([self.names.input], on_assign=self._on_assign,
                                on_revoke=self._on_revoke, on_lost=self._on_lost)
        self._paused = False
        self._paused_at = 0
        self._next_lag = 0.0  # when consumer lag is sampled next (every second, with metrics)

    def turn(self) -> None:
        """One turn of the loop: check membership when due (a re-commit after a stall, a
        ping every third of the lease), take a batch, apply it, commit when due."""
        gate = self.ownership.gate
        self.membership.check()
        unsure = gate.unsure()
        local = self.executor  # set only with role "all": the local executor
        # Requests handed to this process's executor wait in memory, not in Kafka: past so
        # many unfinished calls the input is paused until calls finish (slow models, bursts).
        busy = local is not None and local.overloaded()
        hold = unsure or busy
        if hold != self._paused or (hold and self._paused_at != self._assignments):
            assigned = self.consumer.assignment()
            if hold:
                self.consumer.pause(assigned)
                if busy and not self._paused:
                    self.counters.inc("input_pauses")
            else:
                self.consumer.resume(assigned)
            self._paused = hold
            self._paused_at = self._assignments
        # While a local call runs or its result is on its way, the wait for input also ends
        # when the result's delivery is reported (see local_results.py).
        results, woken = None, None
        if local is not None:
            results = local.results
            if local.awaiting_results or results.has_delivered():
                woken = results.has_delivered
        restoring = self.restoring
        wait = 0.0 if restoring.pending else 0.05
        msgs = next_batch(self.consumer, self.settings.batch_size, wait, self._touched, woken)
        if unsure:
            self._backlog += msgs  # fetched before the pause took effect
        else:
            if self._backlog:
                msgs, self._backlog = self._backlog + msgs, []
            if msgs:
                self.process(msgs)
        taken = 0
        if results is not None:
            delivered = results.take_delivered()
            if delivered and not unsure:  # (when unsure, they are read in order later)
                taken = self._apply_delivered(delivered)
        if restoring.pending and not unsure:  # between batches, until none is left
            restoring.take_some(RESTORE_SLICE_S)
        if 0 < len(msgs) + taken < IDLE_BATCH and not self.producer.transactional:
            # The consumer had no backlog: nothing will come to batch with what this batch
            # produced, so it leaves now (one round trip) rather than after linger.ms.
            self.producer.flush(IDLE_FLUSH_S)
        else:
            self.producer.poll(0)
        now = time.monotonic()
        if not unsure and self.checkpoints.due(now):
            self._checkpoint()
        metrics = self.metrics
        if metrics is not None and now >= self._next_lag:
            metrics.sample_lag(self.consumer, self.names.input, self._positions.next)
            self._next_lag = now + 1.0

    def close(self) -> None:
        """Let the local executor's running calls finish, save every session, commit, leave."""
        local = self.executor
        # Its running calls journal their outcomes before this worker leaves the group,
        # so the next owner of their sessions finds them.
        if local is not None and not local.finished.wait(STOP_CALLS_WAIT_S):
            log.warning("stopping with %d calls still running after %.0f s: the next owners "
                        "of their sessions wait for their outcomes (outcome_wait_ms), then "
                        "treat them as unknown", len(local.inflight), STOP_CALLS_WAIT_S)
        self._checkpoint(everything=True)
        self.consumer.close()
        if self.spans is not None:  # the runs that ended before the stop go out
            self.spans.close()

    # --- ownership -----------------------------------------------------------------------
    def _ask_group(self) -> tuple[dict[int, int], bool | None]:
        """(What is held, by epoch; whether the group still counts this process as a
        member): see ownership.py."""
        held = dict(self.ownership.epochs)
        return held, confirm_membership(self.consumer, self.names.input, set(held),
                                        self.checkpoints.committed, self._member)

    def _ping(self, timeout: float) -> object:
        """A cheap round trip to the brokers: the input topic's metadata."""
        return self.ownership.marks.list_topics(self.names.input, timeout=timeout)

    def _evicted(self, asked: float, held: dict[int, int]) -> None:
        """The group evicted this process (asked at ``asked``, holding ``held``): what is
        still held under those epochs is dropped without a write."""
        gone = {p for p, epoch in held.items() if self.ownership.epoch(p) == epoch}
        if gone:
            log.warning("orchestrator partitions lost while this process stood still or was "
                        "cut off: %s; dropped without writing", sorted(gone))
            self.counters.inc("partitions_fenced", len(gone))
            self._drop(gone)

    def _checkpoint(self, sync: bool = False, everything: bool = False) -> None:
        """Commit (see checkpoints.py) once ownership is not in doubt: shown now, on this
        thread (a revoke's commit after a stall), or the partitions dropped as lost."""
        for _ in range(2):  # a flush may outlast the group's patience: confirm, then again
            if self.ownership.gate.unsure() and not self.membership.confirm():
                log.info("orchestrator: ownership not confirmed yet (a stall, or no answer)")
                return
            if self.checkpoints.commit(self.consumer, sync=sync, everything=everything):
                return

    # --- partitions ----------------------------------------------------------------------
    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        numbers = {tp.partition for tp in partitions}
        self._touched |= numbers
        self._member = consumer.memberid()
        again = numbers & self.ownership.held
        if again:  # given anew without being taken first: what is held of them is stale
            log.warning("orchestrator partitions %s assigned again before they were revoked or "
                        "lost here; restored anew", sorted(again))
            self._drop(again)
        if not numbers:
            self.assigned.set()
            return
        began = time.monotonic()
        # Marked first: whatever an earlier owner writes after these markers is refused.
        epochs = self.ownership.claim(numbers)
        local = self.executor
        # It follows their journal from there on, and owns their calls.
        view = local.restore(numbers) if local is not None else self.clients.read_journal(numbers)
        moved = {p for p in numbers if view.epoch(ORCHESTRATOR, p) != epochs[p]}
        if moved:
            # Another worker marked them since: one that has not heard yet that the group
            # moved them on (it is told at its next confirmation). The group gave them to
            # this one now: mark again, so that what that one writes is refused, not ours.
            log.warning("orchestrator partitions %s were marked by another worker while they "
                        "were restored here; marked again", sorted(moved))
            epochs.update(self.ownership.claim(moved))
            view = local.restore(numbers) if local is not None else self.clients.read_journal(numbers)
        read = time.monotonic()
        if view.unreadable:
            log.error("%d records of %s have keys no worker writes; skipped", view.unreadable,
                      self.names.journal)
        if view.fenced:
            log.warning("%d records of %s were written by workers that had lost their "
                        "partition; refused", view.fenced, self.names.journal)
            self.counters.inc("records_fenced", view.fenced)
        gained = self.restoring.gained(view, numbers, began)
        self._rebuild(view, gained)
        self.producer.flush(10)
        done = time.monotonic()
        log.info("orchestrator assigned partitions %s: %d journal records read in %.0f ms, "
                 "ready in %.0f ms; %d sessions restored as their records arrive or between "
                 "batches", sorted(numbers), view.records, (read - began) * 1000,
                 (done - began) * 1000, len(self.restoring.pending))
        self._assignments += 1
        self.assigned.set()

    def _rebuild(self, view: JournalView, gained: Gained) -> None:
        """Rebuild the sessions of ``view`` whose newest snapshot was refused while the one
        kept is older (a compacted journal may keep only the refused one) from their
        history, and issue their calls without an outcome again."""
        stale = list(view.stale)
        if not stale:
            return
        log.warning("%d sessions' newest snapshots were written by a worker that had lost "
                    "their partition; rebuilt from their history: %s", len(stale),
                    sorted(stale)[:10])
        seen = time.time() * 1000
        by_partition: dict[int, set[str]] = {}
        for sid in stale:
            by_partition.setdefault(partition_for(sid, self.settings.partitions), set()).add(sid)
        for part, sids in by_partition.items():
            histories = self.clients.read_history(part, sids)
            for sid in sids:
                kept = view.snapshots.get(sid)
                requests = self.step.rebuild(
                    sid, None if kept is None else state_of(kept), histories[sid], seen)
                self.restoring.restored(sid, requests, gained)
        self.counters.inc("sessions_rebuilt", len(stale))

    def _caught_up(self, part: int, end: int) -> None:
        """The input of ``part`` was read to its end (``end``) after it was gained."""
        back = self._positions.gap_at_end(part, end)
        if back is not None:  # skipped records at the end (positions.py): those first
            self.consumer.seek(_kafka().TopicPartition(self.names.input, part, back))
            return
        self.restoring.caught_up(part)

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        consumer.resume(partitions)  # see _drop
        self._touched |= {tp.partition for tp in partitions}
        numbers = {tp.partition for tp in partitions} & self.ownership.held
        if not numbers:
            return
        began = time.monotonic()
        self._checkpoint(sync=True, everything=True)
        self._drop(numbers, revoked=True)
        log.info("orchestrator partitions revoked: %s (committed in %.0f ms)", sorted(numbers),
                 (time.monotonic() - began) * 1000)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        consumer.resume(partitions)  # see _drop
        self._touched |= {tp.partition for tp in partitions}
        numbers = {tp.partition for tp in partitions} & self.ownership.held
        log.warning("orchestrator partitions lost (the group went on without this worker): %s; "
                    "their sessions are dropped here without a snapshot", sorted(numbers))
        self._drop(numbers)

    def _drop(self, numbers: set[int], revoked: bool = False) -> None:
        """Forget the sessions of ``numbers``; the local executor starts none of their calls
        (``revoked``: handed to another member in order; see KafkaExecutor.release)."""
        numbers = self.ownership.drop(numbers)
        # A pause outlives an assignment in librdkafka: given back later, a partition
        # paused now would never be read again.
        self.consumer.resume([_kafka().TopicPartition(self.names.input, p) for p in sorted(numbers)])
        self.restoring.drop(numbers)
        if self._backlog:  # fetched in doubt, of a tenure that is over
            self._backlog = [m for m in self._backlog if m.partition() not in numbers]
        if self.executor is not None:
            self.executor.release(numbers, revoked=revoked)
        self.checkpoints.forget(numbers)
        gone = self.step.drop(numbers, self.settings.partitions)
        if self.spans is not None:
            self.spans.forget(gone)

    # --- records -------------------------------------------------------------------------
    def process(self, msgs: list[Any]) -> None:
        """Apply a batch of consumed records, as the loop does (those of partitions not
        held are skipped)."""
        reread: set[int] = set()
        held = self.ownership.epochs
        local = self.executor
        results = None if local is None else local.results
        step, checkpoints, positions = self.step, self.checkpoints, self._positions
        applied_up_to = positions.next  # per partition, the offset after the last applied
        # (A pause in the middle of a batch is noticed at the next turn: what the rest of
        # the batch emits meanwhile has the same ids as its next owner's, and no snapshot
        # or call of it goes out before a confirmation.)
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() != PARTITION_EOF:
                    log.warning("consumer error: %s", err)
                    self.counters.inc("consumer_errors")
                elif self.restoring.reading(msg.partition()) and msg.partition() in held:
                    self._caught_up(msg.partition(), msg.offset())
                continue
            part = msg.partition()
            if part not in held or part in reread:
                continue  # revoked while this record waited: its next owner reads it again
            offset = msg.offset()
            expected = applied_up_to.get(part, offset)
            if offset != expected:
                if offset < expected:
                    continue  # applied already, when its delivery was reported
                back = positions.gap(part, offset)
                if back is not None:  # see positions.py: read again once from the gap
                    self.counters.inc("input_gaps")
                    log.debug("input partition %d: offsets %d-%d skipped by the fetch; reading "
                              "again", part, back, offset - 1)
                    self.consumer.seek(_kafka().TopicPartition(self.names.input, part, back))
                    reread.add(part)
                    continue
            value = msg.value()
            decoded = results.event(value) if results is not None and value else None
            changed = step.handle(msg, decoded)
            if changed is not None:
                checkpoints.applied(changed[0], part, offset, changed[1])
            applied_up_to[part] = offset + 1  # (Positions.advance, without the call per record)

    def _apply_delivered(self, msgs: list[Any]) -> int:
        """Apply results of the local executor reported delivered, each one only if it is the
        next record of its partition here: nothing before it is unread, so this is the
        order a reader of the partition sees. The others are applied when read."""
        held, positions, local = self.ownership.epochs, self._positions, self.executor
        assert local is not None
        taken = 0
        results = local.results
        for msg in msgs:
            part, offset = msg.partition(), msg.offset()
            if part not in held or positions.next.get(part) != offset:
                continue
            # Only with the event kept when it was signed here: a delivery report carries no
            # headers, so a record whose event is gone (taken when the record was read and
            # applied in an earlier tenure of the partition) could not show its signature.
            # Read, it can.
            event = results.event(msg.value())
            if event is None:
                continue
            changed = self.step.handle(msg, event)
            if changed is not None:
                self.checkpoints.applied(changed[0], part, offset, changed[1])
            positions.advance(part, offset)
            taken += 1
        if taken:
            self.counters.inc("results_applied_on_delivery", taken)
        return taken
