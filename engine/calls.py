"""What an action's durable calls are before the machine records them: call specs, the
awaitable an ``async def`` action awaits, and the specs of timers and signal waits.

An action's ``ctx`` builds a :class:`CallSpec` per call; :meth:`RunnerContext._record`
gives it its id and journal record. Example (what ``ctx.sleep(5)`` asks for)::

    spec = timer_spec(due_after=5_000)   # a TIMER call due 5 s after the session's clock
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from eddies.events import CallKind, Event

from .durable import Outcome

if TYPE_CHECKING:
    from .context import RunnerContext
    from .state import CallRecord


class Suspend(BaseException):
    """Unwinds a sync action at its first call without an outcome (never seen by users)."""


SUSPEND = object()  # what an async action's awaitable yields to the machine


class CallAwaitable:
    """Awaitable of ``durable_execute_async``/``durable_execute_all_async``."""

    __slots__ = ("_batch", "_ctx", "_first", "_specs", "_window")

    def __init__(self, ctx: RunnerContext, specs: list[CallSpec], batch: bool, *,
                 window: int | None = None, first: bool = False) -> None:
        self._ctx = ctx
        self._specs = specs
        self._batch = batch
        # At most ``window`` calls of the batch in flight; ``first``: the first to finish.
        self._window = window
        self._first = first

    def __await__(self) -> Generator[Any, None, Any]:
        ctx = self._ctx
        if self._window is not None or self._first:
            return (yield from self._gradually())
        if not self._batch:  # one call: the common case, without the lists
            spec = self._specs[0]
            rec = ctx._record(spec)
            if rec is None:
                yield SUSPEND
                rec = ctx._run.calls[spec.cid]
            return ctx._answer(rec, spec)
        records = [ctx._record(spec) for spec in self._specs]
        pending = False
        for r in records:
            if r is None:
                pending = True
        if pending:
            yield SUSPEND
            # The machine resumes a live action only once every call has its outcome.
            calls = ctx._run.calls
            records = [calls[spec.cid] for spec in self._specs]
        return [_outcome(ctx, rec, spec) for rec, spec in zip(records, self._specs, strict=True)]  # type: ignore[arg-type]

    def _gradually(self) -> Generator[Any, None, Any]:
        """A batch whose calls are issued as room frees up (``window``), or that ends when
        its first call does (``first``: the others are abandoned). The action is resumed
        each time one of its calls has its outcome."""
        ctx, specs = self._ctx, self._specs
        for spec in specs:  # ids by place in the batch, whichever are issued when
            ctx._claim(spec)
        while True:
            calls = ctx._run.calls
            records: list[CallRecord | None] = []
            busy = 0
            for spec in specs:
                rec = calls.get(spec.cid)
                if rec is None and self._window is not None and busy >= self._window:
                    records.append(None)  # not yet: the window is full
                    continue
                rec = ctx._record(spec)  # issued now, waited for again, or done
                busy += rec is None
                records.append(rec)
            if self._first:
                done = [i for i, r in enumerate(records)
                        if r is not None and (r.error is None or r.error.type != ABANDONED)]
                if done:
                    won = done[0]
                    ctx.abandon = [s.cid for i, (s, r) in enumerate(zip(specs, records, strict=True))
                                   if i != won and r is None]
                    return won, _outcome(ctx, records[won], specs[won])  # type: ignore[arg-type]
            elif all(r is not None for r in records):
                return [_outcome(ctx, r, s) for r, s in zip(records, specs, strict=True)]  # type: ignore[arg-type]
            ctx.wake_any = True
            yield SUSPEND


#: The error of a call its batch no longer needed (another answered first).
ABANDONED = "DurableCallAbandonedError"


def _outcome(ctx: RunnerContext, rec: CallRecord, spec: CallSpec) -> Outcome:
    """A call's Outcome in a batch (a sub-agent's: its Result as the value, never an error)."""
    try:
        return Outcome(value=ctx._answer(rec, spec))
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
