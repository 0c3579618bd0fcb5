"""What an app recorded of a range of its inputs: the inputs (and signals) from some
offsets or a time on, the run each started, and every recorded outcome of their sessions'
calls, read from ``APP.input`` and ``APP.events``. A re-run of the range (``eddies
reprocess``, ``eddies eval``, the workers of an evaluation's app) is offered those
outcomes (:meth:`Recording.calls`): a call made just as the recording made it is answered
from it. Example::

    recording = read_recording(settings, from_time_ms=1_764_000_000_000)
    runner = LocalRunner(plan, recorded=recording.calls(plan))
    recording.submit(runner)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from eddies.connectors.execution.recorded_calls import Outcomes, RecordedCalls
from eddies.connectors.inspect.replay import sessions_records
from eddies.connectors.runtime.admission import arrival_id
from eddies.connectors.runtime.client import log_end, offset_for_time, read_records
from eddies.connectors.runtime.records import header
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import AgentPlan
from eddies.events import AgentEvent, DurableCallRequest, DurableCallResult, InputEvent, SignalEvent
from eddies.events.ids import session_of_call


class Submits(Protocol):
    """What takes a recording's inputs and signals (a LocalRunner)."""

    def submit(self, session_id: str, value: Any, *, event_id: str | None = None,
               timestamp: int | None = None) -> str: ...

    def signal(self, session_id: str, name: str, value: Any = None, *, event_id: str | None = None,
               timestamp: int | None = None) -> str: ...


@dataclass
class Recording:
    """A range of an app's recorded inputs (and signals), the run each input started
    there, and the recorded outcomes of their sessions' calls: what a re-run of the range
    offers its calls (:meth:`calls`)."""

    inputs: list[AgentEvent]
    runs: dict[tuple[str, str], int]
    outcomes: Outcomes
    #: session -> its recorded events, with their records' times (ms), in order.
    histories: dict[str, list[tuple[int, AgentEvent]]] = field(default_factory=dict)
    #: session -> the source's run of each of its inputs in the range, in order.
    order: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._by_session: dict[str, list[AgentEvent]] = {}
        for ev in self.inputs:
            self._by_session.setdefault(ev.session_id, []).append(ev)
            if isinstance(ev.payload, InputEvent):
                run = self.runs.get((ev.session_id, ev.event_id), 0)
                self.order.setdefault(ev.session_id, []).append(run)

    @property
    def sessions(self) -> list[str]:
        """The sessions of the range, sorted."""
        return sorted(self.order)

    def origin(self, call_id: str) -> str | None:
        """The recorded call a re-run's call stands for: the same place in the source's
        run of the same input (None: that run is not in the range)."""
        path, run, inv, ordinal = call_id.rsplit(":", 3)
        runs_here = self.order.get(session_of_call(call_id), [])
        k = int(run[1:])
        return f"{path}:r{runs_here[k - 1]}:{inv}:{ordinal}" if 0 < k <= len(runs_here) else None

    def calls(self, plan: AgentPlan, refuse: Callable[[DurableCallRequest], str | None] | None = None,
              fresh: Callable[[DurableCallRequest], bool] | None = None) -> RecordedCalls:
        """The recorded outcomes, offered to a re-run of the range with ``plan`` (see
        :class:`RecordedCalls` for ``refuse`` and ``fresh``)."""
        return RecordedCalls(self.outcomes, source=self.origin, plan=plan, refuse=refuse, fresh=fresh)

    def inputs_of(self, session_id: str) -> list[AgentEvent]:
        """The range's inputs and signals of ``session_id``, in order."""
        return self._by_session.get(session_id, [])

    def submit(self, runner: Submits, session_id: str | None = None) -> None:
        """Give ``runner`` the range's inputs and signals (of ``session_id`` only), in order."""
        for ev in self.inputs if session_id is None else self.inputs_of(session_id):
            _submit(runner, ev)


