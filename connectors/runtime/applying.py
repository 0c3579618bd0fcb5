"""An admitted input record applied to its session and what it caused routed: the step
every runner (the Kafka worker's orchestrator, the Flink job) takes after admission.

A call result for a session with no state, an event the machine refuses, and a defect in
the machine are dead-lettered with the reason and stop neither the runner nor the other
sessions. Example::

    applied = apply_record(machine, router, state, event, key, source=msg)
    if applied is not None:                 # None: dead-lettered
        state, ended = applied              # ended: runs whose journal records expire
"""

from __future__ import annotations

import logging

from eddies.connectors.runtime.json_logs import ids
from eddies.connectors.runtime.routing import Router
from eddies.connectors.runtime.sink import SourceRecord
from eddies.engine import SessionMachine, SessionState
from eddies.engine.machine import UnsupportedEventError
from eddies.engine.state import RunState
from eddies.events import AgentEvent, DurableCallResult, InputEvent, SignalEvent

log = logging.getLogger("eddies.worker")


def apply_record(machine: SessionMachine, router: Router, state: SessionState | None,
                 ev: AgentEvent, key: bytes, source: SourceRecord,
                 ) -> tuple[SessionState, list[RunState]] | None:
    """Apply admitted ``ev`` to its session's ``state`` (None: the session has none) and
    route what it emitted. Returns the state and the runs that ended (their calls'
    journal records expire), or None when the record was dead-lettered instead (after a
    defect in the machine, ``state`` may be half-changed)."""
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
    if state is None:
        state = machine.new_state(sid)
    before = state.run
    try:
        state, emitted = machine.apply(state, ev)
    except UnsupportedEventError as err:
        dead_letters.write(source.value(), key, f"not accepted: {err}", source=source)
        return None
    except Exception as err:  # a defect, but one record must not stop the runner
        log.exception("the session machine failed on %s/%s/%s", source.topic(),
                      source.partition(), source.offset(), extra=ids(
                          session=sid, call=getattr(payload, "call_id", None)))
        dead_letters.write(
            source.value(), key,
            f"the session machine failed on it: {type(err).__name__}: {err}", source=source)
        return None
    ended = [before] if before is not None and state.run is not before else []
    ended += router.emit_or_fail_run(machine, state, emitted, key, source)
    if ended or machine.dropped:
        router.cancel_held(key, ended, machine.dropped)
    return state, ended
