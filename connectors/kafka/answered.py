"""The calls an executor answered lately, until its journal tail has surely read their
outcomes back.

A call's outcome is journaled and its result sent the moment it returns; the executor's
own journal tail reads that outcome back a little later. A request for the same call that
arrives in between (a session's restore re-issues the requests of its open calls while
their first copies are still on ``APP.requests``) found neither the call in flight nor its
outcome in the journal, and made the call again. Example::

    answered = AnsweredHere(keep_s=30.0)
    answered.add(("s1:r1:i1:c0", 1), now=time.monotonic())
    ("s1:r1:i1:c0", 1) in answered  # True: its result is on its way, not asked again
"""

from __future__ import annotations

from eddies.connectors.journal.reading import CallRef

#: How long a call answered here is remembered: far longer than its outcome takes to be
#: read back, even by a tail that waited on the brokers.
ANSWERED_KEPT_S = 30.0


class AnsweredHere:
    """Calls answered by this executor in the last ``keep_s`` seconds."""

    __slots__ = ("_at", "keep_s")

    def __init__(self, keep_s: float = ANSWERED_KEPT_S) -> None:
        self.keep_s = keep_s
        self._at: dict[CallRef, float] = {}  # in the order they were answered

    def __contains__(self, ref: object) -> bool:
        return ref in self._at

    def add(self, ref: CallRef, now: float) -> None:
        """``ref`` was answered (its result sent) at ``now`` (``time.monotonic()``); those
        answered more than ``keep_s`` before are forgotten."""
        at = self._at
        at.pop(ref, None)
        at[ref] = now
        while True:
            old = next(iter(at))
            if now - at[old] <= self.keep_s:
                break
            del at[old]
