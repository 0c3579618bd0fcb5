"""Sub-agents: an AGENT resource called from an action, as in Apache Flink Agents' sub-agent
design. ``ctx.get_resource(name, ResourceType.AGENT)`` returns a :class:`Subagent`; its
call is a durable call whose answer is a :class:`Result`, never an exception.

An internal sub-agent (an ``Agent`` registered as the resource, marked
``subagent_compatible``) runs inside the caller's session, in a child scope: the prompt is
its InputEvent, its events carry the scope path and reach none of the caller's actions,
and its last OutputEvent is the answer (never sent to APP.output). Example::

    @action(InputEvent)
    async def start(event, ctx):
        reviewer = ctx.get_resource("reviewer", ResourceType.AGENT)
        verdict = reviewer.call(ctx, f"review: {event.input}")      # sync actions too
        a, b = await ctx.durable_execute_all_async([                 # in parallel
            reviewer.as_async_callable(ctx, "one"), reviewer.as_async_callable(ctx, "two")])
        ctx.send_event(OutputEvent(output=verdict.result if verdict.success else "no review"))
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from eddies.events import CallKind, decode_value

from .calls import CallAwaitable, CallSpec, HasCallSite, duration_ms
from .durable import durable_error
from .state import CallRecord

#: The error type of a sub-agent call that did not finish within its timeout (the
#: Result's exception is then a ``SubagentTimeoutError``, a ``TimeoutError``).
TIMEOUT = "SubagentTimeoutError"


@dataclass(frozen=True)
class Result:
    """What a sub-agent call came to: ``success`` and its ``result`` (the sub-agent's
    output), or the ``exception`` it failed with (a timeout is a ``SubagentTimeoutError``)."""

    success: bool
    result: Any = None
    exception: Exception | None = None


#: The reconciler target of an external sub-agent's calls (RECONCILE requests).
RECONCILER = "subagent:"
#: What a model is told a sub-agent takes, unless its setup says otherwise.
PROMPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "description": "What to ask it, in full: it sees "
                                                                "nothing else of this conversation."}},
    "required": ["prompt"], "additionalProperties": False}


class SubagentSetup:
    """The base of external sub-agents (an AGENT resource performed by executors, as a
    durable call): an agent behind HTTP, A2A, or anything a subclass reaches. It says what
    a model calling it is told (``description``, and ``input_schema``: the arguments a model
    gives instead of one ``prompt``), whether a call made again after a crash is safe
    (``idempotent``: the call id travels as an idempotency key the far side honours), and
    whether an unknown outcome can be looked up (``reconciles``: :meth:`reconcile`).
    A subclass whose client is asynchronous may also define ``async def perform_async``
    (same arguments): an executor then awaits it on its call loop, and thousands of such
    calls wait at once without a thread each. Example (a subclass)::

        class Translator(SubagentSetup):
            def perform(self, prompt, *, session_id, call_id, timeout_s):
                return my_client.translate(prompt, request_id=call_id, timeout=timeout_s)

            async def perform_async(self, prompt, *, session_id, call_id, timeout_s):
                return await my_async_client.translate(prompt, request_id=call_id)
    """

    description: str = ""
    input_schema: dict[str, Any] | None = None
    idempotent: bool = True
    reconciles: bool = False
    #: How long one call may take (seconds), unless the caller gives a timeout.
    timeout_s: float = 300.0
    #: Whether ``perform`` and ``reconcile`` (and their async forms) take ``identity=``:
    #: who asked for the run (an :class:`~eddies.events.Identity`, None when anonymous),
    #: to pass on (the HTTP and A2A setups send it as headers). An executor passes it
    #: only then, so a subclass written without it keeps working.
    takes_identity: bool = False

    def timeout_of(self, kwargs: dict[str, Any] | None) -> float:
        """How long a call (its arguments ``kwargs``) may take, in seconds: its caller's
        ``timeout``, else this setup's."""
        asked = (kwargs or {}).get("timeout_ms")
        return self.timeout_s if asked is None else asked / 1000

    def perform(self, prompt: Any, *, session_id: str | None, call_id: str, timeout_s: float) -> Any:
        """Call the sub-agent; its answer (JSON), or an exception (classified like any)."""
        raise NotImplementedError(f"{type(self).__name__}.perform")

    def reconcile(self, prompt: Any, *, session_id: str | None, call_id: str, timeout_s: float) -> Any:
        """After a crash left call ``call_id``'s outcome unknown: its answer, found (and
        waited for) on the far side, or the call made now if it never arrived there; an
        exception if that cannot be told (the call then fails closed)."""
        raise NotImplementedError(f"{type(self).__name__}.reconcile")


class Subagent:
    """An AGENT resource, as an action calls it (what ``ctx.get_resource`` returns)."""

    __slots__ = ("description", "name", "setup")

    def __init__(self, name: str, description: str = "", setup: SubagentSetup | None = None) -> None:
        self.name = name
        self.description = description
        self.setup = setup  # an external sub-agent's; None for an internal one

    def call(self, ctx: HasCallSite, prompt: Any, session_id: str | None = None, *,
             timeout: float | timedelta | None = None) -> Result:
        """Call the sub-agent with ``prompt`` and wait for its Result (it never raises).
        ``session_id`` names a sub-session whose short-term memory later calls with the same
        id see again (``ctx.next_session_id()`` makes one that is the same after a failover);
        ``timeout`` (seconds, logical time) fails the call with a ``SubagentTimeoutError``
        and cancels what the sub-agent was doing."""
        result: Result = ctx.step.call_now(subagent_call(self.name, self.setup, prompt, session_id, timeout))
        return result

    def as_async_callable(self, ctx: HasCallSite, prompt: Any, session_id: str | None = None, *,
                          timeout: float | timedelta | None = None) -> CallAwaitable:
        """:meth:`call` as an awaitable (in ``async def`` actions), which
        ``ctx.durable_execute_all_async([...])`` also takes, to call several in parallel."""
        spec = subagent_call(self.name, self.setup, prompt, session_id, timeout)
        return CallAwaitable(ctx.step, [spec], batch=False)


def subagent_call(name: str, setup: SubagentSetup | None, prompt: Any, session_id: str | None,
                  timeout: float | timedelta | None) -> CallSpec:
    """The durable call of sub-agent ``name`` (``setup``: an external one's) with ``prompt``;
    its answer is a :class:`Result`."""
    kwargs: dict[str, Any] = {"prompt": prompt}
    if session_id is not None:
        kwargs["session_id"] = str(session_id)
    if timeout is not None:
        kwargs["timeout_ms"] = duration_ms(timeout, f"sub-agent {name!r} timeout")
    spec = CallSpec(CallKind.SUBAGENT, name, (), kwargs,
                    idempotent=True if setup is None else setup.idempotent)
    if setup is not None and setup.reconciles:
        spec.reconciler = RECONCILER + name
    spec.result = as_result
    return spec


def as_result(rec: CallRecord, cid: str) -> Result:
    """The Result of a sub-agent call that has its outcome."""
    if rec.error is not None:
        return Result(False, None, durable_error(cid, rec.error))
    return Result(True, decode_value(rec.value))


__all__ = ["PROMPT_SCHEMA", "RECONCILER", "TIMEOUT", "Result", "Subagent", "SubagentSetup", "as_result",
           "subagent_call"]
