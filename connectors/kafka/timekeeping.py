"""The executor's work with time: requests held until their due time (timers, signal
deadlines, retry back-offs), released when due or dropped when their run ended; calls
abandoned at their timeout.

A part of :class:`.executor.KafkaExecutor` (mixed into it). Holding costs no thread: a
held request is an entry in a heap (:class:`~eddies.connectors.execution.held_requests.HeldRequests`)
and its APP.requests offset stays uncommitted (a restart reads it again) until it is
released, or dropped because an orchestrator said its run ended (``Router.cancel_held``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson

from eddies.connectors.execution.call_deadlines import CallDeadlines, timed_out
from eddies.connectors.execution.calls import result_event
from eddies.connectors.execution.held_requests import HeldRequests
from eddies.connectors.remote.error_classes import describe_error
from eddies.connectors.runtime.json_logs import ids
from eddies.events import AgentEvent, CallStatus, DurableCallRequest, encode

if TYPE_CHECKING:
    from eddies.connectors.runtime.counters import Counters
    from eddies.connectors.runtime.dead_letters import DeadLetters
    from eddies.connectors.runtime.settings import Settings
    from eddies.connectors.runtime.topics import TopicNames

log = logging.getLogger("eddies.worker")


class Timekeeping:
    """Held requests and call timeouts (see the module's docstring), for the Kafka executor."""

    if TYPE_CHECKING:  # provided by KafkaExecutor
        settings: Settings
        names: TopicNames
        counters: Counters
        dead_letters: DeadLetters
        producer: Any
        held: HeldRequests[tuple[AgentEvent, int | None, int, int]]
        deadlines: CallDeadlines[tuple[AgentEvent, int | None, int]]
        _lock: threading.Lock
        _spare: int
        _done: queue.SimpleQueue[tuple[int | None, int, tuple[str, int], bool]]

        def _settle(self, part: int | None, offset: int) -> None: ...
        def _journal_outcome(self, request: AgentEvent, data: bytes) -> None: ...
        def _dispatch(self, request: AgentEvent, part: int | None, offset: int,
                      produced_ms: int) -> None: ...
        def _send_result(self, result: AgentEvent, data: bytes | None = None) -> None: ...
        def _start_call_thread(self) -> None: ...

    def _cancel(self, msg: Any, part: int, offset: int) -> None:
        """A record of calls whose run ended (Router.cancel_held): stop holding them."""
        try:
            refs = [(str(cid), int(attempt)) for cid, attempt in orjson.loads(msg.value() or b"")]
        except (orjson.JSONDecodeError, TypeError, ValueError) as err:
            self.dead_letters.write(msg.value(), msg.key(), f"unreadable cancel record: {err}",
                                    source=msg)
        else:
            self.drop_held(refs)
        with self._lock:
            self._settle(part, offset)

    def _abandon_expired(self) -> None:
        """Calls past their timeout_ms: answered as a transient TimeoutError (journaled, so a
        restart does not run them again), their late results to be dropped; a new call
        thread takes the place of each one they still hold."""
        for request, part, offset in self.deadlines.expired():
            req = request.payload
            assert isinstance(req, DurableCallRequest)
            result = result_event(request, CallStatus.ERROR, "null",
                                  describe_error(timed_out(req)))
            data = encode(result)
            self._journal_outcome(request, data)
            self._send_result(result, data)
            self.counters.inc("calls_timed_out")
            log.info("call %s (%s %s) abandoned after its timeout of %d ms: answered as a "
                     "TimeoutError", req.call_id, req.kind.value, req.target, req.timeout_ms,
                     extra=ids(call=req.call_id))
            with self._lock:
                self._spare += 1
                self._start_call_thread()
            self._done.put((part, offset, (req.call_id, req.attempt), True))

    def drop_held(self, refs: Iterable[tuple[str, int]]) -> None:
        """Stop holding the requests of calls ``refs`` ((call id, attempt)) no run waits
        for any more (their run ended): a finished run's deadline, or the deadline of an
        answered wait, no longer waits here until it is due."""
        with self._lock:
            for _, part, offset, _ in self.held.drop(refs):
                self._settle(part, offset)

    def _release_due(self) -> None:
        """Dispatch the held requests that are due now."""
        due = self.held.next_due
        if due is None or due > time.time() * 1000:
            return
        with self._lock:
            for request, part, offset, produced_ms in self.held.pop_due(time.time() * 1000):
                self._dispatch(request, part, offset, produced_ms)
