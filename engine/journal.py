"""The durable record a session is rebuilt from after a crash.

Per session it keeps the external events applied (inputs and call results, written
*before* they are applied) and periodic state snapshots; per call the outcome and, for
non-idempotent calls, the fact that execution started. Rebuilding a session is: load the
latest snapshot, re-apply the events logged after it. This in-memory journal backs the
LocalRunner and tests; the Kafka runtime keeps the same records in the compacted
``app.journal`` topic. With ``serialize=True`` every record is kept as Avro bytes, as
it would be on a topic (and so copied: later mutation of an event cannot leak in).

Example::

    journal = Journal()
    journal.append(input_event)
    state, since = journal.last_saved(machine, "s1")   # apply ``since`` to it again
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eddies.events import AgentEvent, decode, encode

from .state import SessionState

if TYPE_CHECKING:
    from .machine import SessionMachine

Stored = AgentEvent | bytes


class Journal:
    """Outcomes, started markers, external-event log and snapshots."""

    def __init__(self, *, serialize: bool = False) -> None:
        self.serialize = serialize
        self._outcomes: dict[tuple[str, int], Stored] = {}
        self._started: set[tuple[str, int]] = set()
        self._log: dict[str, list[Stored]] = {}
        self._snapshots: dict[str, tuple[bytes, int]] = {}
        # A call result is recorded as an outcome and later logged for its session:
        # its bytes wait here (by event id) so it is encoded once.
        self._encoded: dict[str, bytes] = {}

    def _store(self, event: AgentEvent) -> Stored:
        if not self.serialize:
            return event
        data = self._encoded.pop(event.event_id, None)
        return data if data is not None else encode(event)

    @staticmethod
    def _load(stored: Stored) -> AgentEvent:
        return decode(stored) if isinstance(stored, bytes) else stored

    # --- calls ----------------------------------------------------------------------------
    def mark_started(self, call_id: str, attempt: int) -> None:
        """Record that a non-idempotent call is about to run."""
        self._started.add((call_id, attempt))

    def started(self, call_id: str, attempt: int) -> bool:
        """Whether the call was marked started."""
        return (call_id, attempt) in self._started

    def record_outcome(self, call_id: str, attempt: int, result: AgentEvent) -> None:
        """Record a call's result event (status OK or ERROR)."""
        stored = self._store(result)
        if isinstance(stored, bytes):
            self._encoded[result.event_id] = stored
        self._outcomes[(call_id, attempt)] = stored

    def outcome(self, call_id: str, attempt: int) -> AgentEvent | None:
        """The recorded result event of a call, if any."""
        stored = self._outcomes.get((call_id, attempt))
        return None if stored is None else self._load(stored)

    # --- sessions -------------------------------------------------------------------------
    def append(self, event: AgentEvent) -> None:
        """Log an external event of its session before it is applied."""
        log = self._log.get(event.session_id)
        if log is None:
            log = self._log[event.session_id] = []
        log.append(self._store(event))

    def snapshot(self, state: SessionState) -> None:
        """Save ``state`` as of everything logged so far for its session."""
        sid = state.session_id
        self._snapshots[sid] = (state.to_bytes(), len(self._log.get(sid, ())))

    def sessions(self) -> list[str]:
        """Sessions with logged events, in first-seen order."""
        return list(self._log)

    def events_since_snapshot(self, session_id: str) -> tuple[bytes | None, list[AgentEvent]]:
        """The latest snapshot of a session (or None) and the events logged after it."""
        snap = self._snapshots.get(session_id)
        log = self._log.get(session_id, [])
        start = 0 if snap is None else snap[1]
        return (None if snap is None else snap[0]), [self._load(b) for b in log[start:]]

    def last_saved(self, machine: SessionMachine, session_id: str
                   ) -> tuple[SessionState, list[AgentEvent]]:
        """The session's state as its latest snapshot holds it (a new one: none) and the
        events logged after it: applied again, they give the state it has now."""
        snap, events = self.events_since_snapshot(session_id)
        return (machine.new_state(session_id) if snap is None else SessionState.from_bytes(snap)), events

    def forget(self, session_id: str) -> None:
        """Drop a closed session's records (the topic gets tombstones)."""
        self._log.pop(session_id, None)
        self._snapshots.pop(session_id, None)
