"""What an executor says on ``APP.stream`` of the calls it makes: each call's start (what
it asks, for a person: "weather {"city": "Oslo"}"), its end (and error), a wait for a
signal or an approval, and the answers of models that stream (:mod:`.call_stream`).

Example::

    progress = StreamProgress(topic_publisher(producer, names.stream), producer.flush)
    stream = progress.started(request)           # a STARTED record; None for a timer
    value = performer.perform(req, scope, stream)
    ended(stream, result)                       # an ENDED record, after its deltas
    progress.close()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eddies.connectors.streaming.call_stream import WINDOW_S, CallStream, Publish, StreamBatcher
from eddies.engine.approval import PREFIX as APPROVAL
from eddies.events import AgentEvent, CallKind, CallStatus, DurableCallRequest, DurableCallResult

#: Calls a person is not told of: a timer (its wait is the run's), a reconciliation.
QUIET = frozenset({CallKind.TIMER, CallKind.RECONCILE})

#: How much of a call's arguments a STARTED record quotes.
ASKED_CHARS = 200


class StreamProgress:
    """The streams of one executor's calls, through one batcher."""

    def __init__(self, publish: Publish, flush: Callable[[float], Any] | None = None,
                 window_s: float = WINDOW_S) -> None:
        self.batcher = StreamBatcher(publish, window_s)
        self._flush = flush

    def stream(self, request: AgentEvent) -> CallStream | None:
        """A stream for one making of ``request``'s call (None: one a person is not told of)."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        if req.kind in QUIET:
            return None
        return self.batcher.stream(session_id=request.session_id, run=request.run,
                                   scope=tuple(request.scope), call_id=req.call_id,
                                   attempt=req.attempt, call_kind=req.kind, target=req.target)

    def started(self, request: AgentEvent) -> CallStream | None:
        """:meth:`stream`, its start said."""
        stream = self.stream(request)
        if stream is not None:
            assert isinstance(request.payload, DurableCallRequest)
            stream.started(asked(request.payload))
        return stream

    def waiting(self, request: AgentEvent) -> None:
        """``request``'s call waits (a signal, an approval) until its deadline."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        if req.kind is not CallKind.SIGNAL:
            return
        stream = self.stream(request)
        assert stream is not None
        what = "approval" if req.target.startswith(APPROVAL) else f"signal {req.target}"
        stream.waiting(req.not_before, what)

    def close(self, timeout: float = 5.0) -> None:
        """Send what is pending and wait for it to be delivered (``timeout`` seconds)."""
        self.batcher.close(timeout)
        if self._flush is not None:
            self._flush(timeout)


def asked(req: DurableCallRequest) -> str:
    """What a call asks, for a person: a tool's arguments, a sub-agent's prompt (cut to
    :data:`ASKED_CHARS`); nothing for a model (its messages are long and said already)."""
    if req.kind not in (CallKind.TOOL, CallKind.SUBAGENT, CallKind.FUNCTION):
        return ""
    text = req.args
    if text.startswith('{"args":[],"kwargs":'):  # the usual shape: the keywords alone
        text = text[len('{"args":[],"kwargs":'):-1]
    return text if len(text) <= ASKED_CHARS else text[:ASKED_CHARS - 3] + "..."


def ended(stream: CallStream, result: AgentEvent) -> None:
    """Say that ``stream``'s call ended as ``result`` says."""
    out = result.payload
    assert isinstance(out, DurableCallResult)
    error = None
    if out.status is not CallStatus.OK:
        error = out.status.value if out.error is None else f"{out.error.type}: {out.error.message}"
    stream.ended(error[:ASKED_CHARS] if error else None)
