"""The order of records, snapshots, commits and ownership changes, on the broker-less driver.

The paused-worker trail (session k2s15 of the kill -9 campaign, bench/RESULTS.md): worker A
holds a session in the middle of a run and stands still; the group gives the partition to
B, which finishes the run and saves the session; A wakes up and, before it hears that the
partition is gone, writes its older snapshot of the session. The next owner must not
restore that one (it would wait forever for a call whose result sits before the committed
input offset)."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import Agent, InputEvent, OutputEvent, action
from eddies.connectors.kafka import orchestrator as orchestrator_module
from eddies.connectors.kafka.driver import Driver
from eddies.events import partition_for


def double(x: int) -> int:
    return 2 * x


class Doubler(Agent):
    """input -> one durable call -> output."""

    @action(InputEvent)
    async def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=await ctx.durable_execute_async(double, event.input)))


def _answers(driver: Driver, session: str) -> list[Any]:
    return [e.payload.output for e in driver.outputs()
            if e.session_id == session and isinstance(e.payload, OutputEvent)]


def _a_stands_still_mid_run(driver: Driver) -> None:
    """A takes the input and asks for the call (the session unsaved: mid-run), then stands
    still; the group evicts it and gives the partition to B, which finishes the run."""
    driver.orchestrator("a")
    driver.assign("a", [0])
    driver.send("k2s15", 1)
    driver.turn("a", 2)  # the input applied, the request out; committed before it (unsaved)
    assert driver.committed(0) == 0
    driver.evict("a")
    driver.orchestrator("b")
    driver.assign("b", [0])
    driver.settle(["b"])
    assert _answers(driver, "k2s15") == [2]


def test_a_woken_owners_older_snapshot_is_refused_by_the_next_owner() -> None:
    driver = Driver(Doubler(), snapshot_delay_ms=60_000)
    _a_stands_still_mid_run(driver)
    b_epoch = driver.orchestrators["b"].ownership.epoch(0)
    saved_by_b = driver.snapshots("k2s15")
    assert saved_by_b and saved_by_b[-1][0] == b_epoch
    # A wakes up without noticing that it stood still (nothing tells it before it writes),
    # and saves every session it has: its mid-run state, over B's.
    driver.orchestrators["a"].checkpoints.commit(driver.consumer("a"), everything=True)
    a_epoch = driver.orchestrators["a"].ownership.epoch(0)
    assert driver.snapshots("k2s15")[-1][0] == a_epoch < b_epoch
    assert driver.snapshots("k2s15")[-1][1] < saved_by_b[-1][1]  # older: from mid-run
    # B hands the partition to C; C restores B's state, not A's, and goes on.
    driver.revoke("b", [0])
    driver.turn("b")
    c = driver.orchestrator("c")
    driver.assign("c", [0])
    driver.turn("c")
    assert c.counters.get("records_fenced") == 1
    assert c.states["k2s15"].seq == saved_by_b[-1][1] and c.states["k2s15"].idle
    driver.send("k2s15", 5)
    driver.settle(["c"])
    assert _answers(driver, "k2s15") == [2, 10]


def test_a_compacted_journal_keeps_the_newer_owners_snapshot() -> None:
    """Compaction keeps the latest record of a key; snapshots are keyed by epoch, so the
    woken owner's late one does not replace the newer owner's."""
    driver = Driver(Doubler(), snapshot_delay_ms=60_000)
    _a_stands_still_mid_run(driver)
    b_seq = driver.orchestrators["b"].states["k2s15"].seq
    driver.orchestrators["a"].checkpoints.commit(driver.consumer("a"), everything=True)
    driver.revoke("b", [0])
    driver.turn("b")
    driver.broker.compact(driver.names.journal)
    c = driver.orchestrator("c")
    driver.assign("c", [0])
    driver.turn("c")
    assert c.states["k2s15"].seq == b_seq and c.counters.get("sessions_rebuilt") == 0
    driver.send("k2s15", 5)
    driver.settle(["c"])
    assert _answers(driver, "k2s15") == [2, 10]


def test_a_session_left_with_only_a_refused_snapshot_is_rebuilt_from_history() -> None:
    """A saved the session, then took its next input and stood still; B went on with it
    and died before it saved it; A woke and saved its state over its own key. Compacted,
    that key keeps only A's late snapshot, which is refused: C rebuilds the session from
    its history on APP.events, not from nothing."""
    driver = Driver(Doubler(), snapshot_delay_ms=60_000, commit_interval_ms=600_000)
    a = driver.orchestrator("a")
    driver.assign("a", [0])
    driver.send("s", 1)
    driver.settle(["a"])
    a.checkpoints.commit(driver.consumer("a"), everything=True)  # saved between runs
    driver.send("s", 2)
    driver.turn("a", 2)  # run 2 asked for its call, unsaved
    driver.evict("a")
    b = driver.orchestrator("b")
    driver.assign("b", [0])
    driver.settle(["b"])  # B finishes run 2 and dies before any commit saves it
    b_state = b.states["s"]
    assert _answers(driver, "s") == [2, 4]
    a.checkpoints.commit(driver.consumer("a"), everything=True)  # A wakes up and saves
    driver.evict("b")
    driver.broker.compact(driver.names.journal)
    c = driver.orchestrator("c")
    driver.assign("c", [0])
    driver.turn("c")
    assert c.counters.get("sessions_rebuilt") == 1
    assert c.states["s"].to_dict() == b_state.to_dict()
    driver.send("s", 3)
    driver.settle(["c"])
    assert _answers(driver, "s") == [2, 4, 6]


def test_a_result_lost_between_its_journal_and_the_input_is_answered_again() -> None:
    """The executor journaled the outcome and died before it sent the result; the session's
    next owner asks again (the executor answers from the journal), and, done reading its
    input without that result, counts it."""
    driver = Driver(Doubler(), snapshot_delay_ms=0)
    driver.orchestrator("a")
    driver.assign("a", [0])
    driver.send("s", 21)
    driver.turn("a", 2)  # the request out, the session saved in the middle of its run
    assert driver.perform_requests(send=False) == 1
    driver.evict("a")
    b = driver.orchestrator("b")
    driver.assign("b", [0])
    driver.turn("b", 2)
    assert b.counters.get("results_recovered") == 1 and b.counters.get("requests_reissued") == 1
    driver.settle(["b"])
    assert _answers(driver, "s") == [42]


def test_a_result_past_the_committed_offset_is_not_applied_twice() -> None:
    driver = Driver(Doubler(), snapshot_delay_ms=0)
    driver.orchestrator("a")
    driver.assign("a", [0])
    driver.send("s", 4)
    driver.turn("a", 2)
    driver.perform_requests()  # journaled and sent: the result waits in the input
    driver.evict("a")
    b = driver.orchestrator("b")
    driver.assign("b", [0])
    driver.settle(["b"])
    assert _answers(driver, "s") == [8]
    assert b.counters.get("results_recovered") == 0


def test_an_owner_that_noticed_its_stall_writes_nothing_for_a_lost_partition() -> None:
    driver = Driver(Doubler(), snapshot_delay_ms=60_000)
    _a_stands_still_mid_run(driver)
    journal_before = len(driver.journal())
    a = driver.orchestrators["a"]
    driver.stall("a")  # as its stall watch does on waking up
    driver.turn("a")
    assert a.partitions == set() and a.counters.get("partitions_fenced") == 1
    a.close()  # stopping saves nothing either: it holds nothing
    assert len(driver.journal()) == journal_before


def test_records_fetched_before_a_stall_wait_for_the_confirmation() -> None:
    """A wakes with records it fetched before the pause; it applies none of them (no
    request, no output) until the group has answered, and then drops them."""
    driver = Driver(Doubler(), snapshot_delay_ms=60_000)
    driver.orchestrator("a")
    driver.assign("a", [0])
    driver.turn("a")
    driver.send("s", 3)
    driver.evict("a", notice_after=4)  # A is handed the input it fetched, for two turns
    driver.stall("a")
    requests = len(driver.broker.records(driver.names.requests))
    driver.turn("a", 3)
    assert len(driver.broker.records(driver.names.requests)) == requests
    assert driver.orchestrators["a"].partitions == set()
    driver.orchestrator("b")
    driver.assign("b", [0])
    driver.settle(["b"])
    assert _answers(driver, "s") == [6]


def test_a_partition_paused_while_in_doubt_and_lost_is_read_when_it_comes_back() -> None:
    """Input is paused while ownership is in doubt (a stall, no answer from the group);
    the partition found lost and later given back must not stay paused (librdkafka keeps
    a pause across assignments)."""
    driver = Driver(Doubler())
    a = driver.orchestrator("a")
    driver.assign("a", [0])
    driver.turn("a")
    driver.stall("a")
    driver.cut("a")
    driver.turn("a", 2)
    assert driver.consumer("a").paused == {0}  # in doubt: nothing read meanwhile
    driver.evict("a")
    driver.turn("a")  # it hears of the loss, still in doubt
    assert a.partitions == set()
    driver.cut("a", False)
    driver.turn("a")
    driver.assign("a", [0])  # and given back
    driver.turn("a")
    driver.send("s", 7)
    driver.settle(["a"])
    assert a.partitions == {0} and _answers(driver, "s") == [14]


def test_a_stall_that_did_not_cost_the_partition_is_confirmed_and_work_goes_on() -> None:
    driver = Driver(Doubler())
    a = driver.orchestrator("a")
    driver.assign("a", [0])
    driver.send("s", 4)
    driver.settle()
    driver.stall("a")
    driver.send("s", 5)
    driver.settle()
    assert a.partitions == {0} and a.counters.get("partitions_fenced") == 0
    assert _answers(driver, "s") == [8, 10]


def test_a_partition_marked_by_another_while_it_was_restored_is_marked_again() -> None:
    """Two owners that both believe they were given a partition: A marks, B (which has not
    heard yet that the group moved it on) marks while A reads the journal back. The group
    gave it to A now: A marks again, so that B's writes are the ones refused."""
    driver = Driver(Doubler())
    a = driver.orchestrator("a")
    b = driver.orchestrator("b")
    clients = driver.clients("a")
    read = clients.read_journal
    marked = []

    def read_while_b_marks(partitions: set[int]) -> Any:
        if not marked:
            marked.append(b.ownership.claim(partitions))
        return read(partitions)

    clients.read_journal = read_while_b_marks  # type: ignore[method-assign]
    driver.assign("a", [0])
    driver.send("s", 1)
    driver.settle(["a"])
    assert a.partitions == {0} and a.ownership.epoch(0) > marked[0][0]
    assert _answers(driver, "s") == [2]
    view = read({0})
    assert view.epoch("orchestrator", 0) == a.ownership.epoch(0)


