"""Reading the compacted journal topic back into memory on partition assignment.

The broker's queried end offsets cannot be trusted (the embedded broker reports the
start of the last batch), so a partition counts as restored only when the consumer
reports PARTITION_EOF, which the fetch high watermark drives correctly.

Journal records carry no headers but tombstones' epochs: the key names the kind
(``snap@EPOCH/``, ``snap/``, ``out/``, ``start/``, ``own/``), and librdkafka's per-record
cost doubles with any header at all. A session's snapshot is the one of its highest epoch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from eddies.connectors.journal.claims import Claim, Claimant
from eddies.connectors.journal.epochs import (
    EPOCH_HEADER,
    NO_EPOCH,
    ORCHESTRATOR,
    Fence,
    Marker,
    header_epoch,
    parse_marker,
    stamp_of,
)
from eddies.connectors.runtime.client import read_records
from eddies.connectors.runtime.settings import Settings

CallRef = tuple[str, int]  # (call id, attempt)


#: What a durable call's id looks like (events/ids.py call_id).
_CALL_ID = re.compile(r".+:r\d+:i\d+:c\d+\Z", re.DOTALL)


@dataclass
class JournalView:
    """The journal of some partitions: latest snapshots, call outcomes, the first started
    mark of each call (in partition order: the claim that won) and the latest epoch marker
    of each role in each partition (:mod:`.epochs`). A stamped record older than the marker
    before it is refused (counted in ``fenced``); so is a second outcome of a call (in
    ``later_outcomes``): the first one decided it."""

    snapshots: dict[str, bytes] = field(default_factory=dict)
    outcomes: dict[CallRef, bytes] = field(default_factory=dict)
    started: dict[CallRef, Claim] = field(default_factory=dict)
    records: int = 0
    #: Records whose key no worker writes (skipped).
    unreadable: int = 0
    #: Per partition, the offset after the last record read (where following it goes on).
    ends: dict[int, int] = field(default_factory=dict)
    #: The latest epoch marker per (role, partition).
    markers: dict[tuple[str, int], Marker] = field(default_factory=dict)
    #: Records refused: written by a process that had lost the partition.
    fenced: int = 0
    #: Outcomes of calls that had one already (the first decided the call).
    later_outcomes: int = 0
    #: Sessions whose newest snapshot was refused while the one kept is older (or there is
    #: none): session -> the refused snapshot's seq. Their state must come from the history.
    stale: dict[str, int] = field(default_factory=dict)
    _fences: dict[int, Fence] = field(default_factory=dict, repr=False)
    #: Per partition, the processes its markers and started marks name; and the partitions
    #: with records that name none (snapshots, outcomes, tombstones): see :meth:`written_by_others`.
    _named: dict[int, set[bytes]] = field(default_factory=dict, repr=False)
    _unnamed: set[int] = field(default_factory=set, repr=False)
    #: The epoch of each session's chosen snapshot (its key's), and the snapshots of its
    #: other keys (older owners', until tombstoned).
    _epoch_of: dict[str, int] = field(default_factory=dict, repr=False)
    _others: dict[str, dict[int, bytes]] = field(default_factory=dict, repr=False)

    def learn_calls(self, other: JournalView) -> None:
        """Add the call outcomes, started marks and markers of ``other``, read from earlier
        offsets of other partitions or of the same ones (a first claim or outcome stays
        first)."""
        self.outcomes.update(other.outcomes)
        for ref, claim in other.started.items():
            mine = self.started.get(ref)
            if mine is None or claim.offset < mine.offset:
                self.started[ref] = claim
        for where, marker in other.markers.items():
            mine_m = self.markers.get(where)
            if mine_m is None or marker.epoch > mine_m.epoch:
                self.markers[where] = marker

    def written_by_others(self, partition: int, me: Claimant) -> bool:
        """Whether any record read of ``partition`` may come from a process other than
        ``me``: one whose marker or started mark names another, or one that names no
        writer at all (a snapshot, an outcome, a tombstone). False for a partition that
        holds only ``me``'s markers: no one worked on it before, so no one may still
        journal an outcome into it."""
        return partition in self._unnamed or bool(self._named.get(partition, set()) - {me.token})

    def epoch(self, role: str, partition: int) -> int:
        """The epoch of the latest marker of ``role`` in ``partition`` (NO_EPOCH: none)."""
        marker = self.markers.get((role, partition))
        return NO_EPOCH if marker is None else marker.epoch

    def apply(self, key: bytes, value: bytes | None, offset: int = -1, time_ms: int = 0,
              partition: int = -1, epoch: int | None = None) -> CallRef | None:
        """Fold one journal record of ``partition`` (a None value is a tombstone, ``epoch``
        its header's; ``time_ms``: its timestamp); the call whose outcome it records, if it
        is the call's first."""
        try:
            text = key.decode()
        except UnicodeDecodeError:
            self.unreadable += 1  # no worker writes such a key: skipped, never fatal
            return None
        kind, _, rest = text.partition("/")
        if kind != "own" and (kind != "start" or value is None):
            self._unnamed.add(partition)
        elif value is not None:
            self._named.setdefault(partition, set()).add(value)
        if kind.startswith("snap"):
            at = kind[5:]
            if kind != "snap" and (kind[4] != "@" or not at.isdigit()):
                self.unreadable += 1
                return None
            self._snapshot(rest, value, partition, epoch, int(at) if at else NO_EPOCH)
            return None
        if kind == "own":
            where = parse_marker(rest)
            if where is None or value is None:
                self.unreadable += value is not None
                return None
            self.markers[where] = Marker(offset, Claimant.parse(value))
            if where[0] == ORCHESTRATOR:
                self._fence(where[1]).mark(offset)
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
            if ref in self.outcomes:  # decided already: a late writer's outcome is not it
                self.later_outcomes += 1
                return None
            self.outcomes[ref] = value
            return ref
        if kind == "start":
            if value is None:
                self.started.pop(ref, None)
            elif ref not in self.started:  # a later mark lost to the first
                self.started[ref] = Claim(value, offset, time_ms)
        return None

    def _fence(self, partition: int) -> Fence:
        fence = self._fences.get(partition)
        if fence is None:
            fence = self._fences[partition] = Fence()
        return fence

    def snapshot_epochs(self, sid: str) -> list[int]:
        """The epochs of every snapshot key of ``sid`` still in the journal (the one
        restored and older ones): what a new owner tombstones once it saved its own."""
        epochs = [] if sid not in self.snapshots else [self._epoch_of[sid]]
        return epochs + sorted(self._others.get(sid, {}))

    def _snapshot(self, sid: str, value: bytes | None, partition: int, epoch: int | None,
                  key_epoch: int) -> None:
        fence = self._fences.get(partition)
        if value is None:
            if fence is None or fence.admits_epoch(epoch):
                self._forget_snapshot(sid, key_epoch)
            else:
                self.fenced += 1
            return
        stamp = stamp_of(value)
        if fence is not None and not fence.admits(stamp):
            self.fenced += 1
            assert stamp is not None  # an unstamped record is always admitted
            kept = self.snapshots.get(sid)
            kept_stamp = None if kept is None else stamp_of(kept)
            if kept is None or (kept_stamp is not None and kept_stamp.seq < stamp.seq):
                self.stale[sid] = max(stamp.seq, self.stale.get(sid, 0))
            return
        chosen = self._epoch_of.get(sid)
        if chosen is None or key_epoch >= chosen:
            if chosen is not None and key_epoch > chosen:  # a newer owner's: it counts
                self._others.setdefault(sid, {})[chosen] = self.snapshots[sid]
            self.snapshots[sid] = value
            self._epoch_of[sid] = key_epoch
            refused = self.stale.get(sid)
            if refused is not None and (stamp is None or stamp.seq >= refused):
                del self.stale[sid]
        else:  # an older owner's, written late: kept only to be tombstoned
            self._others.setdefault(sid, {})[key_epoch] = value

    def _forget_snapshot(self, sid: str, key_epoch: int) -> None:
        others = self._others.get(sid)
        if self._epoch_of.get(sid) == key_epoch:
            del self.snapshots[sid]
            del self._epoch_of[sid]
            self.stale.pop(sid, None)
            if others:  # the next owner back: the highest epoch left
                best = max(others)
                self.snapshots[sid] = others.pop(best)
                self._epoch_of[sid] = best
        elif others is not None:
            others.pop(key_epoch, None)
        if others is not None and not others:
            del self._others[sid]


def record_time(msg: Any) -> int:
    """A record's timestamp in ms since the epoch (0 if it has none)."""
    stamp: int = msg.timestamp()[1]
    return max(stamp, 0)


def fold(view: JournalView, msg: Any) -> CallRef | None:
    """:meth:`JournalView.apply` for a consumed journal record (a confluent-kafka
    ``Message``): its partition, and a tombstone's epoch header."""
    value = msg.value()
    epoch = None
    if value is None:
        for name, raw in msg.headers() or ():
            if name == EPOCH_HEADER:
                epoch = header_epoch(raw)
    return view.apply(msg.key(), value, msg.offset(), record_time(msg), msg.partition(), epoch)


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
        fold(view, msg)
    return view
