"""Replay a session from its recorded history: no live calls, every event checked.

The history is what the orchestrator wrote to ``app.events`` for the session. Its
external events (inputs, call results, signals) are re-applied to a session machine, from
a fresh state or from a snapshot the worker wrote to ``app.journal``; every event the
machine emits again is matched to a recorded one, by id first (an id names the event's
place: session, step, type and cause), then, for an event whose place moved, by its cause
and type; a matched pair whose content differs is a changed step, shown field by field.
Requests emitted during replay are not performed: results come from the history. Example::

    report = replay_session(settings, plan, "alice", from_seq=40)
    for step in report.mismatches:
        print(step.status, step.seq, step.differences())
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from eddies.connectors.inspect.diff import Difference, field_diff
from eddies.connectors.runtime.client import read_records
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import AgentPlan, SessionMachine, SessionState, halts
from eddies.events import AgentEvent, DurableCallResult, InputEvent, SignalEvent, partition_for
from eddies.events.records import to_record

#: (offset on app.events, event); offset -1 for an event that was not read from a topic.
Recorded = tuple[int, AgentEvent]
SAME, MOVED, CHANGED, MISSING, NEW = "same", "moved", "changed", "missing", "new"
#: What names an event's place in its session rather than what it says.
_PLACE = ("event_id", "seq", "causation_id")


@dataclass
class ReplayStep:
    """A recorded event and its recomputation: ``same``; ``moved`` (the same content at
    another step, e.g. after an event added before it); ``changed`` (its content differs);
    ``missing`` (not recomputed); or ``new`` (recomputed only)."""

    recorded: AgentEvent | None
    recomputed: AgentEvent | None
    offset: int
    status: str = SAME

    @property
    def matches(self) -> bool:
        """Recomputed identically: the same id (the same place) and the same content."""
        return self.status == SAME

    @property
    def seq(self) -> int:
        """The step's place: the recorded event's sequence number, else the recomputed's."""
        ev = self.recorded if self.recorded is not None else self.recomputed
        assert ev is not None
        return ev.seq

    @property
    def event(self) -> AgentEvent:
        """The recorded event, or the recomputed one for a new step."""
        ev = self.recorded if self.recorded is not None else self.recomputed
        assert ev is not None
        return ev

    def differences(self) -> list[Difference]:
        """(field path, recorded value, recomputed value) of a changed step."""
        if self.recorded is None or self.recomputed is None:
            return []
        return field_diff(self.recorded, self.recomputed)


@dataclass
class ReplayReport:
    """The outcome of a replay."""

    session_id: str
    steps: list[ReplayStep] = field(default_factory=list)
    #: The sequence number of the snapshot the replay started from (0: the beginning).
    snapshot_seq: int = 0
    #: The first offset of app.events read, and how many of the session's records were.
    read_from_offset: int = 0
    records_read: int = 0

    @property
    def ok(self) -> bool:
        """Every recorded event was recomputed identically, and nothing more."""
        return bool(self.steps) and all(s.matches for s in self.steps)

    @property
    def mismatches(self) -> list[ReplayStep]:
        """Steps whose recorded and recomputed events differ (or one is absent)."""
        return [s for s in self.steps if not s.matches]

    @property
    def extra(self) -> list[AgentEvent]:
        """Events recomputed that the history does not have."""
        return [s.recomputed for s in self.steps if s.status == NEW and s.recomputed is not None]


@dataclass(frozen=True)
class Place:
    """Where a session's records are on app.events: its topic, its partition, and whether
    readers re-read skipped offsets there (see :func:`readable`)."""

    topic: str
    partition: int
    reread: bool


def readable(settings: Settings, topic: str) -> tuple[int, bool]:
    """The partition count of ``topic`` (AppMissingError if it is missing), and whether
    its readers re-read skipped offsets: on the embedded broker a fetch can skip records a
    fresh reader then finds (BROKER-NOTES defect 9), so a session's history could lose its
    last events; not where transaction markers leave gaps all the time."""
    from eddies.connectors.runtime.membership import TANSU_CLUSTER_ID
    from eddies.connectors.runtime.preflight import check_broker, require_topics

    meta = check_broker(settings)
    count = require_topics(settings, [topic], meta)[topic]
    return count, meta.cluster_id == TANSU_CLUSTER_ID and not settings.exactly_once


