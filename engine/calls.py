"""What an action's durable calls are before the machine records them: call specs, the
awaitable an ``async def`` action awaits, and the specs of timers and signal waits.

An action's ``ctx`` builds a :class:`CallSpec` per call; the action's step (a
:class:`CallSite`: :class:`eddies.engine.step.Step`) gives it its id and journal record.
Handles, awaitables and sub-agent calls are typed against :class:`CallSite`, so this module
depends on no context or machine. Example (what ``ctx.sleep(5)`` asks for)::

    spec = timer_spec(due_after=5_000)   # a TIMER call due 5 s after the session's clock
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from eddies.events import CallKind, ChatMessage, Event, Identity, MessageRole, ToolCall

from .content import block_of
from .durable import Outcome
from .memory import Memory
from .plan_view import PlanView
from .state import CallRecord

if TYPE_CHECKING:
    from .resources import ChatModelSetup


class Suspend(BaseException):
    """Unwinds a sync action at its first call without an outcome (never seen by users)."""


SUSPEND = object()  # what an async action's awaitable yields to the machine


class CallSite(Protocol):
    """What the durable calls of one running action go through (its step): ids, journal
    records, outcomes, and what tool calls read of the plan and memory."""

    @property
    def plan(self) -> PlanView: ...

    @property
    def config(self) -> Mapping[str, Any]: ...

    @property
    def short_term_memory(self) -> Memory: ...

    @property
    def session_id(self) -> str: ...

    @property
    def identity(self) -> Identity | None:
        """Who asked for the run (None: anonymous)."""

    @property
    def trigger(self) -> Event:
        """The event the action runs for."""

    def now(self) -> int: ...

    def next_call_id(self, ahead: int = 0) -> str:
        """The id the call made ``ahead`` calls from now will have."""

    def claim(self, spec: CallSpec) -> None:
        """Give ``spec`` the id of the next call, whether or not it is issued now."""

    def record(self, spec: CallSpec) -> CallRecord | None:
        """The call's journal record if it has an outcome; else register it and return None."""

    @property
    def calls(self) -> Mapping[str, CallRecord]:
        """The journal records of the calls this run made, by call id."""

    def answer(self, rec: CallRecord, spec: CallSpec) -> Any:
        """What the action gets of a call that has its outcome (its error raised)."""

    def call_now(self, spec: CallSpec) -> Any:
        """The call's answer, or :class:`Suspend` raised until it has one."""

    def abandon(self, call_ids: list[str]) -> None:
        """Calls of a batch no longer needed (another answered first)."""

    def wake_on_any(self) -> None:
        """Resume the action when any call it waits for is done, not all."""


class HasCallSite(Protocol):
    """An action's ``ctx``, as sub-agent calls take it: it leads to the action's step."""

    @property
    def step(self) -> CallSite: ...


class CallAwaitable:
    """Awaitable of ``durable_execute_async``/``durable_execute_all_async``."""

    __slots__ = ("_batch", "_first", "_site", "_window", "specs")

    def __init__(self, site: CallSite, specs: list[CallSpec], batch: bool, *,
                 window: int | None = None, first: bool = False) -> None:
        self._site = site
        #: The calls it makes, in order (``durable_execute_all_async`` takes them over).
        self.specs = specs
        self._batch = batch
        # At most ``window`` calls of the batch in flight; ``first``: the first to finish.
        self._window = window
        self._first = first

    def __await__(self) -> Generator[Any, None, Any]:
        site = self._site
        if self._window is not None or self._first:
            return (yield from self._gradually())
        if not self._batch:  # one call: the common case, without the lists
            spec = self.specs[0]
            rec = site.record(spec)
            if rec is None:
                yield SUSPEND
                rec = site.calls[spec.cid]
            return site.answer(rec, spec)
        records = [site.record(spec) for spec in self.specs]
        pending = False
        for r in records:
            if r is None:
                pending = True
        if pending:
            yield SUSPEND
            # The machine resumes a live action only once every call has its outcome.
            calls = site.calls
            records = [calls[spec.cid] for spec in self.specs]
        return [_outcome(site, rec, spec) for rec, spec in zip(records, self.specs, strict=True)]  # type: ignore[arg-type]

    def _gradually(self) -> Generator[Any, None, Any]:
        """A batch whose calls are issued as room frees up (``window``), or that ends when
        its first call does (``first``: the others are abandoned). The action is resumed
        each time one of its calls has its outcome."""
        site, specs = self._site, self.specs
        for spec in specs:  # ids by place in the batch, whichever are issued when
            site.claim(spec)
        while True:
            calls = site.calls
            records: list[CallRecord | None] = []
            busy = 0
            for spec in specs:
                rec = calls.get(spec.cid)
                if rec is None and self._window is not None and busy >= self._window:
                    records.append(None)  # not yet: the window is full
                    continue
                rec = site.record(spec)  # issued now, waited for again, or done
                busy += rec is None
                records.append(rec)
            if self._first:
                done = [i for i, r in enumerate(records)
                        if r is not None and (r.error is None or r.error.type != ABANDONED)]
                if done:
                    won = done[0]
                    site.abandon([s.cid for i, (s, r) in enumerate(zip(specs, records, strict=True))
                                  if i != won and r is None])
                    return won, _outcome(site, records[won], specs[won])  # type: ignore[arg-type]
            elif all(r is not None for r in records):
                return [_outcome(site, r, s) for r, s in zip(records, specs, strict=True)]  # type: ignore[arg-type]
            site.wake_on_any()
            yield SUSPEND


#: The error of a call its batch no longer needed (another answered first).
ABANDONED = "DurableCallAbandonedError"


