"""When an orchestrator saves sessions and commits its input offsets, and what it writes.

Every ``commit_interval_ms`` the orchestrator flushes what it produced, writes a snapshot
of each session changed since the last commit that is between runs to ``APP.journal`` (one
in the middle of a run waits for the run's end, at most ``snapshot_delay_ms``), and only
then commits its input offsets (as Kafka Streams does), never past the first record of a
session that changed since its last snapshot. Each snapshot is stamped with its
partition's epoch, the input offset it reflects and the session's step (:mod:`.epochs`);
each tombstone with the epoch. Nothing is written for a partition the
:class:`~.ownership.Ownership` does not hold.

Retention: a finished run's call outcomes and started marks are tombstoned
``journal_retention_ms`` after it finished (by then no redelivered request can ask for
them), and a session idle for ``session_ttl_ms`` is closed: its snapshot is tombstoned, so
the compacted journal does not grow without bound. Example::

    checkpoints.applied(sid, partition, offset, ended)   # after each record
    if checkpoints.due(now):
        checkpoints.commit(consumer)
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from eddies.connectors.journal.epochs import Stamp, epoch_headers, snapshot
from eddies.connectors.journal.reading import CallRef
from eddies.connectors.kafka.ownership import Ownership
from eddies.connectors.kafka.session_step import SessionStep
from eddies.connectors.kafka.stalls import StallWatch
from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.outbox import Outbox
from eddies.connectors.runtime.positions import Positions
from eddies.connectors.runtime.records import (
    finished_run_keys,
    journal_partition,
    snapshot_key,
)
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.sink import produce
from eddies.engine.state import RunState
from eddies.events.ids import run_of_call


def _kafka() -> Any:
    import confluent_kafka

    return confluent_kafka


class Checkpoints:
    """Snapshots, tombstones and input-offset commits of one orchestrator."""

    def __init__(self, settings: Settings, journal: str, input_topic: str, producer: Outbox,
                 step: SessionStep, ownership: Ownership, positions: Positions,
                 counters: Counters, stalls: StallWatch) -> None:
        s = settings
        self.journal = journal
        self.input_topic = input_topic
        self.partitions = s.partitions
        self.producer = producer
        self.step = step
        self.ownership = ownership
        self.positions = positions
        self.counters = counters
        self.stalls = stalls
        self.dirty: dict[str, int] = {}  # session -> input partition: changed since the last commit
        # Sessions in the middle of a run are not snapshotted at every commit (most runs end
        # within seconds, and their snapshot then is the one that counts): per partition,
        # session -> (offset of its first record since its last snapshot, since when). A
        # partition's committed offset stays at its first such record, so a restart re-reads
        # from there; one unsaved for longer than ``snapshot_delay_ms`` is snapshotted anyway.
        self._unsaved: dict[int, dict[str, tuple[int, float]]] = {}
        self._delay = s.snapshot_delay_ms / 1000
        self._delay_deadline = float("inf")  # when the oldest unsaved session is due
        #: How often a commit may happen (``commit_interval_ms``).
        self.interval_s = s.commit_interval_ms / 1000
        self.last_commit = time.monotonic()
        # (when, session, journal keys) of finished runs, tombstoned after the retention.
        self._finished: deque[tuple[float, str, list[bytes]]] = deque()
        self._retention = s.journal_retention_ms / 1000
        self._ttl_ms = s.session_ttl_ms
        self._sweep_every = min(60.0, s.session_ttl_ms / 10_000)  # a tenth of the TTL, at most 1 min
        self._last_sweep = time.monotonic()
        #: The offsets committed last, per input partition (committing them again shows
        #: that the group still counts this process as a member).
        self.committed: dict[int, int] = {}
        # Per session restored here, the epochs of its snapshot keys written before (by
        # earlier owners): tombstoned once it is saved under this owner's epoch.
        self._superseded: dict[str, list[int]] = {}

    # --- what the loop reports ------------------------------------------------------------
    def applied(self, sid: str, part: int, offset: int, ended: list[RunState]) -> None:
        """The record at ``offset`` of ``part`` changed session ``sid``; ``ended``: runs
        that ended, whose journal records expire after the retention."""
        for run in ended:
            self.run_ended(sid, run)
        self.dirty[sid] = part
        waiting = self._unsaved.get(part)
        if waiting is None:
            waiting = self._unsaved[part] = {}
        if sid not in waiting:
            now = time.monotonic()
            waiting[sid] = (offset, now)
            if self._delay_deadline == float("inf"):
                self._delay_deadline = now + self._delay

    def run_ended(self, sid: str, run: RunState) -> None:
        """A run is over: its calls' journal records expire after the retention."""
        if run.calls:
            self._finished.append((time.monotonic(), sid, finished_run_keys(run.calls)))

    def restored(self, sid: str, older: list[int], calls: list[tuple[CallRef, bytes]]) -> None:
        """``sid`` was restored (or not: it had no snapshot, or an unreadable one): its
        snapshots under older epochs' keys (``older``) are tombstoned once it is saved
        under this one's (so the journal keeps one per session); the journal keys of its
        calls (``calls``: each call's reference and key) whose run is over expire as if
        their run had just finished."""
        if older:
            self._superseded[sid] = older
        state = self.step.states.get(sid)
        current = state.run.number if state is not None and state.run is not None else None
        keys = [key for (cid, _attempt), key in calls if current is None or run_of_call(cid) < current]
        if keys:
            self._finished.append((time.monotonic(), sid, keys))

    def forget(self, partitions: set[int]) -> None:
        """``partitions`` are no longer held: nothing of theirs is saved or committed."""
        for sid in [s for s in self._superseded if journal_partition(s, self.partitions) in partitions]:
            del self._superseded[sid]
        for part in partitions:
            self.positions.forget(part)
            self._unsaved.pop(part, None)
            self.committed.pop(part, None)
        for sid in [s for s, part in self.dirty.items() if part in partitions]:
            del self.dirty[sid]

    # --- commits ---------------------------------------------------------------------------
    def due(self, now: float) -> bool:
        """Whether a commit is due: something changed, or delayed snapshots, tombstones or
        the idle-session sweep are due, and the commit interval has passed."""
        if now - self.last_commit < self.interval_s:
            return False
        if self.dirty or now >= self._delay_deadline:
            return True
        if self._finished and now - self._finished[0][0] >= self._retention:
            return True
        return bool(now - self._last_sweep >= self._sweep_every)

    def commit(self, consumer: Any, sync: bool = False, everything: bool = False) -> bool:
        """Snapshot the sessions changed since the last commit that are between runs (all of
        them with ``everything``, and those unsaved for too long), flush, commit offsets.
        False when nothing was written: ownership is in doubt after a stall, or after a
        flush that outlasted the group's patience (the caller confirms it, then commits)."""
        prod = self.producer
        ownership = self.ownership
        # A snapshot must never be durable before the events it reflects: if the process
        # died with the snapshot delivered but an output still queued, a restart would
        # treat the input as done and the output would be lost. (Records to different
        # topics travel in different batches, so a single flush does not order them.)
        # So: flush, then write the snapshots.
        flushing = time.monotonic()
        prod.flush(30)
        if time.monotonic() - flushing > self.stalls.threshold_s:
            self.stalls.note()  # most likely cut off from the brokers meanwhile
        if ownership.gate.unsure():
            return False
        now = time.monotonic()
        unsaved = self._unsaved
        due: list[str] = []
        for sid, part in self.dirty.items():
            state = self.step.states.get(sid)
            if state is None or everything or state.idle:
                unsaved.get(part, {}).pop(sid, None)
                due.append(sid)
        self.dirty.clear()
        deadline = float("inf")
        for waiting in unsaved.values():
            while waiting:  # oldest first (insertion order = arrival order)
                sid, (_, since) = next(iter(waiting.items()))
                if not everything and now - since < self._delay:
                    deadline = min(deadline, since + self._delay)
                    break
                del waiting[sid]
                due.append(sid)
        self._delay_deadline = deadline
        parts = self.partitions
        positions = self.positions.next
        failed = self.counters.get("sessions_failed")
        snapshots: list[tuple[int, str, bytes]] = []
        for sid in due:
            jpart = journal_partition(sid, parts)
            data, ended = self.step.snapshot_of(sid, (self.journal, jpart))
            for run in ended:
                self.run_ended(sid, run)
            state = self.step.states.get(sid)
            if data is not None and state is not None and ownership.holds(jpart):
                stamp = Stamp(ownership.epoch(jpart), positions.get(jpart, -1), state.seq)
                snapshots.append((jpart, sid, snapshot(data, stamp)))
        if self.counters.get("sessions_failed") != failed:
            prod.flush(30)  # the events that failed a session too large to save go first
        superseded = self._superseded
        for jpart, sid, value in snapshots:
            epoch = ownership.epoch(jpart)
            produce(prod, self.journal, value, snapshot_key(sid, epoch), partition=jpart)
            if sid in superseded:  # after it: the partition keeps that order
                self._tombstone_snapshots(sid, jpart, superseded.pop(sid))
        self.counters.inc("snapshots", len(snapshots))
        while self._finished and now - self._finished[0][0] >= self._retention:
            _, sid, keys = self._finished.popleft()
            jpart = journal_partition(sid, parts)
            if not ownership.holds(jpart):
                continue  # its new owner expires them
            headers = epoch_headers(ownership.epoch(jpart))
            for key in keys:  # after the snapshot: the partition keeps that order
                produce(prod, self.journal, None, key, partition=jpart, headers=headers)
            self.counters.inc("tombstones", len(keys))
        if now - self._last_sweep >= self._sweep_every:
            self._last_sweep = now
            self._close_idle_sessions()
        # Everything the applied records caused is durable before their offsets are; a lost
        # commit only means re-delivery, which the machine drops.
        TopicPartition = _kafka().TopicPartition
        offsets = []
        for p, o in positions.items():
            if not ownership.holds(p):
                continue
            held = unsaved.get(p)
            if held:  # not past the first record of a session with no snapshot since
                o = min(o, min(first for first, _ in held.values()))
            offsets.append(TopicPartition(self.input_topic, p, o))
        prod.commit(consumer, offsets=offsets, sync=sync)
        for tp in offsets:
            self.committed[tp.partition] = tp.offset
        self.last_commit = time.monotonic()
        return True

    def _tombstone_snapshots(self, sid: str, jpart: int, epochs: list[int]) -> None:
        """Tombstone ``sid``'s snapshot keys of ``epochs`` (stamped with this epoch)."""
        headers = epoch_headers(self.ownership.epoch(jpart))
        for epoch in epochs:
            produce(self.producer, self.journal, None, snapshot_key(sid, epoch), partition=jpart,
                    headers=headers)
        self.counters.inc("tombstones", len(epochs))

    def _close_idle_sessions(self) -> None:
        """Tombstone the snapshots of sessions idle longer than ``session_ttl_ms``."""
        now = time.time() * 1000
        parts = self.partitions
        closed = []
        for sid in self.step.idle_since(now - self._ttl_ms, now):
            jpart = journal_partition(sid, parts)
            if not self.ownership.holds(jpart):
                continue
            older = self._superseded.pop(sid, [])
            self._tombstone_snapshots(sid, jpart, [self.ownership.epoch(jpart), *older])
            closed.append(sid)
        self.step.close(closed)
        self.counters.inc("sessions_closed", len(closed))
