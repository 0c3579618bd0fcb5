"""HeldRequests: due order, one entry per ref, and dropping before due (memory follows
what is held)."""

from __future__ import annotations

from eddies.connectors.execution.held_requests import HeldRequests


def test_items_come_due_in_order_once_per_ref() -> None:
    held: HeldRequests[str] = HeldRequests()
    assert held.hold(30, "c", "third") and held.hold(10, "a", "first") and held.hold(20, "b", "second")
    assert not held.hold(5, "a", "again")  # held already: the first copy counts
    assert held.next_due == 10 and len(held) == 3
    assert held.pop_due(20) == ["first", "second"]
    assert held.pop_first() == (30, "third") and held.pop_first() is None
    assert held.next_due is None and len(held) == 0


def test_dropped_items_never_come_due() -> None:
    held: HeldRequests[str] = HeldRequests()
    for n in range(5):
        held.hold(n, f"r{n}", f"item{n}")
    assert held.drop(["r0", "r3", "nothing held"]) == ["item0", "item3"]
    assert "r0" not in held and len(held) == 3
    assert held.next_due is not None and held.next_due <= 1  # never later than the earliest
    assert held.pop_due(10) == ["item1", "item2", "item4"]
    # A ref dropped and held again is due at its new time only.
    held.hold(50, "r9", "old")
    held.drop(["r9"])
    held.hold(60, "r9", "new")
    assert held.pop_due(55) == [] and held.pop_first() == (60, "new")


def test_the_heap_shrinks_when_most_of_it_is_dropped() -> None:
    held: HeldRequests[int] = HeldRequests()
    for n in range(1_000):
        held.hold(n, n, n)
    held.drop(range(0, 1_000, 2))
    held.drop(range(1, 900, 2))
    assert len(held) == 50 and len(held._heap) < 200  # rebuilt, not 1,000 entries kept
    assert held.count_by(lambda n: "low" if n < 950 else "high") == {"low": 25, "high": 25}
    assert held.pop_due(10_000) == list(range(901, 1_000, 2))
