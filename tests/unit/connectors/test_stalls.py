"""Noticing a stall, and what may happen after one before membership is confirmed."""

from __future__ import annotations

import sys
import threading
import time

from eddies.connectors.kafka.stalls import StallGate, StallWatch


def test_a_process_that_stood_still_notices_it() -> None:
    """The ticking thread cannot run while the interpreter does not let it (as in a
    pause): the gap is seen, by the thread or by the caller that runs first."""
    watch = StallWatch(threshold_s=0.1, tick_s=0.01).start()
    try:
        before = time.monotonic()
        time.sleep(0.05)
        assert not watch.since(before)
        old = sys.getswitchinterval()
        sys.setswitchinterval(5.0)  # this thread keeps the interpreter: no tick for 0.4 s
        try:
            end = time.monotonic() + 0.4
            while time.monotonic() < end:
                pass
            assert watch.since(before)  # seen by the caller, before the ticking thread runs
        finally:
            sys.setswitchinterval(old)
        time.sleep(0.05)
        assert watch.count >= 1 and not watch.since(time.monotonic())
    finally:
        watch.stop()


def test_a_long_wait_reported_by_its_caller_is_a_stall() -> None:
    watch = StallWatch(threshold_s=10.0)
    before = time.monotonic()
    assert not watch.since(before)
    watch.note()
    assert watch.since(before)


def test_after_a_stall_call_threads_wait_for_the_confirmation() -> None:
    watch = StallWatch(threshold_s=10.0)
    gate = StallGate(watch)
    assert not gate.unsure() and gate.wait_sure(0)
    watch.note()
    assert gate.unsure()
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(gate.wait_sure(5.0)))
    waiter.start()
    time.sleep(0.1)
    assert woke == []  # still waiting
    gate.confirmed(time.monotonic())
    waiter.join(5)
    assert woke == [True] and not gate.unsure()


def test_a_confirmation_sent_before_a_later_stall_does_not_count() -> None:
    watch = StallWatch(threshold_s=10.0)
    gate = StallGate(watch)
    sent = time.monotonic()
    time.sleep(0.01)
    watch.note()  # stood still after the confirmation was asked for
    gate.confirmed(sent)
    assert gate.unsure() and not gate.wait_sure(0.05)


def test_without_an_answer_from_the_brokers_within_the_lease_a_role_is_unsure() -> None:
    """A process cut off from the brokers does not stand still: it may not notice that its
    group dropped it. Without a recent answer from the brokers it is unsure all the same,
    and needs a re-commit (an answer to something else does not show membership)."""
    gate = StallGate(StallWatch(threshold_s=10.0), lease_s=0.3)
    assert not gate.reach_due() and not gate.unsure()
    time.sleep(0.12)
    assert gate.reach_due() and not gate.unsure()  # time to ask the brokers something
    gate.reached(time.monotonic())
    assert not gate.reach_due() and not gate.confirmation_due()
    time.sleep(0.32)
    assert gate.unsure() and gate.confirmation_due() and not gate.wait_sure(0.01)
    gate.confirmed(time.monotonic())
    assert not gate.unsure() and not gate.confirmation_due()


def test_an_answer_after_a_stall_does_not_end_the_doubt_a_re_commit_does() -> None:
    watch = StallWatch(threshold_s=10.0)
    gate = StallGate(watch, lease_s=5.0)
    watch.note()
    gate.reached(time.monotonic())
    assert gate.unsure() and gate.confirmation_due()
    gate.confirmed(time.monotonic())
    assert not gate.unsure()
