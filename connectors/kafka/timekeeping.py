"""The executor's work with time: requests held until their due time (timers, signal
deadlines, retry back-offs), released when due or dropped when their run ended; calls
abandoned at their timeout.

A collaborator of :class:`.executor.KafkaExecutor` (which holds one :class:`Timekeeper`).
Holding costs no thread: a held request is an entry in a heap
(:class:`~eddies.connectors.execution.held_requests.HeldRequests`) and its APP.requests
offset stays uncommitted (a restart reads it again) until it is released, or dropped
because an orchestrator said its run ended (``Router.cancel_held``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import orjson

from eddies.connectors.execution.call_deadlines import CallDeadlines, timed_out
from eddies.connectors.execution.calls import result_event
from eddies.connectors.remote.error_classes import describe_error
from eddies.connectors.runtime.json_logs import ids
from eddies.events import AgentEvent, CallStatus, DurableCallRequest, encode

if TYPE_CHECKING:
    from eddies.connectors.execution.held_requests import HeldRequests
    from eddies.connectors.kafka.claiming import SendResult
    from eddies.connectors.runtime.counters import Counters
    from eddies.connectors.runtime.dead_letters import DeadLetters

log = logging.getLogger("eddies.worker")

#: What a call thread reports when it is done with a request: (APP.requests partition,
#: offset, call, whether the request is settled, the request if the executor's loop is to
#: dispatch it again).
CallDone = tuple[int | None, int, tuple[str, int], bool, AgentEvent | None]


class Timekeeper:
    """Held requests and call timeouts (see the module's docstring), for the Kafka executor.
    It shares the executor's ``lock`` and calls back into it only through ``settle``,
    ``dispatch``, ``send_result``, ``journal_outcome`` and ``replace_thread``; ``done``
    is the queue its call threads report to."""

    def __init__(self, *, counters: Counters, dead_letters: DeadLetters,
                 held: HeldRequests[tuple[AgentEvent, int | None, int, int]],
                 deadlines: CallDeadlines[tuple[AgentEvent, int | None, int]],
                 lock: threading.Lock,
                 done: queue.SimpleQueue[CallDone],
                 settle: Callable[[int | None, int], None],
                 dispatch: Callable[[AgentEvent, int | None, int, int], None],
                 send_result: SendResult, journal_outcome: Callable[[AgentEvent, bytes], None],
                 replace_thread: Callable[[], None]) -> None:
        self.counters = counters
        self.dead_letters = dead_letters
        #: Requests held until their not_before time: (request, partition, offset, produced ms).
        self.held = held
        #: Running calls with a timeout_ms: (request, partition, offset) of each.
        self.deadlines = deadlines
        self.lock = lock
        self.done = done
        self.settle = settle  # (under lock)
        self.dispatch = dispatch  # (under lock)
        self.send_result = send_result
        self.journal_outcome = journal_outcome
        #: Starts a call thread in place of one an abandoned call holds (under lock).
        self.replace_thread = replace_thread

    def cancel(self, msg: Any, part: int, offset: int) -> None:
        """A record of calls whose run ended (Router.cancel_held): stop holding them."""
        try:
            refs = [(str(cid), int(attempt)) for cid, attempt in orjson.loads(msg.value() or b"")]
        except (orjson.JSONDecodeError, TypeError, ValueError) as err:
            self.dead_letters.write(msg.value(), msg.key(), f"unreadable cancel record: {err}",
                                    source=msg)
        else:
            self.drop_held(refs)
        with self.lock:
            self.settle(part, offset)

    def abandon_expired(self) -> None:
        """Calls past their timeout_ms: answered as a transient TimeoutError (journaled, so a
        restart does not run them again), their late results to be dropped; a new call
        thread takes the place of each one they still hold."""
        for request, part, offset in self.deadlines.expired():
            req = request.payload
            assert isinstance(req, DurableCallRequest)
            result = result_event(request, CallStatus.ERROR, "null",
                                  describe_error(timed_out(req)))
            data = encode(result)
            self.journal_outcome(request, data)
            self.send_result(result, data)
            self.counters.inc("calls_timed_out")
            log.info("call %s (%s %s) abandoned after its timeout of %d ms: answered as a "
                     "TimeoutError", req.call_id, req.kind.value, req.target, req.timeout_ms,
                     extra=ids(call=req.call_id))
            with self.lock:
                self.replace_thread()
            self.done.put((part, offset, (req.call_id, req.attempt), True, None))

    def drop_held(self, refs: Iterable[tuple[str, int]]) -> None:
        """Stop holding the requests of calls ``refs`` ((call id, attempt)) no run waits
        for any more (their run ended): a finished run's deadline, or the deadline of an
        answered wait, no longer waits here until it is due."""
        with self.lock:
            for _, part, offset, _ in self.held.drop(refs):
                self.settle(part, offset)

    def release_due(self) -> None:
        """Dispatch the held requests that are due now."""
        due = self.held.next_due
        if due is None or due > time.time() * 1000:
            return
        with self.lock:
            for request, part, offset, produced_ms in self.held.pop_due(time.time() * 1000):
                self.dispatch(request, part, offset, produced_ms)