def place_of(settings: Settings, session_id: str) -> Place:
    """Where ``session_id``'s records are on app.events (AppMissingError if it is missing);
    the partition count comes from the topic (``settings.partitions`` may not be the app's)."""
    topic = TopicNames(settings.app).events
    count, reread = readable(settings, topic)
    return Place(topic, partition_for(session_id, count), reread)


def session_messages(settings: Settings, where: Place, session_ids: Collection[str],
                     start: int = 0) -> Iterator[Any]:
    """The raw records of ``session_ids`` (all on partition ``where``) from ``start``."""
    keys = {sid.encode() for sid in session_ids}
    for msg in read_records(settings, where.topic, partitions=[where.partition], start=start,
                            reread_gaps=where.reread):
        if msg.key() in keys:
            yield msg


def records_of(settings: Settings, where: Place, session_ids: Collection[str], start: int = 0
               ) -> Iterator[tuple[int, int, AgentEvent]]:
    """(offset, record time ms, event) of the sessions' records from ``start``, each event
    id once: after a crash a worker may write events again (same ids, same place), and
    like every consumer we keep the first copy. Undecodable records are skipped."""
    from eddies.events import DecodeError, decode

    seen: set[str] = set()
    for msg in session_messages(settings, where, session_ids, start):
        try:
            ev = decode(msg.value())
        except DecodeError:
            continue  # not a record a worker wrote
        if ev.event_id not in seen:
            seen.add(ev.event_id)
            yield msg.offset(), msg.timestamp()[1], ev


def session_records(settings: Settings, session_id: str, start: int = 0, where: Place | None = None
                    ) -> Iterator[tuple[int, int, AgentEvent]]:
    """(offset, record time ms, event) of the session's records on app.events from
    ``start``, in order, each event once (AppMissingError if app.events does not exist;
    ``where``: its place, if already known)."""
    return records_of(settings, where or place_of(settings, session_id), [session_id], start)


def sessions_records(settings: Settings, session_ids: Collection[str]
                     ) -> Iterator[tuple[int, int, AgentEvent]]:
    """The records of several sessions, as :func:`session_records` gives them, reading
    each partition once (sessions of one partition come interleaved, each in order)."""
    topic = TopicNames(settings.app).events
    count, reread = readable(settings, topic)  # once: it asks the broker
    by_place: dict[Place, list[str]] = {}
    for sid in sorted(session_ids):
        by_place.setdefault(Place(topic, partition_for(sid, count), reread), []).append(sid)
    for where, sids in by_place.items():
        yield from records_of(settings, where, sids)


class OtherAgentError(ValueError):
    """A session checked or run again with an agent other than the one that recorded it
    (its events name the agent that wrote them), where the agent was not chosen on purpose."""

    def __init__(self, session_id: str, recorded: str, version: str, given: str) -> None:
        super().__init__(f"session {session_id!r} was recorded by agent {recorded!r} (version "
                         f"{version}), not {given!r}")
        self.session_id, self.recorded, self.given = session_id, recorded, given


def check_recorded_by(plan: AgentPlan, session_id: str, events: Iterable[AgentEvent]) -> None:
    """OtherAgentError unless the first event the session's agent wrote (not a sub-agent's)
    names ``plan``'s agent; a session with none (only inputs) is anyone's."""
    for ev in events:
        if ev.agent and not ev.scope:
            if ev.agent != plan.agent_name:
                raise OtherAgentError(session_id, ev.agent, ev.agent_version, plan.agent_name)
            return


def load_history(settings: Settings, session_id: str) -> list[Recorded]:
    """(offset, event) of the session's recorded history, in order, each event once (with
    each record's time too: :func:`eddies.connectors.inspect.sessions.timed_history`)."""
    return [(offset, ev) for offset, _, ev in session_records(settings, session_id)]


