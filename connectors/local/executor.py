"""An in-process executor: performs durable-call requests and journals their outcomes.

Before a non-idempotent call it journals that the call started; if it finds that mark
without an outcome (the process died mid-call), it answers UNKNOWN instead of calling
again, and the session machine reconciles or fails closed.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from eddies.engine import AgentPlan, Journal
from eddies.engine.context import message_from_value
from eddies.events import (
    AgentEvent,
    CallKind,
    CallStatus,
    DurableCallRequest,
    DurableCallResult,
    ErrorInfo,
    decode_value,
    encode_value,
)
from eddies.events.ids import call_digest, result_event_id

Resolver = Callable[[DurableCallRequest], Callable[..., Any] | None]


def import_target(target: str) -> Callable[..., Any]:
    """The function named ``module:qualname``; a LookupError says why it cannot be found."""
    module_name, _, qualname = target.partition(":")
    if "<" in qualname:
        raise LookupError(
            f"durable function {target} is a lambda or local function and is not registered in "
            "this process; use a module-level function for calls run by separate executors"
        )
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise LookupError(f"durable function {target} cannot be imported: {err}") from None
    if not callable(obj):
        raise LookupError(f"durable function {target} is not callable")
    fn: Callable[..., Any] = obj
    return fn


class InProcessExecutor:
    """Performs requests one at a time in this process (async functions on a private loop)."""

    def __init__(self, plan: AgentPlan, journal: Journal, resolver: Resolver) -> None:
        self.plan = plan
        self.journal = journal
        self.resolver = resolver
        self.performed = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def execute(self, request: AgentEvent) -> AgentEvent:
        """The result event of a request: recorded, UNKNOWN, or freshly performed."""
        req = request.payload
        if not isinstance(req, DurableCallRequest):
            raise TypeError(f"not a DurableCallRequest: {request.type}")
        recorded = self.journal.outcome(req.call_id, req.attempt)
        if recorded is not None:
            return recorded
        if not req.idempotent:
            if self.journal.started(req.call_id, req.attempt):
                return self._result(request, req, CallStatus.UNKNOWN, "null", None)
            self.journal.mark_started(req.call_id, req.attempt)
        try:
            value = encode_value(self._perform(req), f"result of {req.target}")
            result = self._result(request, req, CallStatus.OK, value, None)
        except Exception as err:
            result = self._result(request, req, CallStatus.ERROR, "null", ErrorInfo.of(err))
        self.journal.record_outcome(req.call_id, req.attempt, result)
        return result

    def close(self) -> None:
        """Close the private event loop, if one was started."""
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    def _result(
        self,
        request: AgentEvent,
        req: DurableCallRequest,
        status: CallStatus,
        value: str,
        error: ErrorInfo | None,
    ) -> AgentEvent:
        # A reconciler answers for a call whose digest the machine already checked.
        reconcile = req.kind is CallKind.RECONCILE
        dig = "" if reconcile else call_digest(req.kind.value, req.target, req.args)
        payload = DurableCallResult(req.call_id, req.kind, status, value, error, req.attempt, dig)
        return AgentEvent.external(
            request.session_id,
            payload,
            event_id=result_event_id(req.call_id, req.attempt),
            timestamp=request.timestamp,
            scope=request.scope,
        )

    def _perform(self, req: DurableCallRequest) -> Any:
        call = decode_value(req.args, f"arguments of {req.call_id}")
        args, kwargs = call.get("args", []), call.get("kwargs", {})
        kind = req.kind
        if kind is CallKind.FUNCTION:
            return self._call(self.resolver(req) or import_target(req.target), args, kwargs)
        if kind is CallKind.RECONCILE:
            fn = self.resolver(req) or import_target(req.target)
            if _takes_no_arguments(fn):
                return self._call(fn, [], {})
            return self._call(fn, args, kwargs)
        if kind is CallKind.CHAT_MODEL:
            setup = self.plan.chat_model(req.target)
            conn = self.plan.resource(setup.connection)
            messages = [message_from_value(m) for m in kwargs.pop("messages")]
            tools = self.plan.tool_specs(req.target)
            return self._call(
                conn.chat, [messages], {"model": setup.model, "tools": tools, **setup.arguments, **kwargs}
            )
        if kind is CallKind.TOOL:
            return self._call(self.plan.tool(req.target).fn, args, kwargs)
        raise NotImplementedError(f"{kind.value} calls are not supported by the in-process executor")

    def _call(self, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
        result = fn(*args, **kwargs)
        # Cheaper than inspect.isawaitable (an ABC check) on every plain result.
        if hasattr(result, "__await__"):
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            result = self._loop.run_until_complete(result)
        self.performed += 1
        return result


def _takes_no_arguments(fn: Callable[..., Any]) -> bool:
    try:
        return not inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