@pytest.mark.parametrize("everything", [False, True])
def test_snapshots_carry_the_epoch_offset_and_step(everything: bool) -> None:
    driver = Driver(Doubler())
    a = driver.orchestrator("a")
    driver.assign("a", [0])
    driver.send("s", 1)
    driver.settle()
    a.checkpoints.commit(driver.consumer("a"), everything=everything)
    epoch, seq = driver.snapshots("s")[-1]
    assert epoch == a.ownership.epoch(0) and seq == a.states["s"].seq


def test_a_new_owner_saves_under_its_epoch_and_tombstones_the_older_key() -> None:
    driver = Driver(Doubler())
    a = driver.orchestrator("a")
    driver.assign("a", [0])
    driver.send("s", 1)
    driver.settle(["a"])
    a_epoch = a.ownership.epoch(0)
    driver.revoke("a", [0])
    driver.turn("a")
    b = driver.orchestrator("b")
    driver.assign("b", [0])
    driver.send("s", 2)
    driver.settle(["b"])
    live: dict[bytes, bytes | None] = {}
    for r in driver.journal(0):
        if (r.key() or b"").startswith(b"snap"):
            live[r.key() or b""] = r.value()
    keys = {k for k, v in live.items() if v is not None}
    assert keys == {f"snap@{b.ownership.epoch(0)}/s".encode()}, live
    assert live[f"snap@{a_epoch}/s".encode()] is None  # tombstoned once B saved it


