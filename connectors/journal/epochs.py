"""Ownership epochs: which process may write a partition's journal records, decided by the
journal's own order.

A worker that gains a partition appends an *epoch marker* (``own/ROLE/PARTITION``, its
value the process's claimant token) to that journal partition before it reads or writes
anything else there; the marker's offset is its epoch. Every snapshot an orchestrator writes
carries its epoch (and the input offset and session step it reflects) in front of the
state; every tombstone it writes carries the epoch in the ``eddies.epoch`` header. A reader
folds a journal partition in order and refuses a stamped record whose epoch is older than
the latest marker of its role before it: that record was written by a process that had
already lost the partition (paused past the group's session timeout, or cut off from the
brokers, and not yet told). The log's order decides, so this holds whatever the clocks say
and whether or not the broker's transactions isolate (the embedded broker's do not).

Records without a stamp (written by tools such as ``eddies fork``, or by older workers) are
taken as they are. Example::

    fence = Fence()
    fence.mark(12)                              # own/orchestrator/P at offset 12
    fence.admits(stamp_of(snapshot(b"{}", Stamp(epoch=5, offset=40, seq=3))))  # False
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from eddies.connectors.journal.claims import Claimant

#: The roles that hold partitions (each has markers of its own).
ORCHESTRATOR = "orchestrator"
EXECUTOR = "executor"
#: The epoch of a journal tombstone (a tombstone has no value to stamp).
EPOCH_HEADER = "eddies.epoch"
#: No epoch: a record or reader from before any marker.
NO_EPOCH = -1

# A stamped snapshot starts with these two bytes (a state's JSON starts with "{"), then the
# epoch, the input offset and the session step (seq) it reflects, big-endian.
_MAGIC = b"\x00\x01"
_STAMP = struct.Struct(">2sqqq")


@dataclass(frozen=True, slots=True)
class Stamp:
    """What a snapshot reflects: the writer's ``epoch``, the next input ``offset`` of its
    partition when it was taken (every record before it was applied), and the session's
    ``seq`` then."""

    epoch: int
    offset: int
    seq: int


def marker_key(role: str, partition: int) -> bytes:
    """The journal key of ``role``'s epoch marker in ``partition``."""
    return f"own/{role}/{partition}".encode()


def parse_marker(rest: str) -> tuple[str, int] | None:
    """(role, partition) of a marker key's part after ``own/``; None if it is not one."""
    role, _, part = rest.partition("/")
    if role not in (ORCHESTRATOR, EXECUTOR) or not part.isdigit():
        return None
    return role, int(part)


def snapshot(state: bytes, stamp: Stamp) -> bytes:
    """A snapshot record's value: ``state`` (``SessionState.to_bytes()``) stamped."""
    return _STAMP.pack(_MAGIC, stamp.epoch, stamp.offset, stamp.seq) + state


def stamp_of(value: bytes) -> Stamp | None:
    """The stamp of a snapshot record's value; None for an unstamped one."""
    if value[:2] != _MAGIC or len(value) < _STAMP.size:
        return None
    _, epoch, offset, seq = _STAMP.unpack_from(value)
    return Stamp(epoch, offset, seq)


def state_of(value: bytes) -> bytes:
    """The state bytes of a snapshot record's value (stamped or not)."""
    return value[_STAMP.size:] if value[:2] == _MAGIC else value


def epoch_headers(epoch: int) -> list[tuple[str, bytes]]:
    """Headers of a tombstone written in ``epoch``."""
    return [(EPOCH_HEADER, str(epoch).encode())]


def header_epoch(value: bytes | None) -> int | None:
    """The epoch an ``eddies.epoch`` header's value names (None: absent or unreadable)."""
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Marker:
    """An epoch marker read back: its offset (the epoch) and who wrote it."""

    epoch: int
    owner: Claimant


class Fence:
    """The latest marker of one role in one journal partition, as a reader folds it."""

    __slots__ = ("epoch",)

    def __init__(self) -> None:
        self.epoch = NO_EPOCH

    def mark(self, offset: int) -> None:
        """A marker at ``offset`` was read."""
        if offset > self.epoch:
            self.epoch = offset

    def admits(self, stamp: Stamp | None) -> bool:
        """Whether a record stamped ``stamp`` (None: unstamped) was written by the owner of
        the latest marker before it, or by no worker that takes part in fencing."""
        return stamp is None or stamp.epoch >= self.epoch

    def admits_epoch(self, epoch: int | None) -> bool:
        """:meth:`admits` for a tombstone's header epoch."""
        return epoch is None or epoch >= self.epoch
