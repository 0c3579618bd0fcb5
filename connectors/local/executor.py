"""An in-process executor: performs durable-call requests and journals their outcomes.

Before a non-idempotent call it journals that the call started; if it finds that mark
without an outcome (the process died mid-call), it answers UNKNOWN instead of calling
again, and the session machine reconciles or fails closed.

A call whose client is asynchronous (a model connection's ``chat_async``, an embedding
connection's ``embed_async``, MCP and A2A tools, sub-agents with ``perform_async``) is
awaited as the Kafka executor awaits it: on an event loop, here one for every in-process
executor of the process (litellm's asynchronous clients stay bound to the loop they first
ran on), stopped at its ``timeout_ms``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from eddies.connectors.execution.call_deadlines import timed_out, within
from eddies.connectors.execution.call_hooks import CallAdmission
from eddies.connectors.execution.calls import CallPerformer, Resolver, import_target, result_event
from eddies.connectors.execution.recorded_calls import RecordedCalls
from eddies.connectors.remote.error_classes import describe_error
from eddies.connectors.remote.loop_thread import LoopThread
from eddies.engine import AgentPlan, Journal
from eddies.events import AgentEvent, CallStatus, DurableCallRequest

__all__ = ["InProcessExecutor", "import_target"]

#: Where every in-process executor of this process awaits its asynchronous calls.
_CALL_LOOP = LoopThread("eddies-local-calls")


class InProcessExecutor:
    """Performs requests one at a time in this process (async functions on a private loop)."""

    def __init__(self, plan: AgentPlan, journal: Journal, resolver: Resolver,
                 recorded: RecordedCalls | None = None,
                 counted: Callable[[dict[str, float]], None] | None = None) -> None:
        self.plan = plan
        self.journal = journal
        self.performer = CallPerformer(plan, resolver, counted)
        self.admission = CallAdmission(plan, counted)
        self.performed = 0
        #: Outcomes of another run, reused for the calls they answer (fork, reprocess).
        self.recorded = recorded
        # (kind, target, scope) of the calls whose clients are synchronous: not looked up
        # again (a lookup is a few thousand instructions per call of the engine's benches).
        self._synchronous: set[tuple[str, str, tuple[str, ...]]] = set()

    def execute(self, request: AgentEvent) -> AgentEvent:
        """The result event of a request: recorded, UNKNOWN, or freshly performed."""
        req = request.payload
        if not isinstance(req, DurableCallRequest):
            raise TypeError(f"not a DurableCallRequest: {request.type}")
        recorded = self.journal.outcome(req.call_id, req.attempt)
        if recorded is not None:
            return recorded
        if self.recorded is not None and (borrowed := self.recorded.answer(request)) is not None:
            self.journal.record_outcome(req.call_id, req.attempt, borrowed)
            return borrowed
        if not req.idempotent:
            if self.journal.started(req.call_id, req.attempt):
                return result_event(request, CallStatus.UNKNOWN)
            self.journal.mark_started(req.call_id, req.attempt)
        try:
            refused = self.admission.refused(request)
            returned = self._perform(req, request.scope) if refused is None else refused
            result = self.performer.outcome(request, returned)
        except Exception as err:
            result = result_event(request, CallStatus.ERROR, "null", describe_error(err))
        self.performed += 1
        self.journal.record_outcome(req.call_id, req.attempt, result)
        return result

    def _perform(self, req: DurableCallRequest, scope: tuple[str, ...] = ()) -> Any:
        """Perform ``req``: awaited on the call loop if its client is asynchronous (cancelled
        at its ``timeout_ms``); else here, or with a ``timeout_ms``, on a thread of its own
        that is abandoned (left to finish, its result dropped) when the time is up."""
        target = (req.kind._value_, req.target, scope)  # (.value is a Python-level property)
        if target not in self._synchronous:
            call = self.performer.asynchronous(req, scope)
            if call is not None:
                return _CALL_LOOP.run(within(call.call, req), None)
            self._synchronous.add(target)
        if not req.timeout_ms:
            return self.performer.perform(req, scope)
        box: list[Any] = []
        done = threading.Event()

        def run() -> None:
            performer = CallPerformer(self.plan, self.performer.resolver)
            try:
                box.append((True, performer.perform(req, scope)))
            except BaseException as err:
                box.append((False, err))
            finally:
                performer.close()
                done.set()

        threading.Thread(target=run, daemon=True, name=f"eddies-call-{req.call_id}").start()
        if not done.wait(req.timeout_ms / 1000):
            raise timed_out(req)
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """Close the performer's event loop, if one was started."""
        self.performer.close()
