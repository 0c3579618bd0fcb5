"""The sessions of gained partitions, taken from their snapshots when they are first needed.

A gained partition's journal is read to its end before its first record is applied (the
fences and the calls' outcomes come from it), but its sessions need not all be decoded
then: a session in the middle of a run costs ~50 us to restore (its state decoded, its
waiting action replayed to know its calls' arguments, its requests issued again), so a
partition of 100,000 of them kept every one of its sessions waiting for 5-6 s. Here a
session's snapshot is kept as bytes and taken (decoded, resumed, its requests issued
again) when a record of the session arrives, or, for the others, a slice at a time between
the loop's batches until none is left. Either way a session is taken before anything
applies to it, so what it sees, and the order of its requests, are those of a restore done
all at once; only when a waiting session's requests go out again moves (a timer that came
due meanwhile fires up to the restore's length later).

Example::

    restoring = Restoring(step, checkpoints, counters, issue=router.request, partitions=4)
    restoring.gained(view, {0, 1}, time.monotonic())  # their journal was read to its end
    restoring.take("alice")             # a record of alice's arrived: restored now
    restoring.take_some(0.02)           # between batches: the others, 20 ms at a time
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from eddies.connectors.journal.epochs import state_of
from eddies.connectors.journal.reading import CallRef, JournalView
from eddies.connectors.kafka.checkpoints import Checkpoints
from eddies.connectors.kafka.session_step import SessionStep
from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.json_logs import ids
from eddies.connectors.runtime.records import outcome_key, started_key
from eddies.engine.state import PENDING
from eddies.events import AgentEvent, DurableCallRequest, partition_for
from eddies.events.ids import session_of_call

log = logging.getLogger("eddies.worker")

#: Sessions taken between two checks of the clock in :meth:`Restoring.take_some`.
_CHECK_EVERY = 64


@dataclass
class Gained:
    """One assignment's journal, kept while any of its sessions waits to be taken."""

    view: JournalView
    partitions: set[int]
    began: float  # time.monotonic() when they were assigned
    seen_ms: float  # wall time then: the sessions' last activity as far as this process knows
    total: int = 0  # its sessions with a snapshot to take
    left: int = 0  # those not taken yet
    #: Journal keys of the calls of each session with a snapshot here (expired once the
    #: session is taken, if their run is over).
    calls: dict[str, list[tuple[CallRef, bytes]]] = field(default_factory=dict)


