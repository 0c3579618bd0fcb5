"""What an executor journals of a call that returned: the value as the plan's hooks let
it be written (:meth:`eddies.engine.hooks.Hook.on_result`), or their refusal. Shared by
every executor, so that a result is redacted before the journal, the events topic or a
stream sees it. Example::

    hooks = hooks_on_results(plan, request.scope)
    value = hooked_value(hooks, request, encode_value(returned)) if hooks else encode_value(returned)
"""

from __future__ import annotations

from typing import Any

from eddies.engine import AgentPlan
from eddies.engine.hooks import CallView, Hook, HookCounts, Refusal, on_result, result_hooks
from eddies.events import AgentEvent, DurableCallRequest, decode_value, encode_value


def hooks_on_results(plan: AgentPlan, scope: tuple[str, ...]) -> tuple[Hook, ...]:
    """The hooks that see the results of calls made in ``scope`` (its caller's, then its own)."""
    return result_hooks((plan.for_scope(scope) if scope else plan).hooks)


def hooked_value(hooks: tuple[Hook, ...], request: AgentEvent, value: str,
                 counts: HookCounts | None = None) -> str | Refusal:
    """``value`` (JSON text: what the call returned) as ``hooks`` let it be journaled, or
    the refusal; what they count goes into ``counts``."""
    req = request.payload
    assert isinstance(req, DurableCallRequest)
    asked = decode_value(req.args, "arguments of", req.call_id)
    call = CallView(req.kind, req.target, asked.get("args", []), asked.get("kwargs", {}), request.session_id,
                    request.run, request.scope, counts)
    decided: Any = on_result(hooks, call, decode_value(value, "result of", req.target))
    if isinstance(decided, Refusal):
        return decided
    return encode_value(decided, "result of", req.target)


__all__ = ["hooked_value", "hooks_on_results"]
