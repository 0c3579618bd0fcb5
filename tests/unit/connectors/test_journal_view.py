"""Folding journal records: keys no worker writes are skipped and counted, never fatal."""

from __future__ import annotations

import pytest

from eddies.connectors.kafka.journal import JournalView


@pytest.mark.parametrize("key", [b"\xff\xfe", b"out/xyz/1", b"out/s:r1:i1:c0/x", b"out/s:r1:i1:c0/",
                                 b"bogus/s:r1:i1:c0/1", b"start/s:rx:i1:c0/1", b"out"])
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
