"""The orchestrator's per-record step: one ``APP.input`` record through the door
(admission), its session's machine and the router, with the sessions' states in memory.

No consumer, no commits, no journal reads here: the orchestrator's loop decides which
records reach this step (only those of partitions it holds) and
:mod:`.checkpoints` decides when states are saved. What the step emits goes through the
router's producer. The Flink runner's :mod:`eddies.connectors.flink.processor` is the same
step over Flink keyed state. Example::

    step = SessionStep(machine, router, admission, counters)
    changed = step.handle(msg)          # (session, runs that ended), or None
    data, ended = step.snapshot_of("alice")
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eddies.connectors.runtime.admission import Admission, Misrouted, Refused
from eddies.connectors.runtime.applying import apply_record
from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.isolation import TrustedStates, reapply
from eddies.connectors.runtime.json_logs import ids
from eddies.connectors.runtime.records import header
from eddies.connectors.runtime.routing import Router
from eddies.engine import SessionMachine, SessionState, halts
from eddies.engine.state import RunState
from eddies.events import (
    AgentEvent,
    DurableCallResult,
    ErrorInfo,
    InputEvent,
    SignalEvent,
    partition_for,
)

if TYPE_CHECKING:
    from eddies.connectors.observability.prometheus import WorkerMetrics

log = logging.getLogger("eddies.worker")


class SessionStep:
    """Applies admitted records to their sessions' states (see the module docstring)."""

    def __init__(self, machine: SessionMachine, router: Router, admission: Admission,
                 counters: Counters, metrics: WorkerMetrics | None = None) -> None:
        self.machine = machine
        self.router = router
        self.admission = admission
        self.counters = counters
        self.metrics = metrics
        self.states: dict[str, SessionState] = {}
        #: What it takes to have a session's last trusted state again after an error
        #: escaped the machine (isolation.py): kept from a session's first record after
        #: it was saved until it is saved again (snapshot_of).
        self.trusted = TrustedStates()
        # Wall time (ms) of each session's last record here: an idle session is closed by
        # the earlier of this and its logical clock (a clock set in the future by its
        # inputs must not keep it forever).
        self.seen: dict[str, float] = {}
        #: While sessions of gained partitions wait to be restored (restoring.py): restores
        #: one if it waits, and says whether it did. Asked before a record applies to a
        #: session not in ``states``.
        self.take_saved: Callable[[str], bool] | None = None

    def handle(self, msg: Any, decoded: AgentEvent | None = None
               ) -> tuple[str, list[RunState]] | None:
        """Apply one record (``decoded``: its event, when this process wrote it and kept
        it); returns its session and the runs that ended, or None when no state changed
        (dead-lettered or forwarded)."""
        key, value = msg.key(), msg.value()
        part = msg.partition()
        verdict = self.admission.check(
            key, value, partition=part, offset=msg.offset(), timestamp_ms=msg.timestamp()[1],
            header=lambda name: header(msg.headers(), name), decoded=decoded)
        if type(verdict) is Refused:
            self.router.dead_letters.write(value, key, verdict.reason, source=msg)
            return None
        if type(verdict) is Misrouted:
            self.router.forward(msg, verdict)
            return None
        assert isinstance(verdict, AgentEvent) and key is not None
        sid = verdict.session_id
        state_before = self.states.get(sid)
        if state_before is None and self.take_saved is not None and self.take_saved(sid):
            state_before = self.states.get(sid)
        metrics = self.metrics
        before = None if metrics is None else metrics.before_apply(state_before)
        applied = apply_record(self.machine, self.router, state_before, verdict, key, msg,
                               self.trusted)
        if applied is None:
            return None
        state, ended = applied
        if metrics is not None and before is not None:
            metrics.after_apply(sid, state, before)
        self.states[sid] = state
        self.seen[sid] = time.time() * 1000
        return sid, ended

    def restore(self, sid: str, data: bytes, seen_ms: float) -> list[AgentEvent] | None:
        """Take ``sid``'s saved state (``SessionState.to_bytes()``); the requests of its
        run to issue again, or None when the state cannot be read (the session starts over)."""
        try:
            state, requests = self.machine.resume(SessionState.from_bytes(data))
        except Exception as err:  # never written by a worker of this version: keep the
            # partition's other sessions going, and the record where it can be found
            log.error("session %r: its snapshot cannot be restored (%s: %s); the session "
                      "starts over", sid[:100], type(err).__name__, err, extra=ids(session=sid))
            self.counters.inc("snapshots_unreadable")
            return None
        self.states[sid] = state
        self.seen[sid] = seen_ms
        self.trusted.reset(sid)
        return requests

    def rebuild(self, sid: str, data: bytes | None, history: list[AgentEvent],
                seen_ms: float) -> list[AgentEvent]:
        """Rebuild ``sid``'s state from its history on APP.events (the log is the truth):
        from ``data``, the newest saved state that can be trusted (None: from the start), the
        outside events recorded after it (inputs, signals, call results) applied again, as
        replay does; nothing is emitted (the history has it). Returns the requests of its run
        to issue again."""
        machine = self.machine
        state = machine.new_state(sid)
        if data is not None:
            try:
                state, _ = machine.resume(SessionState.from_bytes(data))
            except Exception:  # unreadable: the whole history, then
                state = machine.new_state(sid)
        base = state.seq
        arrived: list[AgentEvent] = []
        for ev in history:
            p = ev.payload
            if ev.seq <= base:
                continue
            if isinstance(p, DurableCallResult) or (isinstance(p, InputEvent | SignalEvent)
                                                    and not ev.scope):
                arrived.append(dataclasses.replace(ev, seq=0, run=0))  # as it arrived
            elif halts.fault_notice(ev):  # halted there; what it parked is not in the log
                state, _ = reapply(machine, state, arrived)
                arrived = []
                state, _ = machine.halted_as_recorded(state, ev)
        state, _ = reapply(machine, state, arrived)
        state, requests = machine.resume(state)
        self.states[sid] = state
        self.seen[sid] = seen_ms
        self.trusted.reset(sid)
        return requests

    def snapshot_of(self, sid: str, journal_place: tuple[str, int]
                    ) -> tuple[bytes | None, list[RunState]]:
        """The saved form of ``sid`` (None: closed or evicted, nothing to save), and the
        runs ended to make it fit. A state that cannot be a record fails its run and queued
        inputs (and, if that is not enough, its short-term memory) with an error naming
        the cause; its other state is saved. ``journal_place``: (topic, partition) where
        it would go, named in the dead letter."""
        state = self.states.get(sid)
        if state is None:
            return None, []
        why = ""
        limit = self.router.limit  # the largest record the producer takes
        data: bytes | None = None
        self.trusted.reset(sid)  # saved as it is now, or changed below
        try:
            data = state.to_bytes()
            if len(data) <= limit:
                return data, []
            why = f"its state of {len(data)} bytes is larger than a record may be ({limit})"
        except (TypeError, ValueError) as err:  # e.g. an int orjson cannot write
            why = f"its state cannot be serialised ({type(err).__name__}: {err})"
        self.counters.inc("sessions_failed")
        log.error("session %r cannot be saved: %s; failing its run and queued inputs",
                  sid[:100], why, extra=ids(session=sid, run=state.run.number if state.run else None))
        key = sid.encode()
        self.router.dead_letters.write(data, key, f"snapshot of session {sid!r}: {why}",
                                       source=journal_place)
        ended: list[RunState] = []
        for clear in (False, True):
            if state.run is not None:
                ended.append(state.run)
                self.router.cancel_held(key, [state.run])
            state, failed = self.machine.fail_session(state, ErrorInfo(
                "SessionStateTooLargeError",
                f"session {sid!r}: {why}; its running run and queued inputs were failed"
                + (" and its short-term memory cleared" if clear else "")), clear_memory=clear)
            self.states[sid] = state
            self.router.emit(failed, key, journal_place)
            try:
                data = state.to_bytes()
            except (TypeError, ValueError):
                continue
            if len(data) <= limit:
                return data, ended
        log.error("session %r cannot be saved even empty; it is closed", sid[:100],
                  extra=ids(session=sid))
        self.close([sid])
        return None, ended

    def idle_since(self, horizon_ms: float, now_ms: float) -> list[str]:
        """Sessions with no run and no input waiting, whose last record (by the earlier of
        their logical clock and its arrival here) came before ``horizon_ms``."""
        seen = self.seen
        return [sid for sid, st in self.states.items()
                if st.idle and min(st.clock, seen.get(sid, now_ms)) < horizon_ms]

    def close(self, sids: list[str]) -> None:
        """Forget ``sids`` (closed: their saved state is tombstoned by the caller)."""
        for sid in sids:
            self.states.pop(sid, None)
            self.seen.pop(sid, None)
        self.trusted.forget(sids)
        self.machine.evict(*sids)

    def drop(self, partitions: set[int], count: int) -> list[str]:
        """Forget the sessions of ``partitions`` (of ``count``); returns them."""
        if len(partitions) >= count:  # all of them (a worker that stops): no hashing
            gone = list(self.states)
        else:
            gone = [s for s in self.states if partition_for(s, count) in partitions]
        for sid in gone:
            del self.states[sid]
            self.seen.pop(sid, None)
        self.trusted.forget(gone)
        self.machine.evict(*gone)
        if self.metrics is not None:
            self.metrics.forget(gone)
        return gone
