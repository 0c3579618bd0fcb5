"""The sessions of an app as ``APP.events`` holds them: who they are, how far they got,
and each one's history with the time its records were written.

:class:`SessionIndex` folds every partition of ``APP.events`` into one small summary per
session (runs, last sequence number, last record time, status) and, on each
:meth:`~SessionIndex.refresh`, reads only what was written since. Example::

    index = SessionIndex(settings)
    for s in index.refresh().search("ali"):
        print(s.session_id, s.runs, s.status)      # alice 2 answered
    for rec in timed_history(settings, "alice"):
        print(rec.offset, rec.time_ms, rec.event.type)

A session's status is that of its current run, the first one that neither ended (an
output) nor was followed by a later run: ``answered`` or ``failed`` once all ended,
``halted`` while a run waits to be resumed (``eddies resume``), or the session does after
an error escaped the engine for it, ``waiting for approval``
or ``waiting for a signal`` while it waits on one, else ``running``. A run that ended
without any output, seen only because the next one started, is ``finished``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from eddies.connectors.inspect.replay import ReplayStep, place_of, readable, session_records
from eddies.connectors.runtime.client import read_records
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import AgentPlan, approval, halts
from eddies.events import (
    AgentEvent,
    ApprovalRequestEvent,
    CallKind,
    DecodeError,
    DurableCallRequest,
    DurableCallResult,
    InputEvent,
    OutputEvent,
    SignalEvent,
    decode,
)

ANSWERED, FAILED, RUNNING, HALTED, FINISHED = "answered", "failed", "running", "halted", "finished"
WAITING_APPROVAL, WAITING_SIGNAL = "waiting for approval", "waiting for a signal"


class Recorded(NamedTuple):
    """One record of ``APP.events``: its offset, its timestamp (ms), its event and its
    partition."""

    offset: int
    time_ms: int
    event: AgentEvent
    partition: int = -1


@dataclass
class SessionSummary:
    """What the sessions list shows of one session; :meth:`add` folds in its next event."""

    session_id: str
    partition: int
    runs: int = 0
    last_seq: int = 0
    last_ms: int = 0
    events: int = 0
    # The highest run that did anything beyond being accepted: every run before it is over.
    _started: int = 0
    _ended: dict[int, str] = field(default_factory=dict)  # run -> ANSWERED or FAILED
    # Signal waits not answered yet: request event id -> (run, signal name); by call id too,
    # for a wait that ends on its deadline (a DurableCallResult) rather than a SignalEvent.
    _waits: dict[str, tuple[int, str]] = field(default_factory=dict)
    _wait_ids: dict[str, str] = field(default_factory=dict)
    # Approval requests whose wait has not ended, by signal (with their run, for a line
    # like eddies tail's); the signals of every approval asked, to tell "answered already"
    # from "never asked".
    _asks: dict[str, AgentEvent] = field(default_factory=dict)
    _asked: set[str] = field(default_factory=set)
    #: Why its latest halt halted it (the notice's error), "" if it never halted.
    reason: str = ""
    # A halt on an error that escaped the engine, not resumed yet: (its notice's event
    # id, the signal that resumes it). It waits outside any run.
    _fault: tuple[str, str] | None = None

    def add(self, ev: AgentEvent, time_ms: int = 0) -> bool:
        """Fold in ``ev`` (the session's next event); False for a copy already folded in.

        A worker that crashed may write events again, with their ids and places: the
        log is in session order, so a sequence number not beyond the last is such a copy.
        """
        if 0 < ev.seq <= self.last_seq:
            return False
        self.last_seq = max(self.last_seq, ev.seq)
        self.last_ms = max(self.last_ms, time_ms)
        self.events += 1
        self.runs = max(self.runs, ev.run)
        p = ev.payload
        if not (isinstance(p, InputEvent) and not ev.scope):
            self._started = max(self._started, ev.run)
        if isinstance(p, OutputEvent) and not ev.scope:
            signal = halts.resume_signal(p)
            if signal is None:
                self._ended[ev.run] = FAILED if p.error is not None else ANSWERED
            else:  # (a halt's notice is a failed output too, but its run goes on once resumed)
                self.reason = p.error.message if p.error is not None else ""
                if halts.fault_notice(ev):
                    self._fault = (ev.event_id, signal)
        elif isinstance(p, DurableCallRequest) and p.kind is CallKind.SIGNAL:
            self._waits[ev.event_id] = (ev.run, p.target)
            self._wait_ids[p.call_id] = ev.event_id
        elif isinstance(p, ApprovalRequestEvent):
            self._asks[p.signal] = ev
            self._asked.add(p.signal)
        elif isinstance(p, SignalEvent) and ev.causation_id is not None:
            if self._fault is not None and ev.causation_id == self._fault[0]:
                self._fault = None  # resumed
            self._end_wait(ev.causation_id)  # its causation: the wait it answers
        elif isinstance(p, DurableCallResult) and p.call_id in self._wait_ids:
            self._end_wait(self._wait_ids.pop(p.call_id))
        return True

    def _end_wait(self, request_id: str) -> None:
        ended = self._waits.pop(request_id, None)
        if ended is not None:
            self._asks.pop(ended[1], None)

    def _current(self) -> int | None:
        """The first run not over (None: every run ended)."""
        for run in range(max(self._started, 1), self.runs + 1):
            if run not in self._ended:
                return run
        return None

    @property
    def waits(self) -> list[str]:
        """The signals the session's current run waits for (an approval's, a halt's
        ``resume:`` one, or a ``ctx.wait_for_signal`` name), in the order asked."""
        fault = [] if self._fault is None else [self._fault[1]]
        run = self._current()
        if run is None or run > self._started:
            return fault
        return [name for r, name in self._waits.values() if r == run] + fault

    @property
    def approvals(self) -> list[AgentEvent]:
        """The approval requests the session waits on (events whose payload is an
        ``ApprovalRequestEvent``), in the order asked: what ``eddies approve`` answers."""
        return [self._asks[name] for name in self.waits if name in self._asks]

    def asked(self, signal: str) -> bool:
        """Whether the session ever asked the approval ``signal`` answers (pending or not)."""
        return signal in self._asked

    @property
    def status(self) -> str:
        """answered, failed, running, halted, waiting for approval / a signal, finished."""
        if self._fault is not None:
            return HALTED
        run = self._current()
        if run is None:
            return self._ended.get(self.runs, FINISHED if self.runs else RUNNING)
        names = self.waits
        if any(n.startswith(halts.PREFIX) for n in names):
            return HALTED
        if any(n.startswith(approval.PREFIX) for n in names):
            return WAITING_APPROVAL
        return WAITING_SIGNAL if names else RUNNING  # (RUNNING too: accepted, about to start)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return {"id": self.session_id, "partition": self.partition, "runs": self.runs,
                "last_seq": self.last_seq, "last_ms": self.last_ms, "events": self.events,
                "status": self.status, "waits": self.waits,
                "reason": self.reason if self.status == HALTED else ""}


def summarize(session_id: str, events: Iterable[AgentEvent | Recorded],
              partition: int = -1) -> SessionSummary:
    """The summary of one session's history (events, or records with their times)::

        summarize("alice", runner.history).status   # "answered"
    """
    out = SessionSummary(session_id, partition)
    for item in events:
        if isinstance(item, Recorded):
            out.partition = item.partition if out.partition < 0 else out.partition
            out.add(item.event, item.time_ms)
        else:
            out.add(item)
    return out


class SessionIndex:
    """The sessions of ``settings.app``, kept up to date by :meth:`refresh` (thread-safe:
    the web view calls it from request threads)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topic = TopicNames(settings.app).events
        self._sessions: dict[str, SessionSummary] = {}
        self._next: dict[int, int] = {}  # partition -> the offset to read from next
        self._lock = threading.Lock()

    def refresh(self) -> SessionIndex:
        """Read what ``APP.events`` got since the last refresh (AppMissingError if absent)."""
        with self._lock:
            count, reread = readable(self.settings, self.topic)
            # One reader per distinct start offset: the first refresh reads every
            # partition with one consumer, later ones only where a partition stands.
            starts: dict[int, list[int]] = {}
            for part in range(count):
                starts.setdefault(self._next.get(part, 0), []).append(part)
            for start, parts in sorted(starts.items()):
                ends: dict[int, int] = {}
                for msg in read_records(self.settings, self.topic, partitions=parts, start=start,
                                        ends=ends, reread_gaps=reread):
                    self._fold(msg)
                self._next.update(ends)
            return self

    def _fold(self, msg: Any) -> None:
        try:
            ev = decode(msg.value())
        except DecodeError:
            return  # not a record a worker wrote; nothing to show
        sid = ev.session_id
        summary = self._sessions.get(sid)
        if summary is None:
            summary = self._sessions[sid] = SessionSummary(sid, msg.partition())
        summary.add(ev, msg.timestamp()[1])

    def search(self, query: str = "", limit: int | None = None) -> list[SessionSummary]:
        """Sessions whose id contains ``query`` (any case), the latest first."""
        q = query.casefold()
        with self._lock:
            found = [s for s in self._sessions.values() if q in s.session_id.casefold()]
        found.sort(key=lambda s: (-s.last_ms, s.session_id))
        return found if limit is None else found[:limit]

    def get(self, session_id: str) -> SessionSummary | None:
        """The summary of ``session_id``, if it has events (as of the last refresh)."""
        with self._lock:
            return self._sessions.get(session_id)


