"""Who started a non-idempotent call: the claim a started mark carries.

Before it performs a non-idempotent call, an executor appends a started mark to the call's
journal partition, reads that partition back to its own mark, and performs the call only
if its mark is the first one for the call (the partition's order decides between two
workers that both believe they own the session, as during a rebalance). The mark's value
names the claimant: the worker slot (``instance_id``, or host and process id) and the
process incarnation. A worker that finds another's mark without an outcome waits for the
outcome; a mark of an earlier incarnation of its own slot is a dead process's, so the
outcome is unknown at once. Example::

    me = Claimant("slot-1", "9f2c")
    Claimant.parse(me.token) == me                   # True
    Claimant("slot-1", "0001").is_dead_to(me)        # True: my slot, another incarnation
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Claimant:
    """A worker process that may start calls: its slot and its incarnation."""

    slot: str
    incarnation: str

    @property
    def token(self) -> bytes:
        """The started mark's value."""
        return f"{self.slot}|{self.incarnation}".encode()

    @classmethod
    def parse(cls, token: bytes) -> Claimant:
        """The claimant a started mark names (marks of older versions name none: ``('', '')``)."""
        slot, sep, incarnation = token.decode(errors="replace").rpartition("|")
        return cls(slot, incarnation) if sep else cls("", "")

    def is_dead_to(self, me: Claimant) -> bool:
        """Whether this claimant is an earlier process of ``me``'s slot (a slot runs one
        process at a time, so it has stopped)."""
        return bool(self.slot) and self.slot == me.slot and self.incarnation != me.incarnation


@dataclass(frozen=True, slots=True)
class Claim:
    """The first started mark of a call in its journal partition; ``time_ms``: its record's
    timestamp (ms since the epoch, 0: unknown), when the call was started."""

    token: bytes
    offset: int
    time_ms: int = 0