def read_recording(source: Settings, *, from_offsets: dict[int, int] | None = None,
                   from_time_ms: int | None = None,
                   sessions: Callable[[str], bool] = lambda _s: True) -> Recording:
    """The inputs of ``source.app`` from ``from_offsets`` (partition -> offset of
    APP.input; partitions not named are left out) or from ``from_time_ms`` (all
    partitions) to their end, with what was recorded of their sessions."""
    inputs = _inputs(source, TopicNames(source.app).input, from_offsets, from_time_ms, sessions)
    return Recording(inputs, *_recorded(source, {ev.session_id for ev in inputs}))


def _inputs(settings: Settings, topic: str, from_offsets: dict[int, int] | None,
            from_time_ms: int | None, sessions: Callable[[str], bool]) -> list[AgentEvent]:
    """The users' inputs and signals of ``topic`` in the range, in partition order (call
    results, which executors write there too, are left out: the re-run makes its own)."""
    from eddies.connectors.runtime.preflight import require_topics
    from eddies.events import DecodeError, decode

    count = require_topics(settings, [topic])[topic]
    if from_offsets is None:
        if from_time_ms is None:
            raise ValueError("reprocess needs --from-offset or --from-time")
        from_offsets = {p: offset_for_time(settings, topic, p, from_time_ms) for p in range(count)}
    bad = sorted(p for p in from_offsets if not 0 <= p < count)
    if bad:
        raise ValueError(f"{topic} has partitions 0 to {count - 1}; --from-offset names {bad}")
    for part, start in sorted(from_offsets.items()):  # else the read waits for records to come
        if start > 0 and start > (end := log_end(settings, topic, part)):
            raise ValueError(f"--from-offset {part}:{start} is past the end of {topic} partition "
                             f"{part} (its next offset is {end})")
    out: list[AgentEvent] = []
    for part, start in sorted(from_offsets.items()):
        for msg in read_records(settings, topic, partitions=[part], start=start):
            try:
                ev = decode(msg.value())
            except DecodeError:
                continue  # the worker sent it to the DLQ
            if from_time_ms is not None and msg.timestamp()[1] < from_time_ms:
                continue  # the broker's offset for a time is approximate
            if isinstance(ev.payload, InputEvent | SignalEvent) and sessions(ev.session_id):
                if not ev.event_id:  # as the worker named it, so its run there is found
                    named = functools.partial(header, msg.headers())
                    ev = dataclasses.replace(ev, event_id=arrival_id(ev.payload, named, part, msg.offset()))
                if not ev.timestamp:
                    ev = dataclasses.replace(ev, timestamp=msg.timestamp()[1])
                out.append(ev)
    return out


def _recorded(settings: Settings, sessions: set[str]
              ) -> tuple[dict[tuple[str, str], int], Outcomes, dict[str, list[tuple[int, AgentEvent]]]]:
    """From the source's history: the run each input started (session, input id -> run),
    every recorded call outcome of ``sessions``, and each session's events with their times."""
    runs: dict[tuple[str, str], int] = {}
    outcomes: Outcomes = {}
    histories: dict[str, list[tuple[int, AgentEvent]]] = {sid: [] for sid in sessions}
    for _, time_ms, ev in sessions_records(settings, sessions):  # each partition read once
        histories[ev.session_id].append((time_ms, ev))
        p = ev.payload
        if isinstance(p, InputEvent) and not ev.scope:
            runs[(ev.session_id, ev.event_id)] = ev.run
        elif isinstance(p, DurableCallResult):
            outcomes[(p.call_id, p.attempt)] = ev
    return runs, outcomes, histories


def _submit(runner: Submits, ev: AgentEvent) -> None:
    p = ev.payload
    if isinstance(p, InputEvent):
        runner.submit(ev.session_id, p.input, event_id=ev.event_id, timestamp=ev.timestamp)
    elif isinstance(p, SignalEvent):
        runner.signal(ev.session_id, p.name, p.value, event_id=ev.event_id, timestamp=ev.timestamp)


__all__ = ["Recording", "Submits", "read_recording"]
