"""Reading the compacted journal topic back into memory on partition assignment.

The broker's queried end offsets cannot be trusted (the embedded broker reports the
start of the last batch), so a partition counts as restored only when the consumer
reports PARTITION_EOF, which the fetch high watermark drives correctly.

Journal records carry no headers: the key names the kind (``snap/``, ``out/``,
``start/``), and librdkafka's per-record cost doubles with any header at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .client import read_records
from .settings import Settings


@dataclass
class JournalView:
    """The journal of some partitions: latest snapshots, call outcomes, started marks."""

    snapshots: dict[str, bytes] = field(default_factory=dict)
    outcomes: dict[tuple[str, int], bytes] = field(default_factory=dict)
    started: set[tuple[str, int]] = field(default_factory=set)
    records: int = 0

    def learn_calls(self, other: JournalView) -> None:
        """Add the call outcomes and started marks of ``other`` (partitions read later)."""
        self.outcomes.update(other.outcomes)
        self.started |= other.started

    def apply(self, key: bytes, value: bytes | None) -> None:
        """Fold one journal record (a None value is a tombstone)."""
        text = key.decode()
        kind, _, rest = text.partition("/")
        if kind == "snap":
            if value is None:
                self.snapshots.pop(rest, None)
            else:
                self.snapshots[rest] = value
            return
        cid, _, attempt_text = rest.rpartition("/")
        ref = (cid, int(attempt_text))
        if kind == "out":
            if value is None:
                self.outcomes.pop(ref, None)
            else:
                self.outcomes[ref] = value
        elif kind == "start":
            if value is None:
                self.started.discard(ref)
            else:
                self.started.add(ref)


def read_journal(settings: Settings, topic: str, partitions: set[int], timeout: float = 60.0) -> JournalView:
    """Read ``partitions`` of the journal from the beginning to their true end (TimeoutError
    if no progress is made for ``timeout`` seconds)."""
    view = JournalView()
    if not partitions:
        return view
    for msg in read_records(settings, topic, partitions=sorted(partitions), timeout=timeout):
        key = msg.key()
        if key is None:
            continue
        view.records += 1
        view.apply(key, msg.value())
    return view
