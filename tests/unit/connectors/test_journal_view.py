"""Folding journal records: keys no worker writes are skipped and counted, never fatal;
records of a worker that had lost the partition are refused (epochs.py)."""

from __future__ import annotations

import pytest

from eddies.connectors.journal.claims import Claimant
from eddies.connectors.journal.epochs import ORCHESTRATOR, Stamp, snapshot
from eddies.connectors.journal.reading import JournalView


@pytest.mark.parametrize("key", [b"\xff\xfe", b"out/xyz/1", b"out/s:r1:i1:c0/x", b"out/s:r1:i1:c0/",
                                 b"bogus/s:r1:i1:c0/1", b"start/s:rx:i1:c0/1", b"out",
                                 b"own/nobody/1", b"own/orchestrator/x"])
def test_a_key_no_worker_writes_is_skipped(key: bytes) -> None:
    view = JournalView()
    assert view.apply(key, b"value", 3) is None
    assert (view.unreadable, view.outcomes, view.started, view.snapshots) == (1, {}, {}, {})


def test_the_keys_workers_write_are_folded() -> None:
    view = JournalView()
    assert view.apply(b"out/s:r1:i1:c0/2", b"outcome", 5) == ("s:r1:i1:c0", 2)
    assert view.apply(b"start/s/child:r1:i1:c0/1", b"token", 6) is None
    assert view.apply(b"snap/s", b"{}", 7) is None
    assert view.outcomes == {("s:r1:i1:c0", 2): b"outcome"}
    assert list(view.started) == [("s/child:r1:i1:c0", 1)]
    assert view.snapshots == {"s": b"{}"} and view.unreadable == 0


def _snap(epoch: int, seq: int) -> bytes:
    return snapshot(b'{"seq": %d}' % seq, Stamp(epoch=epoch, offset=0, seq=seq))


def test_a_snapshot_written_after_a_newer_owners_marker_is_refused() -> None:
    view = JournalView()
    view.apply(b"own/orchestrator/0", b"a|1", 0, partition=0)
    view.apply(b"snap/s", _snap(0, 8), 1, partition=0)
    view.apply(b"own/orchestrator/0", b"b|1", 2, partition=0)
    view.apply(b"snap/s", _snap(2, 14), 3, partition=0)
    view.apply(b"snap/s", _snap(0, 9), 4, partition=0)  # A woke up
    assert view.snapshots["s"] == _snap(2, 14)
    assert (view.fenced, view.stale) == (1, {})
    assert view.epoch(ORCHESTRATOR, 0) == 2
    assert view.markers[(ORCHESTRATOR, 0)].owner == Claimant("b", "1")


def test_a_refused_snapshot_newer_than_the_kept_one_marks_the_session_stale() -> None:
    """What a compacted journal may leave: the woken owner's record, and no newer one of
    the owner after it (or none at all): the session's state must come from its history."""
    view = JournalView()
    view.apply(b"own/orchestrator/0", b"a|1", 0, partition=0)
    view.apply(b"snap/s", _snap(0, 5), 1, partition=0)
    view.apply(b"own/orchestrator/0", b"b|1", 2, partition=0)
    view.apply(b"snap/s", _snap(0, 8), 3, partition=0)
    view.apply(b"snap/t", _snap(0, 3), 4, partition=0)
    assert view.snapshots == {"s": _snap(0, 5)} and view.stale == {"s": 8, "t": 3}
    view.apply(b"snap/s", _snap(2, 9), 5, partition=0)  # the owner saved it since: fine
    assert view.stale == {"t": 3}


def test_tombstones_are_fenced_by_their_epoch_header() -> None:
    view = JournalView()
    view.apply(b"own/orchestrator/0", b"b|1", 7, partition=0)
    view.apply(b"snap/s", _snap(7, 3), 8, partition=0)
    view.apply(b"snap/s", None, 9, partition=0, epoch=2)  # an earlier owner closing it
    assert "s" in view.snapshots and view.fenced == 1
    view.apply(b"snap/s", None, 10, partition=0, epoch=7)
    assert "s" not in view.snapshots


def test_unstamped_snapshots_and_other_partitions_markers_are_taken() -> None:
    view = JournalView()
    view.apply(b"own/orchestrator/1", b"b|1", 5, partition=1)
    view.apply(b"snap/s", b"{}", 6, partition=0)
    view.apply(b"snap/t", _snap(0, 1), 7, partition=0)  # no marker in partition 0
    assert set(view.snapshots) == {"s", "t"} and view.fenced == 0


def test_a_calls_first_outcome_decides_it() -> None:
    view = JournalView()
    assert view.apply(b"out/s:r1:i1:c0/1", b"UNKNOWN", 1) == ("s:r1:i1:c0", 1)
    assert view.apply(b"out/s:r1:i1:c0/1", b"OK, late", 2) is None
    assert view.outcomes == {("s:r1:i1:c0", 1): b"UNKNOWN"} and view.later_outcomes == 1


def test_a_partition_only_my_markers_are_in_was_written_by_no_one_else() -> None:
    """A new owner waits for an earlier one's late outcomes only where there may be one."""
    me, other = Claimant("w0", "new"), Claimant("w0", "old")
    view = JournalView()
    view.apply(b"own/orchestrator/0", me.token, 0, partition=0)
    view.apply(b"own/executor/0", me.token, 1, partition=0)
    view.apply(b"start/s:r1:i1:c0/1", me.token, 2, partition=0)
    view.apply(b"own/orchestrator/1", other.token, 0, partition=1)  # an earlier process
    view.apply(b"own/orchestrator/1", me.token, 1, partition=1)
    view.apply(b"own/orchestrator/2", me.token, 0, partition=2)
    view.apply(b"out/s:r1:i1:c1/1", b"outcome", 1, partition=2)  # names no writer
    view.apply(b"snap/s", b"{}", 0, partition=3)
    assert [view.written_by_others(p, me) for p in range(5)] == [False, True, True, True, False]
    assert view.written_by_others(0, other)
