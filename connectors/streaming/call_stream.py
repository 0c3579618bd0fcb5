"""What a call writes to ``APP.stream`` while it is made: a model's answer as it is
written (text and tool-call fragments) and the call's progress (started, ended, waiting).

A :class:`CallStream` is one making of one call (its ``execution`` id is new each time).
Its records go out through one :class:`StreamBatcher` per process, whose thread joins
the deltas a stream gets within ``window_s`` into one record: a record per token would
cost a produce per token. A stream's first delta after a quiet ``window_s`` goes at once
(the first token is not held back); the next ones wait at most ``window_s``. Records of
one execution leave in the order they were made, numbered from 0. Example::

    batcher = StreamBatcher(publish=lambda records: ..., window_s=0.010)
    stream = batcher.stream(session_id="s1", run=1, scope=(), call_id="c1", attempt=1,
                            call_kind=CallKind.CHAT_MODEL, target="llm")
    stream.started()
    stream.text("Hel"); stream.text("lo")      # one DELTA record "Hello", or two
    stream.ended()
    batcher.close()                             # what is pending goes out first
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable

from eddies.events import CallKind
from eddies.events.stream import StreamEvent, StreamKind, ToolCallDelta

log = logging.getLogger("eddies.stream")

#: What a batcher hands its records to (a Kafka producer's produce, a list's extend).
Publish = Callable[[list[StreamEvent]], None]

#: How long a stream's deltas are gathered into one record at most (seconds).
WINDOW_S = 0.010

_END = object()  # a pending entry that closes the batch before it (STARTED, ENDED, WAITING)


class CallStream:
    """One making of one call, as ``APP.stream`` shows it; made by
    :meth:`StreamBatcher.stream`. Thread-safe: a call's thread, its event loop and the
    batcher's thread may use it at once."""

    __slots__ = ("_batcher", "_due", "_last_sent", "_pending", "_seq", "attempt", "call_id",
                 "call_kind", "execution", "run", "scope", "session_id", "target")

    def __init__(self, batcher: StreamBatcher, *, session_id: str, run: int, scope: tuple[str, ...],
                 call_id: str, attempt: int, call_kind: CallKind, target: str) -> None:
        self._batcher = batcher
        self.session_id = session_id
        self.run = run
        self.scope = scope
        self.call_id = call_id
        self.attempt = attempt
        self.call_kind = call_kind
        self.target = target
        #: New each time the call is made: a consumer keeps the newest making of a call.
        self.execution = os.urandom(8).hex()
        self._pending: list[object] = []  # text (str), ToolCallDelta, or a whole record
        self._seq = 0
        self._due = False  # a flush of this stream is scheduled
        self._last_sent = 0.0  # monotonic time of its last record sent

    # --- a model's answer ---------------------------------------------------------------
    def text(self, delta: str) -> None:
        """Part of the answer's text, as the model wrote it."""
        if delta:
            self._batcher.add(self, delta)

    def tool_call(self, index: int, id: str | None = None, name: str | None = None,
                  arguments: str = "") -> None:
        """A fragment of tool call ``index`` the model is writing."""
        self._batcher.add(self, ToolCallDelta(index=index, id=id, name=name, arguments=arguments))

    # --- progress -----------------------------------------------------------------------
    def started(self, text: str = "") -> None:
        """The executor started the call (``text``: what it is asked, for a person)."""
        self._batcher.add(self, self._record(StreamKind.STARTED, text=text))

    def ended(self, error: str | None = None) -> None:
        """The call ended (``error``: why it failed), after every delta it wrote."""
        self._batcher.add(self, self._record(StreamKind.ENDED, error=error))

    def waiting(self, deadline_ms: int | None, text: str = "") -> None:
        """The call is a wait (a signal, an approval, a timer) until ``deadline_ms``."""
        self._batcher.add(self, self._record(StreamKind.WAITING, text=text, deadline_ms=deadline_ms))

    def _record(self, kind: StreamKind, *, text: str = "", tool_calls: list[ToolCallDelta] | None = None,
                error: str | None = None, deadline_ms: int | None = None) -> StreamEvent:
        """A record of this stream (numbered when it is sent)."""
        return StreamEvent(session_id=self.session_id, run=self.run, scope=self.scope,
                           call_id=self.call_id, attempt=self.attempt, execution=self.execution,
                           seq=-1, kind=kind, call_kind=self.call_kind, target=self.target,
                           text=text, tool_calls=tool_calls or [], error=error,
                           deadline_ms=deadline_ms, timestamp=0)

    # --- the batcher's, under its lock ------------------------------------------------------
    def queue(self, item: object, now: float, window_s: float) -> float | None:
        """Hold ``item`` for the next record; when that record is due (a delta: ``window_s``
        after the last record sent; progress: ``now``), or None if it is due already."""
        self._pending.append(item)
        if type(item) is str or type(item) is ToolCallDelta:
            if self._due:
                return None
            when = max(now, self._last_sent + window_s)
        else:
            when = now
        self._due = True
        return when

    @property
    def pending(self) -> bool:
        """Whether something waits to be sent."""
        return bool(self._pending)

    def take(self, now: float) -> list[StreamEvent]:
        """The records of what is pending, numbered (``now``: when they are sent)."""
        pending, self._pending = self._pending, []
        self._due = False
        self._last_sent = now
        out: list[StreamEvent] = []
        texts: list[str] = []
        calls: list[ToolCallDelta] = []

        def delta() -> None:
            if texts or calls:
                out.append(self._record(StreamKind.DELTA, text="".join(texts), tool_calls=list(calls)))
                texts.clear()
                calls.clear()

        for item in pending:
            if type(item) is str:
                texts.append(item)
            elif type(item) is ToolCallDelta:
                calls.append(item)
            else:
                delta()
                assert isinstance(item, StreamEvent)
                out.append(item)
        delta()
        now = int(time.time() * 1000)
        for rec in out:
            rec.seq = self._seq
            rec.timestamp = now
            self._seq += 1
        return out


