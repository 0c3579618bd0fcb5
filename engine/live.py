"""What a session machine keeps only in memory for the work in flight: the live arguments
and callables of durable calls (:class:`LiveCalls`) and suspended ``async def`` actions
(:class:`SuspendedActions`).

Neither is in the session state: a model call's arguments are the conversation so far
(kept there they would make every snapshot, and Flink keyed state, carry it), and
functions and coroutines do not serialise. Correctness never depends on them: a replay
of the waiting action from the journal computes them again.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from .state import Invocation, RunState, SessionState

#: What is kept of a call in flight: its encoded arguments, and a FUNCTION call's
#: function and reconciler (None: none, or one named by text).
LiveCall = tuple[str, Callable[..., Any] | None, Callable[..., Any] | None]


def _prefixes(session_ids: Iterable[str]) -> tuple[str, ...]:
    # A call id starts with its session id and then ':' (or '/' and a sub-agent scope);
    # a session id may hold either itself, so its own prefix is what tells.
    return tuple(p for sid in session_ids for p in (sid + ":", sid + "/"))


class LiveCalls(dict[str, LiveCall]):
    """The calls in flight, by call id: their encoded arguments (to ask again after a
    restart or an unknown outcome) and the live function of FUNCTION calls.

    A dict (``live[call_id] = (args, fn, reconciler)``; ``live.pop(call_id, None)`` once
    the call needs nothing kept): every durable call goes in and out on the hot path, and
    dict methods are plain C calls there."""

    __slots__ = ()

    def args(self, call_id: str) -> str | None:
        """The arguments of call ``call_id``, if known here."""
        entry = self.get(call_id)
        return None if entry is None else entry[0]

    def callables(self, call_id: str) -> tuple[Callable[..., Any], Callable[..., Any] | None] | None:
        """The function and reconciler of FUNCTION call ``call_id``, if known here."""
        entry = self.get(call_id)
        if entry is None or entry[1] is None:
            return None
        return entry[1], entry[2]

    def forget_all(self, call_ids: Iterable[str]) -> None:
        """None of ``call_ids`` needs anything kept any more (their run ended)."""
        pop = self.pop
        for cid in call_ids:
            pop(cid, None)

    def forget_sessions(self, session_ids: Iterable[str]) -> None:
        """Drop what is kept for the calls of ``session_ids``."""
        prefixes = _prefixes(session_ids)
        for cid in [c for c in self if c.startswith(prefixes)]:
            del self[cid]

    def kept(self) -> int:
        """Arguments and callables kept (for leak checks): a FUNCTION call keeps both."""
        return sum(1 if entry[1] is None else 2 for entry in self.values())


#: What is held for a suspended action: its coroutine, its step, and the run it belongs to.
Held = tuple[Coroutine[Any, Any, Any], Any, RunState]


class SuspendedActions(dict[tuple[str, int, int], Held]):
    """``async def`` actions suspended at a call, by (session, run, invocation), resumed in
    place while their run object is the live one; after a restore (new state objects)
    they are replayed instead. A dict: the run loop looks one up on every activation of
    an ``async def`` action, and ``pop`` is then a plain C call."""

    __slots__ = ()

    @staticmethod
    def key(state: SessionState, run: RunState, inv: Invocation) -> tuple[str, int, int]:
        return (state.session_id, run.number, inv.number)

    def drop(self, state: SessionState, run: RunState, inv: Invocation) -> None:
        """Forget (and close) the suspended execution of ``inv``, if any."""
        held = self.pop((state.session_id, run.number, inv.number), None)
        if held is not None:
            held[0].close()

    def forget_sessions(self, session_ids: Iterable[str]) -> None:
        """Forget (and close) the suspended actions of ``session_ids``."""
        sessions = set(session_ids)
        for key in [k for k in self if k[0] in sessions]:
            self.pop(key)[0].close()


__all__ = ["Held", "LiveCall", "LiveCalls", "SuspendedActions"]
