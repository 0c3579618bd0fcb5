"""Where a call to a provider waits before it starts: the provider's limits (this
executor's share of them: :mod:`eddies.connectors.models.provider_limits`) and its
Retry-After. One gate per provider, on an executor's call loop; the calls that wait are
let through in the order they came.

Requests per minute are spaced (one every ``60 / rate`` seconds, no burst: any window of
the fleet's calls stays within the rate), tokens per minute likewise by each call's
estimate, with up to :data:`TOKENS_AHEAD_S` of tokens let through early, and corrected by
what the reply's usage says it took. Example (on the loop)::

    gates = ProviderGates()
    gate = gates.gate("llm", ProviderLimits(requests_per_minute=600))
    waited = await gate.enter(tokens=120, wanted=lambda: True)  # None: not wanted any more
    try:
        reply = await make_the_call()
    finally:
        gate.leave(estimated=120, used=reply_tokens)
    gates.recut(0.5)                                       # this executor owns half the partitions
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from eddies.connectors.models.provider_limits import ProviderBusyError, ProviderLimits, limits_of

#: How far ahead of its token budget a call may start (seconds of the token rate): a
#: call's tokens are an estimate, and a provider counts them over a minute.
TOKENS_AHEAD_S = 1.0

_NO_LIMITS = ProviderLimits()


@dataclass
class _Waiter:
    future: asyncio.Future[float | None]
    tokens: int
    wanted: Callable[[], bool]
    since: float


class ProviderGate:
    """The calls to one provider: how many run, who waits, and when the next may start.
    Used on its loop's thread only."""

    def __init__(self, name: str, limits: ProviderLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.limits = limits or _NO_LIMITS
        self._clock = clock
        self.share = 1.0  # of the fleet's limits: the part of the partitions owned here
        self.running = 0  # calls let through, not yet left
        self.waits = 0  # calls that had to wait (all time)
        self.waited_s = 0.0  # how long they waited, together
        self.held_calls = 0  # of those, calls that waited for a Retry-After
        self._waiting: deque[_Waiter] = deque()
        self._next_request = 0.0  # when the next request may start
        self._tokens_until = 0.0  # the token budget is spent up to then
        self._held_until = 0.0  # a Retry-After: nothing starts before
        self._wake: asyncio.Event | None = None
        self._pump: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """How many calls wait now."""
        return len(self._waiting)

    def hold(self, seconds: float) -> None:
        """The provider said Retry-After ``seconds``: no call to it starts before then."""
        self._held_until = max(self._held_until, self._clock() + seconds)

    def held(self) -> float:
        """Seconds left of a Retry-After hold (0: none)."""
        return max(0.0, self._held_until - self._clock())

    def recut(self, share: float) -> None:
        """This executor's share of the fleet's limits is now ``share`` (0 to 1)."""
        self.share = share
        self._kick()

    async def enter(self, tokens: int, wanted: Callable[[], bool]) -> float | None:
        """Wait until a call of about ``tokens`` tokens may start; the seconds it waited,
        or None if ``wanted()`` turned false meanwhile (its partition left: not made).
        Past ``max_wait_s`` of waiting: ProviderBusyError. Every :meth:`enter` that
        returns a number is followed by a :meth:`leave`."""
        now = self._clock()
        if not self._waiting and self._delay(tokens, now) == 0.0:
            self._take(tokens, now)
            return 0.0
        future: asyncio.Future[float | None] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(future, tokens, wanted, now)
        self._waiting.append(waiter)
        self._kick()
        if self.held() > 0:
            self.held_calls += 1
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled() and future.exception() is None \
                    and future.result() is not None:
                self.leave(tokens, None)  # let through as it was cancelled: give its place back
            raise

    def leave(self, estimated: int, used: int | None) -> None:
        """A call let through ended; ``used``: the tokens its reply says it took (None:
        unknown, the estimate stands)."""
        self.running -= 1
        rate = self._tokens_per_s()
        if used is not None and rate:
            self._tokens_until += (used - estimated) / rate
        self._kick()

    # --- the pump -------------------------------------------------------------------------
    def _places(self) -> int | None:
        at_once = self.limits.calls_at_once
        return None if at_once is None else max(1, int(at_once * self.share))

    def _requests_per_s(self) -> float:
        rpm = self.limits.requests_per_minute
        return 0.0 if rpm is None else rpm * self.share / 60

    def _tokens_per_s(self) -> float:
        tpm = self.limits.tokens_per_minute
        return 0.0 if tpm is None else tpm * self.share / 60

    def _delay(self, tokens: int, now: float) -> float | None:
        """Seconds before a call of ``tokens`` may start (None: not until a call leaves or
        the share grows)."""
        places = self._places()
        if places is not None and self.running >= places:
            return None
        limits = self.limits
        if self.share <= 0 and (limits.requests_per_minute or limits.tokens_per_minute):
            return None
        wait = self._held_until - now
        if limits.requests_per_minute:
            wait = max(wait, self._next_request - now)
        if limits.tokens_per_minute:
            wait = max(wait, self._tokens_until - TOKENS_AHEAD_S - now)
        return max(0.0, wait)

    def _take(self, tokens: int, now: float) -> None:
        self.running += 1
        rate = self._requests_per_s()
        if rate:
            self._next_request = max(self._next_request, now) + 1 / rate
        rate = self._tokens_per_s()
        if rate:
            self._tokens_until = max(self._tokens_until, now) + tokens / rate

    def _kick(self) -> None:
        if not self._waiting:
            return
        if self._pump is None or self._pump.done():
            self._wake = asyncio.Event()
            self._pump = asyncio.get_running_loop().create_task(self._let_through())
        elif self._wake is not None:
            self._wake.set()

    async def _let_through(self) -> None:
        """Let the waiting calls through in order, each when it may start."""
        assert self._wake is not None
        wake, waiting, max_wait = self._wake, self._waiting, self.limits.max_wait_s
        while waiting:
            head = waiting[0]
            now = self._clock()
            if head.future.done() or not head.wanted():
                waiting.popleft()
                if not head.future.done():
                    head.future.set_result(None)
                continue
            if max_wait is not None and now - head.since >= max_wait:
                waiting.popleft()
                head.future.set_exception(ProviderBusyError(
                    f"provider {self.name!r}: no place within max_wait_s={max_wait:g} "
                    f"({self._describe()})"))
                continue
            delay = self._delay(head.tokens, now)
            if delay == 0.0:
                waiting.popleft()
                self._take(head.tokens, now)
                waited = now - head.since
                self.waits += 1
                self.waited_s += waited
                head.future.set_result(waited)
                continue
            if max_wait is not None:
                left = head.since + max_wait - now
                delay = left if delay is None else min(delay, left)
            wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), delay)

    def _describe(self) -> str:
        limits = self.limits
        said = [f"{k}={v:g}" for k, v in (("calls_at_once", limits.calls_at_once),
                                           ("requests_per_minute", limits.requests_per_minute),
                                           ("tokens_per_minute", limits.tokens_per_minute))
                if v is not None]
        return f"{', '.join(said) or 'no limits'}, this worker's share {self.share:.2f}, " \
               f"{len(self._waiting)} waiting, {self.running} running"


