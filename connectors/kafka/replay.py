"""Replay a session from its recorded history: no live calls, ids checked.

The history is what the orchestrator wrote to ``app.events`` for the session.
Its external events (inputs and call results) are re-applied to a fresh session machine;
every event the machine emits again must have the recorded id at the same place.
Requests emitted during replay are not performed: results come from the history.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eddies.engine import AgentPlan, SessionMachine
from eddies.events import AgentEvent, DurableCallResult, InputEvent, SignalEvent, partition_for

from .client import read_records
from .settings import Settings
from .topics import TopicNames


@dataclass
class ReplayStep:
    """One recorded event, the recomputed one at its place, and its offset."""

    recorded: AgentEvent
    recomputed: AgentEvent | None
    offset: int

    @property
    def matches(self) -> bool:
        """Same id, type and sequence number."""
        r = self.recomputed
        return r is not None and (r.event_id, r.type, r.seq) == (
            self.recorded.event_id, self.recorded.type, self.recorded.seq)


@dataclass
class ReplayReport:
    """The outcome of a replay."""

    session_id: str
    steps: list[ReplayStep] = field(default_factory=list)
    extra: list[AgentEvent] = field(default_factory=list)  # recomputed beyond the history

    @property
    def ok(self) -> bool:
        """Every recorded event was recomputed identically, and nothing more."""
        return bool(self.steps) and all(s.matches for s in self.steps) and not self.extra

    @property
    def mismatches(self) -> list[ReplayStep]:
        """Steps whose recomputed event differs."""
        return [s for s in self.steps if not s.matches]


def load_history(settings: Settings, session_id: str) -> list[tuple[int, AgentEvent]]:
    """(offset, event) of the session's recorded history, in order, each event once.

    After a crash a worker may write events again (same ids, same place in the session);
    like every consumer, replay keeps the first copy of each id. The session's partition
    comes from the topic's own partition count (``settings.partitions`` may not be the
    app's). AppMissingError if ``app.events`` does not exist.
    """
    from eddies.events import decode

    from .preflight import require_topics

    names = TopicNames(settings.app)
    part = partition_for(session_id, require_topics(settings, [names.events])[names.events])
    key = session_id.encode()
    out: list[tuple[int, AgentEvent]] = []
    seen: set[str] = set()
    for msg in read_records(settings, names.events, partitions=[part]):
        if msg.key() != key:
            continue
        ev = decode(msg.value())
        if ev.event_id not in seen:
            seen.add(ev.event_id)
            out.append((msg.offset(), ev))
    return out


def replay(plan: AgentPlan, history: list[tuple[int, AgentEvent]], session_id: str,
           from_offset: int = 0, max_memory_bytes: int | None = None) -> ReplayReport:
    """Recompute ``history``; steps before ``from_offset`` are applied but not reported.
    ``max_memory_bytes``: the limit the worker ran with (``settings.max_memory_bytes``)."""
    machine = SessionMachine(plan, max_memory_bytes=max_memory_bytes)
    state = machine.new_state(session_id)
    recomputed: list[AgentEvent] = []
    for _, ev in history:
        if isinstance(ev.payload, InputEvent | DurableCallResult | SignalEvent):
            state, out = machine.apply(state, ev)
            recomputed.extend(out)
    report = ReplayReport(session_id)
    for i, (offset, ev) in enumerate(history):
        if offset < from_offset:
            continue
        report.steps.append(ReplayStep(ev, recomputed[i] if i < len(recomputed) else None, offset))
    report.extra = recomputed[len(history):]
    return report
