"""Reading the compacted journal topic back into memory on partition assignment.

The broker's queried end offsets cannot be trusted (the embedded broker reports the
start of the last batch), so a partition counts as restored only when the consumer
reports PARTITION_EOF, which the fetch high watermark drives correctly.

Journal records carry no headers: the key names the kind (``snap/``, ``out/``,
``start/``), and librdkafka's per-record cost doubles with any header at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .claims import Claim
from .client import read_records
from .settings import Settings

CallRef = tuple[str, int]  # (call id, attempt)


#: What a durable call's id looks like (events/ids.py call_id).
_CALL_ID = re.compile(r".+:r\d+:i\d+:c\d+\Z", re.DOTALL)


@dataclass
class JournalView:
    """The journal of some partitions: latest snapshots, call outcomes, and the first
    started mark of each call (in partition order: the claim that won)."""

    snapshots: dict[str, bytes] = field(default_factory=dict)
    outcomes: dict[CallRef, bytes] = field(default_factory=dict)
    started: dict[CallRef, Claim] = field(default_factory=dict)
    records: int = 0
    #: Records whose key no worker writes (skipped).
    unreadable: int = 0
    #: Per partition, the offset after the last record read (where following it goes on).
    ends: dict[int, int] = field(default_factory=dict)

    def learn_calls(self, other: JournalView) -> None:
        """Add the call outcomes and started marks of ``other``, read from earlier offsets
        of other partitions or of the same ones (a first claim stays first)."""
        self.outcomes.update(other.outcomes)
        for ref, claim in other.started.items():
            mine = self.started.get(ref)
            if mine is None or claim.offset < mine.offset:
                self.started[ref] = claim

    def apply(self, key: bytes, value: bytes | None, offset: int = -1, time_ms: int = 0) -> CallRef | None:
        """Fold one journal record (a None value is a tombstone; ``time_ms``: its timestamp);
        the call whose outcome it records, if it records one."""
        try:
            text = key.decode()
        except UnicodeDecodeError:
            self.unreadable += 1  # no worker writes such a key: skipped, never fatal
            return None
        kind, _, rest = text.partition("/")
        if kind == "snap":
            if value is None:
                self.snapshots.pop(rest, None)
            else:
                self.snapshots[rest] = value
            return None
        cid, _, attempt_text = rest.rpartition("/")
        if kind not in ("out", "start") or not attempt_text.isdigit() or not _CALL_ID.match(cid):
            self.unreadable += 1
            return None
        ref = (cid, int(attempt_text))
        if kind == "out":
            if value is None:
                self.outcomes.pop(ref, None)
                return None
            self.outcomes[ref] = value
            return ref
        if kind == "start":
            if value is None:
                self.started.pop(ref, None)
            elif ref not in self.started:  # a later mark lost to the first
                self.started[ref] = Claim(value, offset, time_ms)
        return None


def record_time(msg: Any) -> int:
    """A record's timestamp in ms since the epoch (0 if it has none)."""
    stamp: int = msg.timestamp()[1]
    return max(stamp, 0)


def read_journal(settings: Settings, topic: str, partitions: set[int], timeout: float = 60.0,
                 reread_gaps: bool = False) -> JournalView:
    """Read ``partitions`` of the journal from the beginning to their true end (TimeoutError
    if no progress is made for ``timeout`` seconds; ``reread_gaps``: see positions.py)."""
    view = JournalView()
    if not partitions:
        return view
    view.ends = dict.fromkeys(partitions, 0)
    for msg in read_records(settings, topic, partitions=sorted(partitions), timeout=timeout,
                            reread_gaps=reread_gaps, ends=view.ends):
        key = msg.key()
        if key is None:
            continue
        view.records += 1
        view.apply(key, msg.value(), msg.offset(), record_time(msg))
    return view
