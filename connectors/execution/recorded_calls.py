"""Call outcomes recorded by another application, offered to a re-run of its inputs
(``eddies reprocess``): a call the re-run makes is answered from the recording instead of
being made again when it is the same call: same place, same digest of kind, target and
arguments, and for a model call the same model (its setup's, as the recorded reply names
it); any other call is made live. ``reused`` and ``live`` say which was which (a fork,
which takes its history over instead, uses it with no outcomes: it counts the calls it
took over with :meth:`RecordedCalls.reused_from_record`, and those made live).
Example::

    recorded = RecordedCalls(outcomes, source=lambda cid: cid)
    runner = LocalRunner(new_agent, recorded=recorded)
"""

from __future__ import annotations

import json
from collections.abc import Callable

from eddies.connectors.execution.calls import MODEL_KEY, result_event
from eddies.engine import AgentPlan
from eddies.events import (
    AgentEvent,
    CallKind,
    CallStatus,
    DurableCallRequest,
    DurableCallResult,
    ErrorCategory,
    ErrorInfo,
)
from eddies.events.ids import call_digest

#: (call id, attempt) -> the recorded result event of that call.
Outcomes = dict[tuple[str, int], AgentEvent]
#: The error type of a call's result when a refusal rule did not let it be made.
REFUSED_ERROR = "CallRefusedError"


class RecordedCalls:
    """Recorded outcomes, and which calls of a re-run used them."""

    def __init__(self, outcomes: Outcomes, *,
                 source: Callable[[str], str | None] = lambda cid: cid,
                 plan: AgentPlan | None = None,
                 refuse: Callable[[DurableCallRequest], str | None] | None = None,
                 fresh: Callable[[DurableCallRequest], bool] | None = None) -> None:
        self.outcomes = outcomes
        #: Calls made live though the recording may answer them (an evaluation's live models).
        self.fresh = fresh
        #: Why a call the recording does not answer may not be made live (None: it may);
        #: a refused call fails with a CallRefusedError saying so (an evaluation's rule).
        self.refuse = refuse
        #: The re-run's plan: a model call whose setup now names another model than the
        #: one that answered (``extra_args["model"]``) is another call.
        self.plan = plan
        #: The recorded call id that a re-run's call id stands for (None: none).
        self.source = source
        # Each call once, however many attempts it made (a retried call is one call): in
        # ``live`` if any attempt was made live (what the re-run spent), else in ``reused``.
        self._reused: dict[str, None] = {}
        self._live: dict[str, None] = {}

    @property
    def reused(self) -> list[str]:
        """The calls (ids, in the order first asked) whose every attempt was answered
        from the recording."""
        return list(self._reused)

    @property
    def live(self) -> list[str]:
        """The calls (ids, in the order first made live) of which an attempt was made live."""
        return list(self._live)

    def reused_from_record(self, call_id: str) -> None:
        """Count ``call_id`` as answered from the recording (unless an attempt of it was
        made live): what :meth:`answer` does, for calls answered another way (a fork's
        history taken over)."""
        if call_id not in self._live:
            self._reused[call_id] = None

    def _made_live(self, call_id: str) -> None:
        self._reused.pop(call_id, None)
        self._live[call_id] = None

    def answer(self, request: AgentEvent) -> AgentEvent | None:
        """The result of ``request`` from the recording, or None: make the call live."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        origin = None if self.fresh is not None and self.fresh(req) else self.source(req.call_id)
        recorded = None if origin is None else self.outcomes.get((origin, req.attempt))
        result = None if recorded is None else recorded.payload
        asked = req.digest or call_digest(req.kind, req.target, req.args)
        if not isinstance(result, DurableCallResult) or result.digest != asked \
                or not self._same_model(request, result):
            why = None if self.refuse is None else self.refuse(req)
            if why is not None:
                return result_event(request, CallStatus.ERROR, "null", ErrorInfo(
                    REFUSED_ERROR, why, category=ErrorCategory.PERMANENT))
            self._made_live(req.call_id)
            return None
        self.reused_from_record(req.call_id)
        # Answered as this request's own result: its id and scope are the re-run's.
        return result_event(request, result.status, result.value, result.error)

    def _same_model(self, request: AgentEvent, result: DurableCallResult) -> bool:
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        if req.kind is not CallKind.CHAT_MODEL or self.plan is None:
            return True
        try:
            answered = (json.loads(result.value).get("extra_args") or {}).get(MODEL_KEY)
        except (ValueError, AttributeError):
            return True
        plan = self.plan.for_scope(request.scope) if request.scope else self.plan
        return answered is None or answered == plan.chat_model(req.target).model