# --- a gained partition's sessions, restored as their records arrive or between batches
# (connectors/kafka/restoring.py): the partition's records are applied before all of its
# sessions are restored, and each session is restored before anything applies to it.
SESSIONS = 300


@pytest.fixture
def one_slice_per_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each turn restores one slice (64 sessions), whatever this machine's speed."""
    monkeypatch.setattr(orchestrator_module, "RESTORE_SLICE_S", 0.0)


def _handed_over(driver: Driver, *, mid_run: bool) -> dict[str, int]:
    """A answers (or, ``mid_run``, only starts) SESSIONS sessions, saves them and hands
    the partitions over cleanly; their saved seq, by session."""
    a = driver.orchestrator("a")
    driver.assign("a", list(range(driver.settings.partitions)))
    for i in range(SESSIONS):
        driver.send(f"s{i}", i)
    if mid_run:
        driver.turn("a", 3)  # every request out, not performed: each session waits for it
    else:
        driver.settle(["a"])
    seqs = {sid: state.seq for sid, state in a.states.items()}
    driver.revoke("a", list(range(driver.settings.partitions)))
    driver.turn("a")  # a revoke saves every session first
    assert a.partitions == set() and len(seqs) == SESSIONS
    return seqs


def test_a_record_of_a_session_not_restored_yet_is_applied_to_its_saved_state(
        one_slice_per_turn: None) -> None:
    driver = Driver(Doubler(), snapshot_delay_ms=0)
    seqs = _handed_over(driver, mid_run=False)
    b = driver.orchestrator("b")
    driver.assign("b", [0])
    last = list(seqs)[-1]
    driver.send(last, 5)
    driver.turn("b")  # gains the partition, applies that input, restores one slice
    assert 0 < len(b.restoring.pending) < SESSIONS - 1 and last not in b.restoring.pending
    # The input went on from the session's saved state: a new one would start at seq 1
    # and emit the ids of the session's first run again.
    assert b.states[last].seq > seqs[last]
    driver.settle(["b"])
    assert _answers(driver, last) == [2 * int(last[1:]), 10]
    driver.turn("b", SESSIONS // 64)  # restoring idle sessions writes nothing to settle on
    assert not b.restoring.pending and b.step.take_saved is None
    assert b.counters.get("sessions_restored") == SESSIONS
    assert {sid: b.states[sid].seq for sid in seqs if sid != last} == \
        {sid: seq for sid, seq in seqs.items() if sid != last}


def test_sessions_in_the_middle_of_a_run_are_restored_between_batches(one_slice_per_turn: None) -> None:
    driver = Driver(Doubler(), snapshot_delay_ms=0)
    _handed_over(driver, mid_run=True)
    assert driver.outputs() == []
    b = driver.orchestrator("b")
    driver.assign("b", [0])
    driver.turn("b")
    # Ready before its sessions are: a slice restored, its calls asked again.
    restored = b.counters.get("sessions_restored")
    assert 0 < restored < SESSIONS and b.counters.get("requests_reissued") == restored
    driver.settle(["b"])
    assert b.counters.get("sessions_restored") == SESSIONS
    assert b.counters.get("requests_reissued") == SESSIONS
    for i in range(SESSIONS):
        assert _answers(driver, f"s{i}") == [2 * i]


def test_a_partition_taken_back_before_its_sessions_were_restored_leaves_them_to_the_next(
        one_slice_per_turn: None) -> None:
    driver = Driver(Doubler(), partitions=2, snapshot_delay_ms=0)
    _handed_over(driver, mid_run=True)
    b = driver.orchestrator("b")
    driver.assign("b", [0, 1])
    driver.turn("b")
    assert b.restoring.pending
    driver.revoke("b", [1])
    driver.turn("b")
    assert {partition_for(sid, 2) for sid in b.restoring.pending} <= {0}
    driver.settle(["b"])
    ones = {f"s{i}" for i in range(SESSIONS) if partition_for(f"s{i}", 2) == 1}
    assert ones and not ones & set(b.states) and not b.restoring.pending
    c = driver.orchestrator("c")
    driver.assign("c", [1])
    driver.settle(["b", "c"])
    for i in range(SESSIONS):
        assert _answers(driver, f"s{i}") == [2 * i]
    assert c.counters.get("sessions_restored") == len(ones)