class ProviderGates:
    """An executor's gates, by provider (its connection's resource name), made at a
    provider's first call. Used on the call loop's thread; :meth:`snapshot` from any."""

    def __init__(self) -> None:
        self._gates: dict[str, ProviderGate] = {}
        self.share = 1.0

    def gate(self, provider: str, limits: ProviderLimits | None) -> ProviderGate:
        """``provider``'s gate (made with ``limits`` at its first call)."""
        gate = self._gates.get(provider)
        if gate is None:
            gate = self._gates[provider] = ProviderGate(provider, limits)
            gate.share = self.share
        return gate

    def recut(self, share: float) -> None:
        """This executor's share of every provider's limits is now ``share``."""
        self.share = share
        for gate in list(self._gates.values()):
            gate.recut(share)

    def snapshot(self) -> dict[str, tuple[int, int, int, float]]:
        """By provider: (calls waiting, running, that waited, seconds waited together)."""
        return {name: (g.waiting, g.running, g.waits, g.waited_s)
                for name, g in list(self._gates.items())}


def unenforced(resources: Iterable[tuple[str, Any]]) -> str | None:
    """What is wrong with the first of ``resources`` (name, object) that declares limits no
    executor can hold (None: none does). Limits hold the calls made on the call loop, with a
    connection's asynchronous client (``chat_async``, ``embed_async``); one with ``chat``
    or ``embed`` only has its calls made on call threads, where they would not wait."""
    for name, conn in resources:
        if limits_of(conn) is None:
            continue
        if not any(callable(getattr(conn, client, None)) for client in ("chat_async", "embed_async")):
            return (f"{name}: limits: {type(conn).__name__} has no asynchronous client (chat_async "
                    "or embed_async), and limits hold only the calls made with one; give it one, "
                    "or declare the limits on a connection that has it")
    return None
