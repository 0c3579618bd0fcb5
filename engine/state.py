"""Session state: plain data that serialises to bytes (it lives in Flink keyed state).

Example::

    state = SessionState("s1")
    assert SessionState.from_bytes(state.to_bytes()) == state
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import orjson

from eddies.events import AgentEvent, ErrorInfo, Identity, from_record, to_record

STATE_FORMAT = 1
#: How many recent input event ids a session remembers to drop re-delivered inputs.
INPUT_DEDUP_WINDOW = 256

PENDING = "PENDING"
RECONCILING = "RECONCILING"
OK = "OK"
ERROR = "ERROR"
TERMINAL = frozenset({OK, ERROR})


@dataclass(slots=True)
class CallRecord:
    """The journal entry of one durable call of the running run."""

    kind: str
    target: str
    digest: str
    args: str
    request_id: str
    idempotent: bool = False
    reconciler: str | None = None
    status: str = PENDING
    attempt: int = 1
    value: str = "null"
    error: ErrorInfo | None = None
    #: Logical ms before which no executor performs it (a timer, a signal's deadline),
    #: decided when the call was first issued.
    due: int | None = None
    #: The session's clock (logical ms) when it got its outcome: an action that reads the
    #: outcome sees at least this time as ``ctx.now()``, on every execution alike.
    at: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        d = {
            "kind": self.kind,
            "target": self.target,
            "digest": self.digest,
            "args": self.args,
            "request_id": self.request_id,
            "idempotent": self.idempotent,
            "reconciler": self.reconciler,
            "status": self.status,
            "attempt": self.attempt,
            "value": self.value,
            "error": None if self.error is None else _error_list(self.error),
        }
        if self.due is not None:
            d["due"] = self.due
        if self.at:
            d["at"] = self.at
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CallRecord:
        """Inverse of :meth:`to_dict`."""
        err = d["error"]
        return cls(
            d["kind"],
            d["target"],
            d["digest"],
            d["args"],
            d["request_id"],
            d["idempotent"],
            d["reconciler"],
            d["status"],
            d["attempt"],
            d["value"],
            None if err is None else ErrorInfo(*err),
            d.get("due"),
            d.get("at", 0),
        )


def _error_list(e: ErrorInfo) -> list[Any]:
    # Only what is set: the three-item form is what states saved before classification hold.
    out: list[Any] = [e.type, e.message, e.retryable]
    if e.category != "UNCLASSIFIED" or e.http_status is not None or e.retry_after_ms is not None:
        out += [e.category.value, e.http_status, e.retry_after_ms]
    return out


@dataclass(slots=True)
class Invocation:
    """One execution of an action for one triggering event."""

    number: int
    action: str
    trigger: AgentEvent


@dataclass(slots=True)
class Frame:
    """An internal sub-agent running inside the run: the child scope ``scope`` answering
    the parent's call ``call``, with its own invocations, sensory memory and short-term
    memory writes (it reads its parent's; its writes stay here)."""

    scope: tuple[str, ...]
    call: str
    #: The child session whose short-term memory it keeps (named by the caller), or "".
    session: str = ""
    active: Invocation | None = None
    pending: deque[Invocation] = field(default_factory=deque)
    waiting: list[str] = field(default_factory=list)
    sensory: dict[str, str] = field(default_factory=dict)
    memory: dict[str, str] = field(default_factory=dict)
    #: The last OutputEvent the child sent: its output as JSON text, or its error.
    output: str | None = None
    error: ErrorInfo | None = None
    #: The timer call that ends it at the caller's timeout, if it has one.
    deadline: str = ""
    #: Its action goes on when any call it waits for is done (a gradual batch), not all.
    any: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "scope": list(self.scope), "call": self.call, "session": self.session,
            "active": None if self.active is None else _inv_dict(self.active),
            "pending": [_inv_dict(i) for i in self.pending], "waiting": list(self.waiting),
            "sensory": self.sensory, "memory": self.memory,
            "output": self.output, "error": None if self.error is None else _error_list(self.error),
            "deadline": self.deadline, "any": self.any,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Frame:
        """Inverse of :meth:`to_dict`."""
        return cls(
            scope=tuple(d["scope"]), call=d["call"], session=d["session"],
            active=None if d["active"] is None else _inv_from(d["active"]),
            pending=deque(_inv_from(i) for i in d["pending"]), waiting=list(d["waiting"]),
            sensory=d["sensory"], memory=d["memory"], output=d["output"],
            error=None if d["error"] is None else ErrorInfo(*d["error"]), deadline=d["deadline"],
            any=d["any"])


@dataclass(slots=True)
class RunState:
    """The run in progress: its invocations, calls and sensory memory."""

    number: int
    input_id: str
    invocations: int = 0
    active: Invocation | None = None
    pending: deque[Invocation] = field(default_factory=deque)
    calls: dict[str, CallRecord] = field(default_factory=dict)
    waiting: list[str] = field(default_factory=list)
    sensory: dict[str, str] = field(default_factory=dict)
    events: int = 0
    #: What its model calls spent (tokens, USD), for budgets.
    tokens: int = 0
    cost_usd: float = 0.0
    #: Internal sub-agents running, by scope path (``"reviewer@i1c0/checker@i3c0"``).
    frames: dict[str, Frame] = field(default_factory=dict)
    #: Sub-agent call deadlines issued so far (their timers' ids count them).
    deadlines: int = 0
    #: Its action goes on when any call it waits for is done (a gradual batch), not all.
    any: bool = False
    #: The run's time (logical ms): the timestamp of the input that started it. Its
    #: actions see it as ``ctx.now()`` until they read an outcome that came later
    #: (:attr:`CallRecord.at`): unlike the session's clock, which moves whenever anything
    #: arrives, that is the same on every execution, so a re-executed action computes the
    #: same call arguments.
    time: int = 0
    #: Who asked: the verified identity of the input that started it (None: anonymous),
    #: given to every call of the run.
    identity: Identity | None = None

    def to_dict(self, *, parts: bool = True) -> dict[str, Any]:
        """JSON-able form; without ``parts``, no ``calls`` and ``sensory`` (a runner that
        keeps those as separate entries, see :meth:`SessionState.to_dict`)."""
        d = {
            "number": self.number,
            "input_id": self.input_id,
            "invocations": self.invocations,
            "active": None if self.active is None else _inv_dict(self.active),
            "pending": [_inv_dict(i) for i in self.pending],
            "waiting": list(self.waiting),
            "events": self.events,
            "time": self.time,
        }
        if self.tokens or self.cost_usd:
            d["spent"] = [self.tokens, self.cost_usd]
        if self.frames:
            d["frames"] = [f.to_dict() for f in self.frames.values()]
        if self.deadlines:
            d["deadlines"] = self.deadlines
        if self.any:
            d["any"] = True
        if self.identity is not None:
            d["identity"] = [self.identity.user, self.identity.tenant]
        if parts:
            d["calls"] = {k: v.to_dict() for k, v in self.calls.items()}
            d["sensory"] = self.sensory
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], clock: int = 0) -> RunState:
        """Inverse of :meth:`to_dict`. ``clock``: the run's time where ``d`` has none (a
        state saved before runs kept theirs: the session's clock then, the best guess)."""
        return cls(
            number=d["number"],
            input_id=d["input_id"],
            invocations=d["invocations"],
            active=None if d["active"] is None else _inv_from(d["active"]),
            pending=deque(_inv_from(i) for i in d["pending"]),
            calls={k: CallRecord.from_dict(v) for k, v in d["calls"].items()},
            waiting=list(d["waiting"]),
            sensory=d["sensory"],
            events=d["events"],
            tokens=d.get("spent", (0, 0.0))[0],
            cost_usd=d.get("spent", (0, 0.0))[1],
            frames={"/".join(f["scope"]): Frame.from_dict(f) for f in d.get("frames", ())},
            deadlines=d.get("deadlines", 0),
            any=d.get("any", False),
            time=d.get("time", clock),
            identity=None if (who := d.get("identity")) is None else Identity(who[0], who[1]),
        )


