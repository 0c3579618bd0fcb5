"""The hooks of the executor side: whether a call may be made at all
(:meth:`eddies.engine.hooks.Hook.admit`), and what is journaled of a call that returned,
the value as the plan's hooks let it be written (:meth:`~eddies.engine.hooks.Hook.on_result`)
or their refusal. Shared by every executor, so that a refusal is decided once and a result
is redacted before the journal, the events topic or a stream sees it. Example::

    refused = CallAdmission(plan).refused(request)   # None: make the call
    hooks = hooks_on_results(plan, request.scope)
    value = hooked_value(hooks, request, encode_value(returned)) if hooks else encode_value(returned)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eddies.engine import AgentPlan
from eddies.engine.hooks import (
    CallView,
    Hook,
    HookCounts,
    Refusal,
    admission,
    admitting_hooks,
    on_result,
    result_hooks,
)
from eddies.events import AgentEvent, DurableCallRequest, decode_value, encode_value


def hooks_on_results(plan: AgentPlan, scope: tuple[str, ...]) -> tuple[Hook, ...]:
    """The hooks that see the results of calls made in ``scope`` (its caller's, then its own)."""
    return result_hooks((plan.for_scope(scope) if scope else plan).hooks)


def hooks_admitting(plan: AgentPlan, scope: tuple[str, ...]) -> tuple[Hook, ...]:
    """The hooks that decide whether the calls made in ``scope`` may be made."""
    return admitting_hooks((plan.for_scope(scope) if scope else plan).hooks)


def _view(request: AgentEvent, counts: HookCounts | None) -> CallView:
    req = request.payload
    assert isinstance(req, DurableCallRequest)
    asked = decode_value(req.args, "arguments of", req.call_id)
    return CallView(req.kind, req.target, asked.get("args", []), asked.get("kwargs", {}), request.session_id,
                    request.run, request.scope, req.identity, counts)


def call_refusal(hooks: tuple[Hook, ...], request: AgentEvent,
                 counts: HookCounts | None = None) -> Refusal | None:
    """Whether ``hooks`` refuse the call of ``request`` (see :meth:`Hook.admit`)."""
    return admission(hooks, _view(request, counts))


class CallAdmission:
    """Whether an executor may make each call: the plan's hooks that admit calls, asked
    once, right before it is made (found once per sub-agent scope). ``counted``: where
    what they count goes. Example::

        refused = admission.refused(request)
        returned = refused if refused is not None else performer.perform(req, request.scope)
        result = performer.outcome(request, returned)   # a refusal: the call's error
    """

    __slots__ = ("_hooks", "counted", "plan")

    def __init__(self, plan: AgentPlan, counted: Callable[[dict[str, float]], None] | None = None) -> None:
        self.plan = plan
        self.counted = counted
        self._hooks: dict[tuple[str, ...], tuple[Hook, ...]] = {}

    def admits(self, scope: tuple[str, ...]) -> bool:
        """Whether hooks decide if the calls made in ``scope`` may be made."""
        if not self.plan.any_hooks:
            return False
        hooks = self._hooks.get(scope)
        if hooks is None:
            hooks = self._hooks[scope] = hooks_admitting(self.plan, scope)
        return bool(hooks)

    def refused(self, request: AgentEvent) -> Refusal | None:
        """The refusal of ``request``'s call (None: make it; at once for a plan without
        such hooks). It may wait on I/O: not on an event loop."""
        if not self.admits(request.scope):
            return None
        counts = HookCounts()
        refusal = call_refusal(self._hooks[request.scope], request, counts)
        if counts.counts and self.counted is not None:
            self.counted(counts.counts)
        return refusal


def hooked_value(hooks: tuple[Hook, ...], request: AgentEvent, value: str,
                 counts: HookCounts | None = None) -> str | Refusal:
    """``value`` (JSON text: what the call returned) as ``hooks`` let it be journaled, or
    the refusal; what they count goes into ``counts``."""
    call = _view(request, counts)
    decided: Any = on_result(hooks, call, decode_value(value, "result of", call.target))
    if isinstance(decided, Refusal):
        return decided
    return encode_value(decided, "result of", call.target)


__all__ = ["CallAdmission", "call_refusal", "hooked_value", "hooks_admitting", "hooks_on_results"]
