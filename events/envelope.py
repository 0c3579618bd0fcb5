"""``AgentEvent``: the envelope every event travels in, on every topic."""

from __future__ import annotations

from dataclasses import dataclass

from .payloads import Event, event_type_name

SCHEMA_VERSION = 1
#: Envelope versions this code reads; a record of any other version is refused, not guessed at.
KNOWN_SCHEMA_VERSIONS = frozenset({1})
#: The range of ``timestamp`` (ms since the epoch, UTC) that readers of ``timestamp-millis``
#: can represent: fastavro and Apache Avro for Python turn it into a ``datetime``, which ends
#: at 9999-12-31T23:59:59.999Z and (here) starts at the epoch. A timestamp outside it would
#: make every later event of its session undecodable downstream.
MIN_TIMESTAMP_MS = 0
MAX_TIMESTAMP_MS = 253_402_300_799_999


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


def envelope_problem(ev: AgentEvent) -> str | None:
    """Why ``ev`` is not a well-formed envelope, or None: a known ``schema_version``, a
    ``type`` that names its payload's type, and a timestamp in the range every reader
    decodes. Example::

        envelope_problem(AgentEvent.external("s", InputEvent("hi"), event_id="", timestamp=0))
        # None
    """
    if ev.schema_version not in KNOWN_SCHEMA_VERSIONS:
        return (f"schema_version {ev.schema_version} is not one this worker reads "
                f"({', '.join(map(str, sorted(KNOWN_SCHEMA_VERSIONS)))})")
    actual = event_type_name(ev.payload)
    if ev.type != actual:
        return f"type {ev.type[:100]!r} does not name the payload's type {actual!r}"
    if not MIN_TIMESTAMP_MS <= ev.timestamp <= MAX_TIMESTAMP_MS:
        return (f"timestamp {ev.timestamp} is outside {MIN_TIMESTAMP_MS}..{MAX_TIMESTAMP_MS} "
                "(ms since the epoch, up to 9999-12-31), the range Avro readers decode")
    return None
