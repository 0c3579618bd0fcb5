"""Call outcomes recorded by another application, offered to a re-run of its inputs
(``eddies reprocess``): a call the re-run makes is answered from the recording instead of
being made again when it is the same call: same place, same digest of kind, target and
arguments, and for a model call the same model (its setup's, as the recorded reply names
it); any other call is made live. ``reused`` and ``live`` say which was which (a fork,
which takes its history over instead, uses it with no outcomes to list its live calls).
Example::

    recorded = RecordedCalls(outcomes, source=lambda cid: cid)
    runner = LocalRunner(new_agent, recorded=recorded)
"""

from __future__ import annotations

import json
from collections.abc import Callable

from eddies.engine import AgentPlan
from eddies.events import AgentEvent, CallKind, DurableCallRequest, DurableCallResult
from eddies.events.ids import call_digest

from .calls import MODEL_KEY, result_event

#: (call id, attempt) -> the recorded result event of that call.
Outcomes = dict[tuple[str, int], AgentEvent]


class RecordedCalls:
    """Recorded outcomes, and which calls of a re-run used them."""

    def __init__(self, outcomes: Outcomes, *,
                 source: Callable[[str], str | None] = lambda cid: cid,
                 plan: AgentPlan | None = None) -> None:
        self.outcomes = outcomes
        #: The re-run's plan: a model call whose setup now names another model than the
        #: one that answered (``extra_args["model"]``) is another call.
        self.plan = plan
        #: The recorded call id that a re-run's call id stands for (None: none).
        self.source = source
        self.reused: list[str] = []
        self.live: list[str] = []

    def answer(self, request: AgentEvent) -> AgentEvent | None:
        """The result of ``request`` from the recording, or None: make the call live."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        origin = self.source(req.call_id)
        recorded = None if origin is None else self.outcomes.get((origin, req.attempt))
        result = None if recorded is None else recorded.payload
        if not isinstance(result, DurableCallResult):
            self.live.append(req.call_id)
            return None
        asked = req.digest or call_digest(req.kind, req.target, req.args)
        if result.digest != asked or not self._same_model(request, result):
            self.live.append(req.call_id)
            return None
        self.reused.append(req.call_id)
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