class Restoring:
    """Sessions of gained partitions not restored yet, and the call results their restore
    expects (see the module docstring)."""

    def __init__(self, step: SessionStep, checkpoints: Checkpoints, counters: Counters,
                 issue: Callable[[AgentEvent], None], partitions: int) -> None:
        """``issue``: sends a request issued again (to the local executor or APP.requests)."""
        self._step = step
        self._checkpoints = checkpoints
        self._counters = counters
        self._issue = issue
        self._count = partitions
        #: Session -> (its snapshot as the journal holds it, the assignment it came with).
        self.pending: dict[str, tuple[bytes, Gained]] = {}
        # Per partition, calls of restored sessions whose outcome is journaled (their
        # session, by call): their results are expected past the committed offset.
        self._expected: dict[int, dict[CallRef, str]] = {}
        # Partitions gained whose input has not been read to its end yet.
        self._reading: set[int] = set()

    # --- gaining ---------------------------------------------------------------------------
    def gained(self, view: JournalView, partitions: set[int], began: float) -> Gained:
        """The journal of ``partitions`` (``view``) was read to its end: their sessions'
        snapshots wait here to be taken, except those refused (``view.stale``: the caller
        rebuilds them and hands them to :meth:`restored`). Journal keys of calls of
        sessions with no snapshot expire as if their run had just ended."""
        gained = Gained(view, set(partitions), began, time.time() * 1000)
        refused, pending, calls = view.stale, self.pending, gained.calls
        for sid, value in view.snapshots.items():
            if sid not in refused:
                pending[sid] = (value, gained)
                calls[sid] = []
        gained.total = gained.left = len(calls)
        if pending:
            self._step.take_saved = self.take
        for sid in refused:
            calls[sid] = []
        orphans: dict[str, list[tuple[CallRef, bytes]]] = {}
        for refs, key_of in ((view.outcomes, outcome_key), (view.started, started_key)):
            for ref in refs:
                sid = session_of_call(ref[0])
                mine = calls.get(sid)
                (orphans.setdefault(sid, []) if mine is None else mine).append((ref, key_of(*ref)))
        for sid, keys in orphans.items():
            self._checkpoints.restored(sid, [], keys)
        self._reading |= partitions
        if not gained.left:
            self._done(gained)
        return gained

    def restored(self, sid: str, requests: list[AgentEvent] | None, gained: Gained) -> None:
        """``sid`` of ``gained`` is in the step now (``requests``: those of its run to issue
        again; None: its state could not be read and it starts over)."""
        view = gained.view
        older = [] if requests is None else view.snapshot_epochs(sid)
        self._checkpoints.restored(sid, older, gained.calls.pop(sid, []))
        if requests is None:
            return
        self._counters.inc("sessions_restored")
        outcomes = view.outcomes
        for req in requests:
            p = req.payload
            assert isinstance(p, DurableCallRequest)
            ref = (p.call_id, p.attempt)
            # A call with a journaled outcome is asked again too: an executor answers it
            # from the journal, so its result has a place in the input (the same for
            # every later owner), also when the first one is not past the committed
            # offset or was lost in a crash before it was sent.
            if ref in outcomes:
                part = partition_for(sid, self._count)
                if part in self._reading:
                    self._expected.setdefault(part, {})[ref] = sid
                else:  # its input was read to the end before it was needed: not there
                    self._recovered(sid, ref)
            self._issue(req)
            self._counters.inc("requests_reissued")

    # --- taking ----------------------------------------------------------------------------
    def take(self, sid: str) -> bool:
        """Restore ``sid`` now if it waits here (a record of it arrived); whether it did."""
        pending = self.pending
        entry = pending.pop(sid, None)
        if not pending:
            self._step.take_saved = None  # nothing to ask on the per-record path any more
        if entry is None:
            return False
        value, gained = entry
        self.restored(sid, self._step.restore(sid, state_of(value), gained.seen_ms), gained)
        gained.left -= 1
        if not gained.left:
            self._done(gained)
        return True

    def take_some(self, budget_s: float) -> int:
        """Restore waiting sessions for about ``budget_s`` seconds, oldest first; how many."""
        pending = self.pending
        deadline = time.monotonic() + budget_s
        taken = 0
        while pending:
            for sid in list(itertools.islice(pending, _CHECK_EVERY)):
                self.take(sid)
                taken += 1
            if time.monotonic() >= deadline:
                break
        return taken

    def _done(self, gained: Gained) -> None:
        log.info("orchestrator partitions %s: %d sessions restored in %.0f ms since they "
                 "were assigned", sorted(gained.partitions), gained.total,
                 (time.monotonic() - gained.began) * 1000)

    # --- reading the input -----------------------------------------------------------------
    def reading(self, part: int) -> bool:
        """Whether ``part`` was gained and its input not read to its end yet."""
        return part in self._reading

    def caught_up(self, part: int) -> None:
        """The input of ``part`` was read to its end after it was gained: a call whose
        outcome is journaled and that a session still waits for had its result before the
        committed offset (a snapshot behind it) or lost in a crash before it was sent;
        counted (its request was asked again: the answer comes from the journal)."""
        self._reading.discard(part)
        states = self._step.states
        for ref, sid in self._expected.pop(part, {}).items():
            state = states.get(sid)
            rec = state.run.calls.get(ref[0]) if state is not None and state.run is not None else None
            if rec is None or rec.status != PENDING or rec.attempt != ref[1]:
                continue  # its result came past the committed offset, as it should
            self._recovered(sid, ref)

    def _recovered(self, sid: str, ref: CallRef) -> None:
        self._counters.inc("results_recovered")
        log.info("call %s: its result was not past the committed offset; answered again "
                 "from the journal", ref[0], extra=ids(session=sid, call=ref[0]))

    # --- losing ----------------------------------------------------------------------------
    def drop(self, partitions: set[int]) -> None:
        """``partitions`` are no longer held: their sessions waiting here are forgotten."""
        for part in partitions:
            self._expected.pop(part, None)
        self._reading -= partitions
        pending = self.pending
        if not pending:
            return
        count = self._count
        gone = [sid for sid, (_, g) in pending.items()
                if g.partitions <= partitions or partition_for(sid, count) in partitions]
        for sid in gone:
            del pending[sid]
        if not pending:
            self._step.take_saved = None


__all__ = ["Gained", "Restoring"]