class StreamBatcher:
    """Sends the records of every :class:`CallStream` of a process from one thread,
    deltas gathered over ``window_s`` at most."""

    def __init__(self, publish: Publish, window_s: float = WINDOW_S) -> None:
        self.publish = publish
        self.window_s = window_s
        self._cond = threading.Condition(threading.Lock())
        self._due: list[tuple[float, int, CallStream]] = []  # a heap of (when, tie, stream)
        self._tie = itertools.count()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.sent = 0  # records published (read by tests and metrics)

    def stream(self, *, session_id: str, run: int, scope: tuple[str, ...], call_id: str,
               attempt: int, call_kind: CallKind, target: str) -> CallStream:
        """A new stream: one making of call ``call_id``."""
        return CallStream(self, session_id=session_id, run=run, scope=scope, call_id=call_id,
                          attempt=attempt, call_kind=call_kind, target=target)

    def add(self, stream: CallStream, item: object) -> None:
        """(A stream's.) Send ``item`` with the stream's next batch: a delta within the
        window, progress at once."""
        with self._cond:
            if self._closed:
                return
            when = stream.queue(item, time.monotonic(), self.window_s)
            if when is None:  # scheduled already, no later than this
                return
            heapq.heappush(self._due, (when, next(self._tie), stream))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="eddies-stream", daemon=True)
                self._thread.start()
            if self._due[0][2] is stream:
                self._cond.notify()

    def close(self, timeout: float = 5.0) -> None:
        """Send what is pending, then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        batch = self._take_all()
                        break
                    if self._due and self._due[0][0] <= time.monotonic():
                        batch = self._take_due(time.monotonic())
                        break
                    self._cond.wait(None if not self._due else self._due[0][0] - time.monotonic())
            if batch:
                try:
                    self.publish(batch)
                    self.sent += len(batch)
                except Exception:  # the stream is a view: a lost record costs no answer
                    log.exception("stream records not sent")
            if self._closed and not self._due:
                return

    def _take_due(self, now: float) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        while self._due and self._due[0][0] <= now:
            _, _, stream = heapq.heappop(self._due)
            if stream.pending:  # else an entry made stale by an earlier flush
                out += stream.take(now)
        return out

    def _take_all(self) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        while self._due:
            _, _, stream = heapq.heappop(self._due)
            if stream.pending:
                out += stream.take(time.monotonic())
        return out
