"""Running recorded inputs again, differently: ``eddies fork`` and ``eddies reprocess``.

Both run the inputs in this process (a :class:`LocalRunner` on the agent to try, its calls
performed here), answer calls from the recorded outcomes where the rule of
:mod:`eddies.connectors.execution.recorded_calls` allows, and write what happens to the target app's
topics as a worker would (``APP.events`` as it happens, so record times are wall times;
the outputs; a snapshot of each session in ``APP.journal``), so ``eddies trace``, ``replay``
and ``ui`` show the new sessions like any other. Example::

    report = fork_session(settings, plan, "alice", at_seq=12, new_session="alice-gpt5")
    print(report.reused, report.live, report.outputs)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eddies.connectors.execution.recorded_calls import RecordedCalls
from eddies.connectors.inspect.recording import read_recording
from eddies.connectors.inspect.replay import (
    check_recorded_by,
    load_history,
    place_of,
    readable,
    session_messages,
)
from eddies.connectors.local.runner import LocalRunner
from eddies.connectors.runtime.client import producer
from eddies.connectors.runtime.records import HEADERS, header, journal_partition, snapshot_key
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import AgentPlan
from eddies.events import (
    AgentEvent,
    DurableCallResult,
    InputEvent,
    OutputEvent,
    SignalEvent,
    encode,
)
from eddies.events.ids import result_event_id

#: On every record a fork writes: where it came from, ``session@step``.
FORK_HEADER = "eddies-fork-of"


@dataclass
class RerunReport:
    """What a fork or reprocess did: per call (each once, however many attempts it made),
    reused (every attempt a recorded outcome) or live (an attempt made live)."""

    sessions: list[str] = field(default_factory=list)
    inputs: int = 0
    reused: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)
    outputs: list[AgentEvent] = field(default_factory=list)
    events: int = 0


def fork_session(settings: Settings, plan: AgentPlan, session_id: str, at_seq: int,
                 new_session: str, *, same_agent: bool = False) -> RerunReport:
    """A new session ``new_session`` whose history is ``session_id``'s up to step
    ``at_seq``: what came from outside up to there (inputs, signals, call results) is
    applied again in its order, so no call made up to there is made again and the steps
    are the same, and from there the session goes on live with ``plan`` (the calls left
    unanswered at that step are made). ValueError if the session has no history or the
    step is not in it; ``same_agent``: OtherAgentError if another agent recorded it."""
    history = [ev for _, ev in load_history(settings, session_id)]
    if not history:
        raise ValueError(f"there is no session {session_id!r} in {settings.app}.events")
    if not 1 <= at_seq <= history[-1].seq:
        raise ValueError(f"session {session_id!r} has steps 1 to {history[-1].seq} in "
                         f"{settings.app}.events; --at-seq {at_seq} is not one of them")
    if same_agent:
        check_recorded_by(plan, session_id, history)
    if new_session == session_id:
        raise ValueError("a fork needs a session id of its own (--to)")
    origin = f"{session_id}@{at_seq}"
    taken: list[AgentEvent] = []
    calls = RecordedCalls({})  # no outcomes to offer: it counts the calls taken over and made live
    for ev in history:
        if ev.seq > at_seq:
            break
        moved = _forked(ev, session_id, new_session, origin)
        if moved is not None:
            taken.append(moved)
            if isinstance(moved.payload, DurableCallResult):
                calls.reused_from_record(moved.payload.call_id)
    runner = LocalRunner(plan, recorded=calls)
    runner.take_over(taken)
    report = _run(settings, runner, [*HEADERS, (FORK_HEADER, origin.encode())])
    report.sessions = [new_session]
    report.inputs = sum(isinstance(e.payload, InputEvent | SignalEvent) for e in taken)
    report.reused, report.live = calls.reused, calls.live
    return report


def _forked(ev: AgentEvent, old: str, new: str, origin: str) -> AgentEvent | None:
    """``ev`` as the fork receives it, if it came from outside: for session ``new``, as it
    arrived (no seq, no run); a call's result under the fork's call id, without the digest
    check (that part of the history is the old session's, whatever the agent asks now); a
    signal named for one of its calls (an approval's) named for the fork's."""

    def renamed(call_id: str) -> str | None:  # OLD[/scope]:r..  ->  NEW[/scope]:r..
        n = len(old)
        return new + call_id[n:] if call_id.startswith(old) and call_id[n:n + 1] in (":", "/") else None

    p = ev.payload
    if isinstance(p, DurableCallResult):
        cid = renamed(p.call_id) or p.call_id
        return dataclasses.replace(ev, session_id=new, seq=0, run=0, action=None, agent="", agent_version="",
                                   event_id=result_event_id(cid, p.attempt), causation_id=None,
                                   payload=dataclasses.replace(p, call_id=cid, digest=""))
    if ev.scope or not isinstance(p, InputEvent | SignalEvent):
        return None  # the machine's own
    if isinstance(p, SignalEvent):  # approval:OLD:r1:i3:c0 -> approval:NEW:r1:i3:c0
        kind, sep, rest = p.name.partition(":")
        if sep and (call := renamed(rest)) is not None:
            p = dataclasses.replace(p, name=f"{kind}:{call}")
    return dataclasses.replace(ev, session_id=new, seq=0, run=0, action=None, agent="", agent_version="",
                               event_id=f"fork:{origin}:{ev.event_id}", causation_id=None, payload=p)


def reprocess(source: Settings, target: Settings, plan: AgentPlan, *,
              from_offsets: dict[int, int] | None = None, from_time_ms: int | None = None,
              sessions: Callable[[str], bool] = lambda _s: True,
              same_agent: bool = False) -> RerunReport:
    """Run the inputs of ``source.app`` from ``from_offsets`` (partition -> offset of
    APP.input; partitions not named are left out) or from ``from_time_ms`` (all partitions)
    to their end, into ``target.app``, with ``plan``. A call is answered from the source's
    recorded outcome when it is the same call (same place in the same run of its input,
    same digest of kind, target and arguments, same model); others are made live. Sessions start anew
    in the target: their inputs before the range are not part of it. ``same_agent``:
    OtherAgentError if another agent than ``plan``'s recorded one of the sessions."""
    recording = read_recording(source, from_offsets=from_offsets, from_time_ms=from_time_ms,
                               sessions=sessions)
    if same_agent:  # OtherAgentError for the first session another agent recorded
        for sid, events in sorted(recording.histories.items()):
            check_recorded_by(plan, sid, (ev for _, ev in events))
    recorded = recording.calls(plan)
    runner = LocalRunner(plan, recorded=recorded)
    recording.submit(runner)
    report = _run(target, runner, list(HEADERS))
    report.sessions, report.inputs = recording.sessions, len(recording.inputs)
    report.reused, report.live = recorded.reused, recorded.live
    return report


def _run(settings: Settings, runner: LocalRunner, headers: list[tuple[str, bytes]]) -> RerunReport:
    """Step ``runner`` until only waits are left, writing its events as they come."""
    prod = producer(settings)
    report = RerunReport()
    written = 0
    try:
        while True:
            busy = runner.step() if runner.has_work() else False
            report.outputs += _written(settings, prod, runner.history[written:], headers)
            written = len(runner.history)
            prod.poll(0)
            if not busy:
                break
        _finish(settings, prod, runner)
    finally:
        runner.executor.close()
    report.events = written
    return report


def publish(settings: Settings, runner: LocalRunner, headers: list[tuple[str, bytes]]) -> int:
    """Write what ``runner`` did (its history, its outputs, a snapshot of each session) to
    ``settings.app``'s topics, as a worker would have: ``eddies trace``, ``replay`` and
    ``ui`` then show its sessions. How many events."""
    prod = producer(settings)
    _written(settings, prod, runner.history, headers)
    _finish(settings, prod, runner)
    return len(runner.history)


def _written(settings: Settings, prod: Any, events: list[AgentEvent],
             headers: list[tuple[str, bytes]]) -> list[AgentEvent]:
    """Produce ``events`` to APP.events (and the outputs to APP.output too); the outputs."""
    from eddies.connectors.runtime.sink import produce

    names = TopicNames(settings.app)
    outputs = []
    for ev in events:
        key = ev.session_id.encode()
        data = encode(ev)
        produce(prod, names.events, data, key, headers=headers)
        if isinstance(ev.payload, OutputEvent) and not ev.scope:
            produce(prod, names.output, data, key, headers=headers)
            outputs.append(ev)
    return outputs


def _finish(settings: Settings, prod: Any, runner: LocalRunner) -> None:
    """A snapshot of each session (a worker that gains the partition goes on), then wait
    for the broker to have it all."""
    from eddies.connectors.runtime.sink import produce

    journal = TopicNames(settings.app).journal
    # The topic's own count: an app made with --partitions 2 is forked by a command that
    # was not told so.
    partitions, _ = readable(settings, journal) if runner.states else (settings.partitions, False)
    for sid, state in runner.states.items():
        produce(prod, journal, state.to_bytes(), snapshot_key(sid),
                partition=journal_partition(sid, partitions))
    if prod.flush(30):
        raise TimeoutError(f"the re-run's records were not delivered to {settings.bootstrap_servers}")


def forked_from(settings: Settings, session_id: str) -> str | None:
    """``SESSION@STEP`` if ``session_id`` is a fork (its first record on APP.events says
    so in its ``eddies-fork-of`` header), else None."""
    first = next(session_messages(settings, place_of(settings, session_id), [session_id]), None)
    origin = None if first is None else header(first.headers(), FORK_HEADER)
    return origin.decode(errors="replace") if origin else None
