"""Which offsets of APP.requests an executor may commit, when its calls finish out of order.

An executor process (``role = "executor"``) reads requests in partition order but settles
them in any order: calls run side by side, timers are held, some wait for another worker's
outcome. An offset may be committed only past a prefix of settled requests, so that a
restart reads again every request not settled yet (Kafka Streams and the parallel
consumer keep the same per-partition watermark). A worker with both roles gets requests in
memory and has no offsets to commit.

Example::

    offsets = RequestOffsets()
    offsets.read(0, 10)
    offsets.read(0, 11)
    offsets.settle(0, 11)       # 10 still runs: nothing to commit
    offsets.advance()
    assert not offsets.pending
    offsets.settle(0, 10)
    offsets.advance()
    assert offsets.take() == {0: 12}
"""

from __future__ import annotations


class RequestOffsets:
    """Per partition of APP.requests: the requests read and whether each is settled."""

    def __init__(self) -> None:
        self._open: dict[int, dict[int, bool]] = {}  # partition -> offset -> settled
        #: partition -> next offset to commit, not committed yet.
        self.pending: dict[int, int] = {}
        #: partition -> the offsets committed last (the membership check compares them).
        self.committed: dict[int, int] = {}

    def read(self, part: int, offset: int) -> None:
        """A request was read at ``offset`` (in order)."""
        self._open.setdefault(part, {})[offset] = False

    def settle(self, part: int | None, offset: int) -> None:
        """The request at ``offset`` needs no more work (``part`` None: it came in memory)."""
        if part is not None:
            offsets = self._open.get(part)
            if offsets is not None and offset in offsets:
                offsets[offset] = True

    def advance(self) -> None:
        """Move each partition's commit point over its settled prefix."""
        for part, offsets in self._open.items():
            while offsets:
                first = next(iter(offsets))
                if not offsets[first]:
                    break
                offsets.pop(first)
                self.pending[part] = first + 1

    def take(self) -> dict[int, int]:
        """The offsets to commit now (counted as committed from here on)."""
        taken = dict(self.pending)
        self.committed.update(taken)
        self.pending.clear()
        return taken

    def forget(self, partitions: set[int]) -> None:
        """``partitions`` were revoked: their next owner reads their requests again."""
        for part in partitions:
            self._open.pop(part, None)
            self.pending.pop(part, None)
            self.committed.pop(part, None)