def _outcome(site: CallSite, rec: CallRecord, spec: CallSpec) -> Outcome:
    """A call's Outcome in a batch (a sub-agent's: its Result as the value, never an error)."""
    try:
        return Outcome(value=site.answer(rec, spec))
    except Exception as err:
        return Outcome(error=err)


class CallSpec:
    """One durable call an action asks for: its kind, target and arguments (what the
    journal records and a replay compares), and how the call may be performed."""

    __slots__ = ("args", "cid", "due_after", "due_at", "fn", "idempotent", "kind", "kwargs",
                 "notice", "reconciler", "result", "target")

    def __init__(
        self,
        kind: CallKind,
        target: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        fn: Callable[..., Any] | None = None,
        reconciler: Callable[..., Any] | str | None = None,
        idempotent: bool = False,
    ) -> None:
        self.kind = kind
        self.target = target
        self.args = args
        self.kwargs = kwargs
        self.fn = fn
        self.reconciler = reconciler
        self.idempotent = idempotent
        self.cid = ""
        # When an executor may perform it: at a logical time, or this many ms after the
        # clock when it is first issued (then recorded: a replay does not move it).
        self.due_at: int | None = None
        self.due_after: int | None = None
        # An event announcing the call (an approval request), emitted once, when the call
        # is first issued.
        self.notice: Event | None = None
        # What an awaiting action gets of the call's record instead of its value (a
        # sub-agent's Result), if not the value.
        self.result: Callable[[CallRecord, str], Any] | None = None


def duration_ms(duration: float | timedelta, what: str) -> int:
    """``duration`` (seconds, or a timedelta) in ms; ValueError naming ``what`` if it is
    not a duration >= 0."""
    seconds = duration.total_seconds() if isinstance(duration, timedelta) else duration
    if not isinstance(seconds, int | float) or not seconds >= 0:
        raise ValueError(f"{what}: the duration must be a number of seconds >= 0 or a "
                         f"timedelta, got {duration!r}")
    return round(seconds * 1000)


def timer_spec(*, due_after: int | None = None, due_at: int | None = None) -> CallSpec:
    """A TIMER call: due ``due_after`` ms after the clock when first issued, or at ``due_at``."""
    # The call's identity is what was asked (so a replay matches it); its due time is
    # decided once, when it is first issued.
    asked = {"after_ms": due_after} if due_at is None else {"at_ms": due_at}
    spec = CallSpec(CallKind.TIMER, "sleep", (), asked, idempotent=True)
    spec.due_after, spec.due_at = due_after, due_at
    return spec


def signal_wait_spec(name: str, timeout: float | timedelta | None) -> CallSpec:
    """A SIGNAL call: a wait for signal ``name``, with a deadline ``timeout`` after the
    clock when first issued (None: none)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"wait_for_signal: the name must be non-empty text, got {name!r}")
    after = None if timeout is None else duration_ms(timeout, "wait_for_signal timeout")
    spec = CallSpec(CallKind.SIGNAL, name, (), {"timeout_ms": after}, idempotent=True)
    spec.due_after = after
    return spec


# --- a model call as the journal holds it (the chat action's, a handle's, a memory's) ---
def chat_spec(name: str, setup: ChatModelSetup, messages: Sequence[Any],
              arguments: Mapping[str, Any]) -> CallSpec:
    """The durable call that asks CHAT_MODEL ``name`` (of ``setup``) about ``messages``."""
    return CallSpec(CallKind.CHAT_MODEL, name, (),
                    {"messages": [message_args(m) for m in messages], **arguments},
                    idempotent=setup.idempotent)


_ROLES = {role.value: role for role in MessageRole}


def message_args(message: ChatMessage | Mapping[str, Any]) -> Any:
    """A message as a model call's arguments hold it: without ``blocks`` when it has none,
    so that calls journaled before messages had blocks compare equal when replayed."""
    if isinstance(message, ChatMessage):
        if message.blocks:
            return message
        return {"role": message.role, "content": message.content, "tool_calls": message.tool_calls,
                "tool_call_id": message.tool_call_id, "extra_args": message.extra_args}
    if isinstance(message, Mapping) and "blocks" in message and not message["blocks"]:
        return {k: v for k, v in message.items() if k != "blocks"}
    return message


def message_from_value(value: Mapping[str, Any]) -> ChatMessage:
    """A ChatMessage from its JSON value (as returned by a CHAT_MODEL call).

    A model connection can return anything: a reply whose parts are not of the schema's
    types raises TypeError naming the part (the chat action fails, not the worker that
    would write the event). Null content (common beside tool calls) reads as "".
    """
    if type(value) is not dict and not isinstance(value, Mapping):  # (a dict without the ABC check)
        raise TypeError(f"chat model reply: expected a message object, got {type(value).__name__}")
    content = value.get("content")
    if content is None:
        content = ""
    elif not isinstance(content, str):
        raise TypeError(f"chat model reply: content: expected text, got {type(content).__name__}")
    calls = value.get("tool_calls")
    tool_calls = []
    for k, t in enumerate(calls or ()):
        call = ToolCall(t["id"], t["name"], t.get("arguments") or {})
        if not isinstance(call.id, str) or not isinstance(call.name, str):
            raise TypeError(f"chat model reply: tool_calls[{k}]: id and name must be text, got "
                            f"{type(call.id).__name__} and {type(call.name).__name__}")
        tool_calls.append(call)
    answered = value.get("tool_call_id")
    if answered is not None and not isinstance(answered, str):
        raise TypeError(f"chat model reply: tool_call_id: expected text, got {type(answered).__name__}")
    blocks = value.get("blocks")
    return ChatMessage(_ROLES[value.get("role", "assistant")], content, tool_calls, answered,
                       value.get("extra_args", {}), [block_of(b) for b in blocks] if blocks else [])
