"""Following a session on ``APP.stream`` as its contract says: deltas of one execution in
seq order; a call made again (a new execution) replaces what the earlier one wrote; a
record of an execution left behind (a paused worker that woke up) is dropped; the
session's ``OutputEvent`` is the truth, and ends what the stream showed.

Example::

    view = StreamFollower()
    for record in records:                       # StreamEvents of one session, in order
        change = view.add(record)
        if change is not None and change.text:
            print(change.text, end="")           # the answer grows
        if change is not None and change.restarted:
            print("\\n(asked again)")            # what was shown of this call is void
    view.status                                  # "calling weather {"city": "Oslo"}", ...
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eddies.events import CallKind
from eddies.events.stream import StreamEvent, StreamKind


@dataclass
class StreamChange:
    """What one record changed: text appended to the call's answer (``restarted``: the
    call is being made again, what was shown of it before is void), and the status line."""

    call_id: str
    text: str = ""
    restarted: bool = False
    status: str | None = None


@dataclass
class _Call:
    execution: str
    seq: int = -1
    text: list[str] = field(default_factory=list)
    left: set[str] = field(default_factory=set)  # executions this call replaced


class StreamFollower:
    """The answers and progress of one or more sessions, from their stream records."""

    def __init__(self) -> None:
        self._calls: dict[str, _Call] = {}
        #: What the agent is doing now, for a person ("" when nothing is said).
        self.status = ""

    def add(self, record: StreamEvent) -> StreamChange | None:
        """Take ``record``; what it changes, or None (a record of an execution left behind,
        or one seen already)."""
        call = self._calls.get(record.call_id)
        restarted = False
        if call is None:
            call = self._calls[record.call_id] = _Call(record.execution)
        elif record.execution != call.execution:
            if record.execution in call.left:
                return None
            call.left.add(call.execution)
            call.execution, call.seq, restarted = record.execution, -1, bool(call.text)
            call.text.clear()
        if record.seq <= call.seq:  # delivered twice (a producer's retry)
            return None
        call.seq = record.seq
        change = StreamChange(record.call_id, restarted=restarted)
        if record.kind is StreamKind.DELTA:
            call.text.append(record.text)
            change.text = record.text
            if record.tool_calls and not record.text:
                names = [t.name for t in record.tool_calls if t.name]
                if names:
                    change.status = self.status = f"asking for {', '.join(names)}"
        else:
            change.status = self.status = describe(record)
        return change

    def text(self, call_id: str) -> str:
        """What the newest execution of ``call_id`` has written so far."""
        call = self._calls.get(call_id)
        return "" if call is None else "".join(call.text)


def describe(record: StreamEvent) -> str:
    """A progress record for a person: "calling weather {...}", "waiting for approval"..."""
    what = {CallKind.CHAT_MODEL: "model", CallKind.TOOL: "tool", CallKind.SUBAGENT: "sub-agent",
            CallKind.EMBEDDING: "embedding", CallKind.VECTOR_STORE: "vector store"}.get(
        record.call_kind, record.call_kind.value.lower())
    name = record.target
    if record.kind is StreamKind.STARTED:
        verb = f"asking {name}" if record.call_kind is CallKind.CHAT_MODEL else f"calling {what} {name}"
        again = f" (attempt {record.attempt})" if record.attempt > 1 else ""
        return f"{verb}{again}" + (f" {record.text}" if record.text else "") + "..."
    if record.kind is StreamKind.ENDED:
        return f"{what} {name} failed: {record.error}" if record.error else f"{what} {name} done"
    if record.kind is StreamKind.WAITING:
        return f"waiting for {record.text or name}"
    return ""


def line(record: StreamEvent) -> str:
    """A stream record on one line (``eddies tail --topic stream``): session, run, call,
    execution and seq, then the text (JSON-quoted) or what happened."""
    import json

    head = (f"{record.session_id} run {record.run} {record.call_id}#{record.attempt} "
            f"[{record.execution[:8]} {record.seq}] {record.kind.value}")
    if record.kind is StreamKind.DELTA:
        calls = "".join(f" tool_call[{t.index}]{' ' + t.name if t.name else ''} {json.dumps(t.arguments)}"
                        for t in record.tool_calls)
        return f"{head} {json.dumps(record.text)}{calls}"
    return f"{head} {describe(record)}"
