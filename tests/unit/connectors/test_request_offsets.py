"""An executor commits APP.requests only past requests that need no more work."""

from __future__ import annotations

from eddies.connectors.kafka.request_offsets import RequestOffsets


def test_commits_only_past_a_settled_prefix_whatever_order_calls_finish_in() -> None:
    offsets = RequestOffsets()
    for offset in (10, 11, 12):
        offsets.read(0, offset)
    offsets.read(1, 5)
    offsets.settle(0, 12)
    offsets.settle(0, 11)
    offsets.advance()
    assert offsets.pending == {}  # 10 still runs: a restart must read it again
    offsets.settle(0, 10)
    offsets.settle(1, 5)
    offsets.advance()
    assert offsets.take() == {0: 13, 1: 6}
    assert offsets.committed == {0: 13, 1: 6} and offsets.pending == {}
    offsets.read(0, 13)
    offsets.advance()
    assert offsets.take() == {}  # nothing new settled
    assert offsets.committed == {0: 13, 1: 6}


def test_in_memory_and_unknown_requests_and_revoked_partitions() -> None:
    offsets = RequestOffsets()
    offsets.read(0, 3)
    offsets.settle(None, 3)  # a request the orchestrator handed over in memory
    offsets.settle(0, 99)  # never read here (revoked, read again elsewhere)
    offsets.advance()
    assert offsets.pending == {}
    offsets.settle(0, 3)
    offsets.advance()
    offsets.forget({0})
    assert offsets.pending == {} and offsets.take() == {} and offsets.committed == {}
    offsets.settle(0, 4)  # after the partition is gone: nothing to do
    offsets.advance()
    assert offsets.take() == {}