def unread_inputs(settings: Settings, session_id: str, look_back: int = 10_000) -> int:
    """How many records of ``session_id`` APP.input holds among the last ``look_back`` of
    its partition: for a session with no history, inputs no worker has taken yet."""
    from eddies.connectors.runtime.client import log_end
    from eddies.events import partition_for

    topic = TopicNames(settings.app).input
    count, reread = readable(settings, topic)
    partition = partition_for(session_id, count)
    start = max(0, log_end(settings, topic, partition) - look_back)
    key = session_id.encode()
    return sum(msg.key() == key for msg in read_records(settings, topic, partitions=[partition],
                                                         start=start, reread_gaps=reread))


def timed_history(settings: Settings, session_id: str) -> list[Recorded]:
    """The session's records on ``APP.events``, in order, each event once, with the time
    each was written (:func:`.replay.session_records`)::

        records = timed_history(settings, "alice")
        build_tree([r.event for r in records], wall_ms=wall_times(records))
    """
    where = place_of(settings, session_id)
    return [Recorded(offset, stamp, ev, where.partition)
            for offset, stamp, ev in session_records(settings, session_id, where=where)]


def wall_times(records: Iterable[Recorded]) -> dict[str, int]:
    """When each event of ``records`` was written: event id -> ms since the epoch (what
    trees and spans take for latencies)."""
    return {r.event.event_id: r.time_ms for r in records}


