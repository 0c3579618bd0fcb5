"""``AgentEvent``: the envelope every event travels in, on every topic."""

from __future__ import annotations

from dataclasses import dataclass

from .payloads import Event, event_type_name

SCHEMA_VERSION = 1


@dataclass(slots=True)
class AgentEvent:
    """One event of one session, with its place in the session's history.

    ``seq`` is 0 and ``run`` 0 until the session machine accepts the event; ``timestamp``
    is logical time in ms (from the input, never the engine's clock). Example::

        ev = AgentEvent.external("s1", InputEvent(input="hi"), event_id="in-1", timestamp=0)
    """

    event_id: str
    session_id: str
    seq: int
    run: int
    scope: tuple[str, ...]
    type: str
    causation_id: str | None
    action: str | None
    agent: str
    agent_version: str
    timestamp: int
    payload: Event
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def external(
        cls,
        session_id: str,
        payload: Event,
        *,
        event_id: str,
        timestamp: int,
        scope: tuple[str, ...] = (),
    ) -> AgentEvent:
        """An event arriving from outside the machine (an input, a call's result)."""
        return cls(
            event_id=event_id,
            session_id=session_id,
            seq=0,
            run=0,
            scope=scope,
            type=event_type_name(payload),
            causation_id=None,
            action=None,
            agent="",
            agent_version="",
            timestamp=timestamp,
            payload=payload,
        )
