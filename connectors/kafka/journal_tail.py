"""Following the journal partitions an executor owns, so that a call is decided on the
journal as it is now, not as it was read at assignment.

The tail is a consumer (assigned, no group) on ``APP.journal`` that keeps reading the
partitions it follows and folds their call records (outcomes, the first started mark of
each call) into one :class:`JournalView`. Executors use it three ways:

- ``wait_past(partition, offset)``: the claim check. After appending its started mark an
  executor waits until the tail has read past that mark, then looks at which mark came
  first (:mod:`.claims`).
- ``watch(ref, ...)``: a call another worker started: its outcome, when the tail reads it,
  is handed back through ``arrived``; a watch past its deadline through ``expired``.
- ``follow`` / ``release``: partitions gained (after their journal was read to its end)
  and lost; a released partition is still read while a claim on it is being checked.

Example::

    tail = JournalTail(settings, names.journal).start()
    tail.follow(read_journal(settings, names.journal, {0, 1}))
    if tail.wait_past(0, mark_offset, timeout=30):
        with tail.lock:
            first = tail.view.started[ref]
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from eddies.connectors.journal.claims import Claimant
from eddies.connectors.journal.reading import CallRef, JournalView, fold
from eddies.connectors.runtime.client import PARTITION_EOF, next_batch
from eddies.connectors.runtime.positions import Positions
from eddies.connectors.runtime.settings import Settings

log = logging.getLogger("eddies.worker")

#: The read time of a call learned by a restore: kept while its partition is followed.
RESTORED = float("inf")
#: How long a recall's read may go without progress: it holds its executor's lock (a
#: broker cut off then costs the executor this long once, not a minute).
RECALL_TIMEOUT_S = 5.0


@dataclass(slots=True)
class Watch:
    """A call whose outcome another worker owes: where it is, until when, what to hand
    back (``item``, the caller's) when it arrives or expires, and who owes it."""

    partition: int
    deadline: float
    item: Any
    claimant: Claimant | None = None


class JournalTail:
    """Reads followed journal partitions as they grow; see the module docstring."""

    def __init__(self, settings: Settings, topic: str, retention_s: float = 60.0,
                 reread_gaps: bool = False) -> None:
        self.settings = settings
        self.topic = topic
        #: Guards ``view`` and the watches; notified whenever the tail has read further.
        self.lock = threading.Condition()
        self.view = JournalView()
        #: Items of watched calls whose outcome arrived: (item, outcome bytes).
        self.arrived: queue.SimpleQueue[tuple[Any, bytes]] = queue.SimpleQueue()
        self._watches: dict[CallRef, Watch] = {}
        self._positions = Positions(reread_gaps)
        # Partition -> the offset it has been read up to (exclusive), its end included when
        # the reading reached it (past a transaction's marker, which is not a record).
        self._reached: dict[int, int] = {}
        self._following: set[int] = set()
        self._leaving: set[int] = set()  # released, still read while claims on them are checked
        self._claims: dict[int, int] = {}  # partition -> claims being checked
        self._commands: queue.SimpleQueue[tuple[str, dict[int, int]]] = queue.SimpleQueue()
        # Outcomes are kept this long after they were read: enough for requests re-issued
        # or redelivered soon; a request issued anew much later (a restarted orchestrator, a
        # Flink job restored from a checkpoint) finds the call's started mark, which is kept
        # while the partition is followed, and has its partition read again (recall). A
        # partition gained later is read from its beginning again.
        self._kept: deque[tuple[float, CallRef]] = deque()
        # The read that keeps each call's outcome (its entry of _kept), or RESTORED: an
        # outcome a gained partition's restore (re-)learned is kept while the partition is,
        # and an entry of an earlier tenure must not take it away (a chaos round saw an executor that lost
        # and regained its partitions forget a call it had made 60 s before, and make it
        # again when its request was issued anew).
        self._read_at: dict[CallRef, float] = {}
        self._retention = retention_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Any = None
        self._ends: Any = None  # asks the journal's ends (caught_up), made at the first ask
        self._asking = threading.Lock()
        self._assigned: set[int] = set()  # of the consumer (only the reading thread touches it)
        self.error: BaseException | None = None

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> JournalTail:
        """Start the reading thread."""
        from confluent_kafka import Consumer

        self._consumer = Consumer(self.settings.client_config(**{
            "group.id": f"{self.settings.app}.journal-tail",  # never joins: assign only
            "enable.auto.commit": False, "enable.partition.eof": True,
            "fetch.wait.max.ms": self.settings.fetch_wait_ms,
        }))
        self._thread = threading.Thread(target=self._run, name="eddies-journal-tail", daemon=True)
        self._thread.start()
        return self

    @property
    def started(self) -> bool:
        """Whether the reading thread was started."""
        return self._thread is not None

    def stop(self) -> None:
        """Stop reading (waits for the thread)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        with self._asking:
            if self._ends is not None:
                self._ends.close()
                self._ends = None

    # --- what executors call ---------------------------------------------------------------
    def follow(self, restored: JournalView) -> None:
        """Follow the partitions of ``restored`` (just read to their end) from where that
        read ended; their calls join the view."""
        with self.lock:
            self._learn(restored)
            for part, end in restored.ends.items():
                self._leaving.discard(part)
                self._following.add(part)
                self._positions.start(part, end)
                self._reached[part] = end
        self._commands.put(("assign", dict(restored.ends)))

    def recall(self, ref: CallRef, partition: int, read: Callable[[set[int], float], JournalView]) -> None:
        """Read ``partition`` again (``read``: as a gained partition is, within a timeout
        in seconds) if the outcome of call ``ref`` may have been forgotten here: the call
        has a started mark older than the time outcomes are kept, and no outcome. A
        non-idempotent call made here more than a minute before, its request issued anew,
        is answered from the journal then, not made again."""
        with self.lock:
            claim = self.view.started.get(ref)
            if ref in self.view.outcomes or claim is None or not claim.time_ms:
                return
            if claim.time_ms / 1000 > time.time() - self._retention:
                return
        try:
            restored = read({partition}, RECALL_TIMEOUT_S)
        except Exception as err:  # a cut broker, say: the call is decided on what is known
            # (its mark: watched, then UNKNOWN), as before a recall existed; one call's
            # read does not stop the executor
            log.warning("journal partition %d could not be read again for call %s: %s", partition,
                        ref[0], err)
            return
        with self.lock:
            self._learn(restored)

    def _learn(self, restored: JournalView) -> None:
        """(Under ``lock``.) The calls of ``restored``, a read of whole partitions: its
        outcomes are kept while their partition is followed (marks always are)."""
        self.view.learn_calls(restored)
        self._read_at.update(dict.fromkeys(restored.outcomes, RESTORED))

    def release(self, partitions: set[int]) -> list[Any]:
        """Stop following ``partitions`` (once no claim on them is being checked); drop
        their watches and return the watched items (their new owner answers them)."""
        with self.lock:
            dropped = [ref for ref, w in self._watches.items() if w.partition in partitions]
            items = [self._watches.pop(ref).item for ref in dropped]
            for part in partitions & self._following:
                self._leaving.add(part)
            self.lock.notify_all()
        return items

    @contextmanager
    def checking(self, partition: int) -> Iterator[None]:
        """Hold ``partition`` followed while a claim on it is checked."""
        with self.lock:
            self._claims[partition] = self._claims.get(partition, 0) + 1
        try:
            yield
        finally:
            with self.lock:
                self._claims[partition] -= 1

    def wait_past(self, partition: int, offset: int, timeout: float) -> bool:
        """Wait until the record at ``offset`` of ``partition`` has been read; False if the
        partition is not followed or ``timeout`` seconds pass."""
        return self._wait_for(partition, lambda: self._positions.next.get(partition, 0) > offset,
                              time.monotonic() + timeout)

    def caught_up(self, partition: int, timeout: float) -> bool:
        """Wait until ``partition`` has been read to the journal's end as it is now (its
        high watermark, asked of the broker): whatever was journaled before this call is
        in :attr:`view` then. False if the end cannot be asked, the partition is not
        followed, or ``timeout`` seconds pass first."""
        if self._consumer is None:
            return True
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        deadline = time.monotonic() + timeout
        with self._asking:  # a consumer of its own: the reading thread's is busy reading
            if self._ends is None:
                self._ends = Consumer(self.settings.client_config(**{
                    "group.id": f"{self.settings.app}.journal-ends", "enable.auto.commit": False}))
            try:
                _, high = self._ends.get_watermark_offsets(TopicPartition(self.topic, partition),
                                                           timeout=timeout, cached=False)
            except KafkaException:
                return False
        return self._wait_for(partition, lambda: self._reached.get(partition, 0) >= high, deadline)

    def _wait_for(self, partition: int, read: Callable[[], bool], deadline: float) -> bool:
        """Wait until ``read()`` (checked under :attr:`lock`, as the tail reads on); False if
        ``partition`` is not followed or ``deadline`` (``time.monotonic()``) passes first."""
        with self.lock:
            while True:
                if self.error is not None:
                    raise RuntimeError("the journal tail stopped") from self.error
                if partition not in self._following:
                    return False
                if read():
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(min(left, 0.5))

    def watch(self, ref: CallRef, partition: int, deadline: float, item: Any,
              claimant: Claimant | None = None) -> bytes | None:
        """The outcome of ``ref`` if it is known; else watch for it, owed by ``claimant``
        (call under ``lock`` together with the check that led here, so an outcome cannot
        slip in between)."""
        outcome = self.view.outcomes.get(ref)
        if outcome is None:
            self._watches[ref] = Watch(partition, deadline, item, claimant)
        return outcome

    def claimants(self) -> set[Claimant]:
        """Who owes the watched calls' outcomes."""
        with self.lock:
            return {w.claimant for w in self._watches.values() if w.claimant is not None}

    def owed_by(self, dead: set[Claimant]) -> list[Any]:
        """Items of watches owed by ``dead`` claimants; no longer watched."""
        if not dead:
            return []
        with self.lock:
            gone = [ref for ref, w in self._watches.items() if w.claimant in dead]
            return [self._watches.pop(ref).item for ref in gone]

    def watched(self, ref: CallRef) -> bool:
        """Whether ``ref`` is being watched."""
        return ref in self._watches

    def expired(self, now: float) -> list[Any]:
        """Items of watches whose deadline (``time.monotonic()``) has passed; no longer watched."""
        if not self._watches:
            return []
        with self.lock:
            late = [ref for ref, w in self._watches.items() if w.deadline <= now]
            return [self._watches.pop(ref).item for ref in late]

    # --- the reading thread ---------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as err:  # surfaced to claim checks waiting on the tail
            log.exception("the journal tail stopped")
            with self.lock:
                self.error = err
                self.lock.notify_all()
        finally:
            self._consumer.close()

    def _loop(self) -> None:
        from confluent_kafka import TopicPartition

        consumer = self._consumer
        eof = PARTITION_EOF
        while not self._stop.is_set():
            self._apply_commands(consumer)
            msgs = next_batch(consumer, 500, 0.05)
            if not msgs:
                self._unassign_left(consumer)
                self._prune()
                continue
            reread: set[int] = set()
            with self.lock:
                positions = self._positions
                for msg in msgs:
                    part = msg.partition()
                    if part in reread or part not in self._following:
                        continue
                    err = msg.error()
                    if err is not None:
                        if err.code() != eof:
                            log.warning("journal tail: %s", err)
                            continue
                        back = positions.gap_at_end(part, msg.offset())
                        if back is None:
                            self._reached[part] = max(self._reached.get(part, 0), msg.offset())
                    else:
                        back = positions.gap(part, msg.offset())
                    if back is not None:
                        consumer.seek(TopicPartition(self.topic, part, back))
                        reread.add(part)
                        continue
                    if err is None:
                        if msg.offset() < positions.next.get(part, 0):
                            continue  # read before this partition was followed anew
                        self._fold(msg, part)
                        positions.advance(part, msg.offset())
                        self._reached[part] = max(self._reached.get(part, 0), msg.offset() + 1)
                self.lock.notify_all()
            self._unassign_left(consumer)
            self._prune()

    def _fold(self, msg: Any, part: int) -> None:
        key = msg.key()
        if key is None or key.startswith(b"snap"):
            return  # snapshots matter only when a partition is gained (read_journal)
        ref = fold(self.view, msg)
        if ref is None:
            return
        value = msg.value()
        assert value is not None
        if self._read_at.get(ref) != RESTORED:
            now = time.monotonic()
            self._read_at[ref] = now
            self._kept.append((now, ref))
        watch = self._watches.pop(ref, None)
        if watch is not None:
            self.arrived.put((watch.item, value))

    def _apply_commands(self, consumer: Any) -> None:
        from confluent_kafka import TopicPartition

        while True:
            try:
                what, parts = self._commands.get_nowait()
            except queue.Empty:
                return
            if what == "assign":
                with self.lock:  # released again before this command was read: not now
                    parts = {p: o for p, o in parts.items() if p in self._following}
                fresh = [TopicPartition(self.topic, p, o) for p, o in sorted(parts.items())
                         if p not in self._assigned]
                if fresh:
                    consumer.incremental_assign(fresh)
                for p, o in parts.items():
                    if p in self._assigned:  # released and followed again before it was left
                        consumer.seek(TopicPartition(self.topic, p, o))
                self._assigned |= set(parts)

    def _unassign_left(self, consumer: Any) -> None:
        from confluent_kafka import TopicPartition

        if not self._leaving:
            return
        with self.lock:
            done = {p for p in self._leaving if not self._claims.get(p)}
            if not done:
                return
            self._leaving -= done
            self._following -= done
            for p in done:
                self._positions.forget(p)
                self._reached.pop(p, None)
            self.lock.notify_all()
        assigned = done & self._assigned  # one followed and left before it was assigned
        if assigned:
            consumer.incremental_unassign([TopicPartition(self.topic, p) for p in sorted(assigned)])
        self._assigned -= done

    def _prune(self) -> None:
        kept = self._kept
        if not kept:
            return
        horizon = time.monotonic() - self._retention
        if kept[0][0] > horizon:
            return
        with self.lock:
            while kept and kept[0][0] <= horizon:
                read, ref = kept.popleft()
                if self._read_at.get(ref) != read:  # kept by a later read, or restored
                    continue
                del self._read_at[ref]
                self.view.outcomes.pop(ref, None)