def _inv_dict(inv: Invocation) -> dict[str, Any]:
    return {"number": inv.number, "action": inv.action, "trigger": to_record(inv.trigger)}


def _inv_from(d: dict[str, Any]) -> Invocation:
    return Invocation(d["number"], d["action"], from_record(d["trigger"]))


@dataclass(slots=True)
class Fault:
    """Why a session is halted by an error that escaped the machine (a defect, not an
    action's failure), and the records that wait for it to be resumed.

    ``parked`` holds the events as they arrived, the one the error escaped on first; a
    resume applies them again, in order (see :mod:`.halts`).
    """

    error: ErrorInfo
    #: The signal that resumes it (``resume:...``, named in the halt's notice).
    signal: str
    #: The event id of the notice that announced it (what its resume answers).
    notice: str = ""
    parked: list[AgentEvent] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"error": _error_list(self.error), "signal": self.signal, "notice": self.notice,
                "parked": [to_record(e) for e in self.parked]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Fault:
        """Inverse of :meth:`to_dict`."""
        return cls(ErrorInfo(*d["error"]), d["signal"], d["notice"],
                   [from_record(e) for e in d["parked"]])


@dataclass(slots=True)
class SessionState:
    """Everything the machine knows about one session.

    ``seq`` is the last sequence number used; ``clock`` the logical time (ms);
    ``runs`` the number of inputs accepted (run numbers are assigned on acceptance);
    ``memory`` the short-term memory, which persists across runs. Memory values are kept
    as JSON text, so a restored state is exactly the state that was saved.
    """

    session_id: str
    seq: int = 0
    clock: int = 0
    runs: int = 0
    run: RunState | None = None
    queue: deque[AgentEvent] = field(default_factory=deque)
    memory: dict[str, str] = field(default_factory=dict)
    # An insertion-ordered dict used as a set: O(1) membership, oldest evicted first.
    recent_inputs: dict[str, None] = field(default_factory=dict)
    #: Signals no action waited for yet, by name: their values (JSON text), oldest first.
    signals: dict[str, list[str]] = field(default_factory=dict)
    #: What the session's model calls spent (tokens, USD), for budgets.
    tokens: int = 0
    cost_usd: float = 0.0
    #: The short-term memory of sub-sessions a parent named (``session_id=``), by id.
    child_memory: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Set while the session is halted by an error that escaped the machine.
    fault: Fault | None = None

    @property
    def idle(self) -> bool:
        """No run in progress, no input waiting, not halted."""
        return self.run is None and not self.queue and self.fault is None

    def to_dict(self, *, parts: bool = True) -> dict[str, Any]:
        """JSON-able form (events in their Avro record shape).

        Without ``parts`` it leaves out what grows with a session and changes a piece at a
        time: the short-term memory, and the run's call records and sensory memory. A
        runner that stores state per entry (Flink MapState) keeps those as entries of their
        own and rewrites only the ones that changed; :meth:`from_dict` takes them back in
        ``memory``, ``run.calls`` and ``run.sensory``.
        """
        d = {
            "format": STATE_FORMAT,
            "session_id": self.session_id,
            "seq": self.seq,
            "clock": self.clock,
            "runs": self.runs,
            "run": None if self.run is None else self.run.to_dict(parts=parts),
            "queue": [to_record(e) for e in self.queue],
            "recent_inputs": list(self.recent_inputs),
        }
        if self.signals:
            d["signals"] = self.signals
        if self.tokens or self.cost_usd:
            d["spent"] = [self.tokens, self.cost_usd]
        if self.child_memory:
            d["child_memory"] = self.child_memory
        if self.fault is not None:
            d["fault"] = self.fault.to_dict()
        if parts:
            d["memory"] = self.memory
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SessionState:
        """Inverse of :meth:`to_dict`; rejects unknown formats by name."""
        if d.get("format") != STATE_FORMAT:
            raise ValueError(f"session state format {d.get('format')!r} is not {STATE_FORMAT}")
        return cls(
            session_id=d["session_id"],
            seq=d["seq"],
            clock=d["clock"],
            runs=d["runs"],
            run=None if d["run"] is None else RunState.from_dict(d["run"], d["clock"]),
            queue=deque(from_record(e) for e in d["queue"]),
            memory=d["memory"],
            recent_inputs=dict.fromkeys(d["recent_inputs"]),
            signals=d.get("signals", {}),
            tokens=d.get("spent", (0, 0.0))[0],
            cost_usd=d.get("spent", (0, 0.0))[1],
            child_memory=d.get("child_memory", {}),
            fault=None if d.get("fault") is None else Fault.from_dict(d["fault"]),
        )

    def to_bytes(self) -> bytes:
        """Compact, deterministic bytes (UTF-8 JSON) of the state."""
        return orjson.dumps(self.to_dict())

    @classmethod
    def from_bytes(cls, data: bytes) -> SessionState:
        """Inverse of :meth:`to_bytes`."""
        return cls.from_dict(orjson.loads(data))