def replay_view(settings: Settings, plan: AgentPlan, session_id: str, from_seq: int | None = None,
                to_seq: int | None = None, *, same_agent: bool = False) -> dict[str, Any]:
    """A strict replay of ``session_id`` (no live call) from step ``from_seq`` to ``to_seq``
    (None: the first, the last) as plain data, for the web view::

        replay_view(settings, plan, "alice", from_seq=40)
        # {"ok": True, "snapshot_seq": 32, "steps": [{"seq": 40, "matches": True, ...}, ...], ...}
    """
    from eddies.connectors.inspect.replay import OtherAgentError, replay_session

    try:
        report = replay_session(settings, plan, session_id, from_seq=from_seq, to_seq=to_seq,
                                same_agent=same_agent)
    except OtherAgentError as err:
        return {"session_id": session_id, "ok": False, "steps": [], "mismatches": 0, "extra": 0,
                "snapshot_seq": 0, "error": f"{err}: start eddies ui with --agent naming it"}
    if not report.steps:
        where = "" if from_seq is None and to_seq is None else \
            f" from step {from_seq or 1}" + ("" if to_seq is None else f" to step {to_seq}")
        return {"session_id": session_id, "ok": False, "steps": [], "mismatches": 0, "extra": 0,
                "snapshot_seq": report.snapshot_seq,
                "error": f"no history for session {session_id!r} in {settings.app}.events{where}"}
    steps = [_step(s) for s in report.steps]
    return {"session_id": session_id, "ok": report.ok, "steps": steps, "snapshot_seq": report.snapshot_seq,
            "mismatches": len(report.mismatches), "extra": len(report.extra)}


def _step(s: ReplayStep) -> dict[str, Any]:
    """One step as plain data (no ``event_id``: an event only the replay produced)."""
    recorded, recomputed = s.recorded, s.recomputed
    step: dict[str, Any] = {
        "offset": s.offset, "seq": s.seq, "type": s.event.type, "matches": s.matches,
        "event_id": None if recorded is None else recorded.event_id,
        "recomputed_id": None if recomputed is None else recomputed.event_id,
        "recomputed_type": None if recomputed is None else recomputed.type,
    }
    if not s.matches and recorded is not None and recomputed is not None:
        step["differences"] = [[path, repr(was), repr(now)] for path, was, now in s.differences()]
    return step