def snapshots_of(settings: Settings, session_id: str) -> list[tuple[int, SessionState]]:
    """The session's snapshots still in app.journal, oldest first, as (record time, state):
    those of a worker that had lost the partition are left out (journal.py folds the same
    way). A compacted journal keeps the latest of each owner's; the embedded broker keeps
    all of them."""
    from eddies.connectors.journal.epochs import state_of
    from eddies.connectors.journal.reading import JournalView, fold

    topic = TopicNames(settings.app).journal
    part = partition_for(session_id, readable(settings, topic)[0])
    view = JournalView()
    out: list[tuple[int, SessionState]] = []
    for msg in read_records(settings, topic, partitions=[part]):
        key = msg.key() or b""
        ours = key.startswith(b"snap") and key.partition(b"/")[2] == session_id.encode()
        if not ours and not key.startswith(b"own/"):
            continue
        before = view.snapshots.get(session_id)
        fold(view, msg)
        now = view.snapshots.get(session_id)
        if not ours:
            continue
        if now is None:  # a tombstone: the session was closed and forgotten
            out.clear()
        elif now is not before:
            try:
                out.append((msg.timestamp()[1], SessionState.from_bytes(state_of(now))))
            except Exception:  # one this version cannot read: an older one may still do
                continue
    return out


def replay_session(settings: Settings, plan: AgentPlan, session_id: str, *,
                   from_offset: int | None = None, from_seq: int | None = None,
                   to_seq: int | None = None, same_agent: bool = False) -> ReplayReport:
    """Replay ``session_id`` strictly (no live call) and report from ``from_seq`` (or the
    event at ``from_offset`` of app.events) to ``to_seq``: the machine starts from the
    latest snapshot before the start, and app.events is read from where that snapshot's
    later events begin, not from the beginning. ``same_agent``: OtherAgentError if another
    agent than ``plan``'s recorded the session (a default agent, not one chosen to compare)."""
    where = place_of(settings, session_id)
    if from_offset is not None and from_seq is None:
        first = next(session_records(settings, session_id, from_offset, where), None)
        from_seq = first[2].seq if first is not None else None
        if from_seq is None:
            return ReplayReport(session_id, read_from_offset=from_offset)
    start_seq = from_seq or 1
    # From the first step, no snapshot can come before it: the journal is not read.
    usable = [(t, s) for t, s in snapshots_of(settings, session_id) if 0 < s.seq < start_seq] \
        if start_seq > 1 else []
    state: SessionState | None = None
    begin = 0
    if usable:
        stamp, state = usable[-1]
        begin = _first_offset_after(settings, session_id, where, state.seq, stamp)
    history = [(o, ev) for o, _, ev in session_records(settings, session_id, begin, where)
               if state is None or ev.seq > state.seq]
    if same_agent:
        check_recorded_by(plan, session_id, (ev for _, ev in history))
    report = replay(plan, history, session_id, state=state, from_seq=start_seq, to_seq=to_seq,
                    max_memory_bytes=settings.max_memory_bytes)
    report.read_from_offset, report.records_read = begin, len(history)
    return report


def _first_offset_after(settings: Settings, session_id: str, where: Place, seq: int, stamp: int) -> int:
    """An offset of app.events at or before the session's event ``seq + 1``, found from the
    snapshot's record time: a snapshot is written after every event it reflects is flushed,
    and its later events after it. The offset the broker gives for a time is checked (the
    embedded broker's is approximate): if the session's first record from there is past
    ``seq + 1`` (or it has none from there), look further back, doubling the step: the
    snapshot's own events are there to be found."""
    from eddies.connectors.runtime.client import offset_for_time

    # A second's margin for another worker's clock (after a rebalance, a later event may come
    # from another machine): the check below keeps it right whatever the clocks say, the
    # margin only saves it steps back. Events the snapshot reflects are skipped by seq.
    guess = offset_for_time(settings, where.topic, where.partition, stamp - 1000)
    step = 1000
    while guess > 0:
        first = next(session_records(settings, session_id, guess, where), None)
        if first is not None and first[2].seq <= seq + 1:
            return guess
        guess, step = max(0, guess - step), step * 2
    return 0


