"""An admitted input record applied to its session and what it caused routed: the step
every runner (the Kafka worker's orchestrator, the Flink job, the in-process runner)
takes after admission.

A call result for a session with no state and an event the machine refuses are
dead-lettered with the reason. An error that escapes the machine (a defect) halts that
session alone, on its last trusted state (:mod:`.isolation`): the record waits, with the
session's later ones, for ``eddies resume``. None of them stops the runner or touches
another session. Example::

    applied = apply_record(machine, router, state, event, key, source=msg, trusted=trusted)
    if applied is not None:                 # None: dead-lettered
        state, ended = applied              # ended: runs whose journal records expire
"""

from __future__ import annotations

import logging

from eddies.connectors.runtime.isolation import MAX_SINCE, Trusted, escaped
from eddies.connectors.runtime.json_logs import ids
from eddies.connectors.runtime.routing import Router
from eddies.connectors.runtime.sink import SourceRecord
from eddies.engine import SessionMachine, SessionState
from eddies.engine.machine import UnsupportedEventError
from eddies.engine.state import RunState
from eddies.events import AgentEvent, DurableCallResult, InputEvent, SignalEvent

log = logging.getLogger("eddies.worker")


def apply_record(machine: SessionMachine, router: Router, state: SessionState | None,
                 ev: AgentEvent, key: bytes, source: SourceRecord, trusted: Trusted,
                 ) -> tuple[SessionState, list[RunState]] | None:
    """Apply admitted ``ev`` to its session's ``state`` (None: the session has none) and
    route what it emitted. Returns the state and the runs that ended (their calls'
    journal records expire), or None when the record was dead-lettered instead (``state``
    is then as it was). An error that escapes the machine halts the session on the state
    ``trusted`` has for it; the halted state is returned."""
    counters, dead_letters = router.counters, router.dead_letters
    sid = ev.session_id
    payload = ev.payload
    if isinstance(payload, InputEvent):
        counters.inc("inputs")
    elif isinstance(payload, SignalEvent):
        counters.inc("signals")
    else:
        assert isinstance(payload, DurableCallResult)
        counters.inc("results")
        if state is None:  # a saved state would make a session of nothing
            counters.inc("orphan_results")
            dead_letters.write(
                source.value(), key, f"result of call {payload.call_id[:300]} for session "
                f"{sid!r}, which has no state here: no run waits for it (the session is "
                "unknown, or was closed)", source=source)
            return None
    ev.seq = 0
    since = trusted.since.get(sid)
    if since is None or len(since) >= MAX_SINCE:
        since = trusted.start(sid, state)
    if state is None:
        state = machine.new_state(sid)
    before = state.run
    try:
        state, emitted = machine.apply(state, ev)
        if since is not None:
            since.append(ev)
    except UnsupportedEventError as err:  # (raised before anything changed)
        dead_letters.write(source.value(), key, f"not accepted: {err}", source=source)
        return None
    except BaseException as err:  # a defect: the session's, never the runner's
        halted = _halt(machine, router, ev, key, source, trusted, err)
        if halted is None:
            return None
        state, emitted, before = halted
    ended = [before] if before is not None and state.run is not before else []
    seq = state.seq
    ended += router.emit_or_fail_run(machine, state, emitted, key, source)
    if state.seq != seq:  # the router failed a run (not a record): start again from it
        trusted.reset(sid)
    if ended or machine.dropped:
        router.cancel_held(key, ended, machine.dropped)
    return state, ended


def _halt(machine: SessionMachine, router: Router, ev: AgentEvent, key: bytes, source: SourceRecord,
          trusted: Trusted, err: BaseException,
          ) -> tuple[SessionState, list[AgentEvent], RunState | None] | None:
    """``err`` escaped the machine applying ``ev``: the session halts on its last trusted
    state, ``ev`` parked (see :mod:`.isolation`). Returns the halted state, what to emit
    and its run before; None when even that failed (the record is dead-lettered)."""
    error = escaped(err)
    sid = ev.session_id
    log.error("session %r halted: the engine failed on the record at %s/%s/%s (%s: %s); it "
              "and the session's later records wait until it is resumed", sid[:100],
              source.topic(), source.partition(), source.offset(), error.type, error.message,
              exc_info=err, extra=ids(session=sid, call=getattr(ev.payload, "call_id", None)))
    router.counters.inc("sessions_faulted")
    machine.evict(sid)
    try:
        state, first = trusted.rebuild(machine, sid)
        if state is None:
            state = machine.new_state(sid)
        before = state.run
        state, emitted = machine.halt(state, ev, error)
    except BaseException as again:  # the halt itself failed: keep the record, say why
        error = escaped(again)
        log.error("session %r: halting it failed too (%s: %s); the record is dead-lettered",
                  sid[:100], error.type, error.message, exc_info=again, extra=ids(session=sid))
        router.dead_letters.write(
            source.value(), key, f"the session machine failed on it ({type(err).__name__}: "
            f"{err}), and halting the session failed too ({error.type}: {error.message})",
            source=source)
        return None
    return state, first + emitted, before
