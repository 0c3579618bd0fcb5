"""Where a reader is in each partition, and the embedded broker's skipped-record workaround.

Under concurrent producers to one partition, the embedded broker can hand a reader a fetch
that skips records (they become visible after the reader passed their offsets; see
shared BROKER-NOTES, defect 9). A reader that sees an offset past the one it expected, or
reaches the end of a partition short of it, seeks back and reads from there once. Offsets
skipped for good (transaction markers) cost that one re-fetch, which is why readers of
topics written in transactions switch it off. Example::

    positions = Positions(reread_gaps=True)
    for msg in batch:
        back = positions.gap(msg.partition(), msg.offset())
        if back is not None:
            consumer.seek(TopicPartition(topic, msg.partition(), back))
            continue  # and ignore the rest of this batch for that partition
        apply(msg)
        positions.advance(msg.partition(), msg.offset())
"""

from __future__ import annotations


class Positions:
    """Next offset per partition of the records applied, and the gaps already re-read."""

    def __init__(self, reread_gaps: bool) -> None:
        self.reread_gaps = reread_gaps
        self.next: dict[int, int] = {}
        self._reread: dict[int, int] = {}  # partition -> the offset a gap was re-read from

    def gap(self, partition: int, offset: int) -> int | None:
        """The offset to read ``partition`` again from, if records before ``offset`` were
        skipped and that gap was not re-read yet; None: apply the record."""
        expected = self.next.get(partition, offset)
        if offset > expected and self.reread_gaps and self._reread.get(partition) != expected:
            self._reread[partition] = expected
            return expected
        return None

    def gap_at_end(self, partition: int, end: int) -> int | None:
        """Like :meth:`gap` for the end of ``partition`` (``end``: the offset after its last
        record, as a PARTITION_EOF reports it)."""
        if partition not in self.next:
            return None
        return self.gap(partition, end)

    def advance(self, partition: int, offset: int) -> None:
        """The record at ``offset`` was applied."""
        self.next[partition] = offset + 1

    def start(self, partition: int, offset: int) -> None:
        """Reading ``partition`` begins (or goes on) at ``offset``."""
        self.next[partition] = offset

    def forget(self, partition: int) -> None:
        """``partition`` is no longer read here."""
        self.next.pop(partition, None)
        self._reread.pop(partition, None)