def replay(plan: AgentPlan, history: list[Recorded], session_id: str,
           max_memory_bytes: int | None = None, *, state: SessionState | None = None,
           from_seq: int = 1, to_seq: int | None = None) -> ReplayReport:
    """Recompute ``history`` (from ``state``, a snapshot whose events ``history`` no longer
    holds, or from a new session); report the steps from ``from_seq`` to ``to_seq``.
    ``max_memory_bytes``: the limit the worker ran with."""
    machine = SessionMachine(plan, max_memory_bytes=max_memory_bytes)
    if state is None:
        state = machine.new_state(session_id)
        snapshot_seq = 0
    else:
        snapshot_seq = state.seq
        state, _ = machine.resume(state)  # its requests' results are in the history
    recomputed: list[AgentEvent] = []
    for _, ev in history:
        # What came from outside: users' inputs and signals, executors' results (a
        # sub-agent's InputEvent, in its scope, is the machine's own).
        if isinstance(ev.payload, DurableCallResult) or (
                isinstance(ev.payload, InputEvent | SignalEvent) and not ev.scope):
            # As it arrived, before the machine stamped it: where it lands is recomputed
            # too (stamped, it would be dropped as already seen wherever steps moved).
            state, out = machine.apply(state, dataclasses.replace(ev, seq=0, run=0))
            recomputed.extend(out)
        elif halts.fault_notice(ev):  # the runner halted it there (the engine failed)
            state, out = machine.halted_as_recorded(state, ev)
            recomputed.extend(out)
    steps = match(history, recomputed)
    shown = [s for s in steps if s.seq >= from_seq and (to_seq is None or s.seq <= to_seq)]
    return ReplayReport(session_id, shown, snapshot_seq=snapshot_seq)


def match(history: list[Recorded], recomputed: list[AgentEvent]) -> list[ReplayStep]:
    """Pair recorded and recomputed events: by id; then, in order, a recomputed event whose
    id is not recorded with the first unpaired recorded event of the same type, scope and
    cause (its cause translated through the pairs made so far, since a changed event's
    effects name its new id). The steps come in sequence order."""
    recorded_ids = {ev.event_id: i for i, (_, ev) in enumerate(history)}
    paired: dict[int, AgentEvent] = {}  # index in history -> its recomputed event
    to_recorded: dict[str, str] = {}  # recomputed id -> the recorded id it stands for
    unpaired: list[AgentEvent] = []
    for ev in recomputed:
        i = recorded_ids.get(ev.event_id)
        if i is not None and i not in paired:
            paired[i] = ev
            to_recorded[ev.event_id] = ev.event_id
        else:
            unpaired.append(ev)
    new: list[AgentEvent] = []
    free: dict[tuple[str | None, str, tuple[str, ...]], list[int]] = {}
    for i, (_, ev) in enumerate(history):
        if i not in paired:
            free.setdefault((ev.causation_id, ev.type, tuple(ev.scope)), []).append(i)
    for ev in unpaired:
        cause = to_recorded.get(ev.causation_id, ev.causation_id) if ev.causation_id else None
        slot = free.get((cause, ev.type, tuple(ev.scope)))
        if slot:
            i = slot.pop(0)
            paired[i] = ev
            to_recorded[ev.event_id] = history[i][1].event_id
        else:
            new.append(ev)
    steps: list[ReplayStep] = []
    for i, (offset, ev) in enumerate(history):
        again = paired.get(i)
        if again is None:
            steps.append(ReplayStep(ev, None, offset, MISSING))
        else:  # ids say where an event is (session, seq, type, cause), not what it holds
            was, now = to_record(ev), to_record(again)
            if was == now:
                status = SAME
            else:
                for key in _PLACE:
                    was.pop(key), now.pop(key)
                # A reference to another event (a response's request_id) names its new id.
                status = MOVED if was == _renamed(now, to_recorded) else CHANGED
            steps.append(ReplayStep(ev, again, offset, status))
    steps.extend(ReplayStep(None, ev, -1, NEW) for ev in new)
    steps.sort(key=lambda s: (s.seq, s.recorded is None))
    return steps


def _renamed(value: Any, names: dict[str, str]) -> Any:
    """``value`` with every recomputed event id in it replaced by the recorded one."""
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, dict):
        return {k: _renamed(v, names) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_renamed(v, names) for v in value)
    return value
