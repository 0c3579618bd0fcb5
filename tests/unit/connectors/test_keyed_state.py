"""Session state as MapState entries: exact round trips, and writes that do not grow with
a run (the Flink job's keyed state; connectors/flink/keyed_state.py)."""

from __future__ import annotations

import pytest

from eddies.connectors.flink import keyed_state
from eddies.engine import SessionMachine, SessionState
from eddies.events import AgentEvent, DurableCallRequest, InputEvent
from tests.agents import ROUNDS, react_agent, react_rounds
from tests.unit.engine.executor import answer, applied


def _run(inputs: int) -> tuple[list[tuple[str, int]], list[int], dict[str, bytes]]:
    """A session of ``inputs`` ten-round ReAct runs, stored entry by entry after every
    applied event and read back each time; (event type, bytes written) per event, and the
    whole state's size per event."""
    machine = SessionMachine(react_agent())
    table: dict[str, bytes] = {}
    stored = None
    written: list[tuple[str, int]] = []
    whole: list[int] = []
    state = machine.new_state("s")
    for ev, state, _ in applied(machine, [("s", f"q{i}") for i in range(inputs)], react_rounds):
        change = keyed_state.write(state, stored)
        stored = change.stored
        for k in change.removes:
            del table[k]
        table.update(change.puts)
        loaded = keyed_state.load(table.items())
        assert loaded is not None
        assert loaded[0].to_dict() == state.to_dict()
        assert loaded[1] == stored  # what a restored function knows is what was stored
        again = keyed_state.write(loaded[0], loaded[1])
        assert again.puts == {} and again.removes == []  # nothing to write after a restore
        written.append((ev.type, change.written))
        whole.append(len(state.to_bytes()))
    assert state.idle and state.runs == inputs
    return written, whole, table


def test_state_entries_round_trip_and_a_finished_run_leaves_only_the_session() -> None:
    _, _, table = _run(2)
    # A finished run's call records and conversation are removed, not kept.
    assert set(table) == {keyed_state.CORE, keyed_state.INPUTS}
    assert set(keyed_state.write(SessionState("s"), None).puts) == set(table)


def test_bytes_written_per_event_do_not_grow_with_the_run() -> None:
    written, whole, _ = _run(1)
    results = [n for t, n in written if t == "DurableCallResult"][:-1]  # the answer ends it
    assert len(results) == 2 * ROUNDS  # a model call and a tool call per round
    # Each event writes its call record, the round's new messages and the run's header,
    # however long the conversation has become (a call's arguments, the conversation for
    # a model call, are not kept in the state).
    for same_kind in (results[2::2], results[3::2]):  # after the first round
        assert max(same_kind) - min(same_kind) < 100, same_kind
    assert max(results) < 4_000, results
    # The whole state, written on every event, would be several times more.
    assert sum(n for _, n in written) * 4 < sum(whole), (sum(n for _, n in written), sum(whole))


def test_entries_load_calls_in_the_order_they_were_issued() -> None:
    machine = SessionMachine(react_agent())
    state = machine.new_state("s")
    state, out = machine.apply(state, AgentEvent.external("s", InputEvent("q"), event_id="in",
                                                          timestamp=1))
    # Drive until two calls exist in the run, then reverse the entries' order.
    for _ in range(3):
        req = next(e for e in out if isinstance(e.payload, DurableCallRequest))
        state, out = machine.apply(state, answer(machine, req, react_rounds))
    assert state.run is not None and len(state.run.calls) >= 3
    entries = list(keyed_state.write(state, None).puts.items())
    loaded = keyed_state.load(reversed(entries))
    assert loaded is not None
    assert list(loaded[0].run.calls) == list(state.run.calls)  # type: ignore[union-attr]


class _JavaEntry:
    def __init__(self, key: str, value: bytes) -> None:
        self._key, self._value = key, value

    def getKey(self) -> str:  # the Java MapState's entry, as pemja shows it
        return self._key

    def getValue(self) -> bytes:
        return self._value


class _JavaMapState(dict[str, bytes]):
    """What PyFlink's MapStateImpl wraps: the Java MapState (byte[] values as bytes)."""

    def entries(self) -> list[_JavaEntry]:
        return [_JavaEntry(k, v) for k, v in self.items()]

    def putAll(self, entries: dict[str, bytes]) -> None:
        self.update(entries)


class _PyFlinkMapState:
    def __init__(self) -> None:
        self._state = _JavaMapState()


def test_the_jobs_store_puts_values_as_they_are_and_reads_pickled_ones_of_older_checkpoints() -> None:
    pytest.importorskip("pyflink")
    import pickle

    from eddies.connectors.flink.job import _MapStore

    machine = SessionMachine(react_agent())
    state, _ = machine.apply(machine.new_state("s"), AgentEvent.external(
        "s", InputEvent("q"), event_id="in", timestamp=1))
    puts = keyed_state.write(state, None).puts
    wrapped = _PyFlinkMapState()
    store = _MapStore(wrapped)
    store.put_all(dict(puts))
    assert dict(wrapped._state) == puts  # no pickling on the way in
    # A checkpoint written through PyFlink's own converter holds pickled values.
    older = _PyFlinkMapState()
    older._state.update({k: pickle.dumps(v) for k, v in puts.items()})
    for s in (wrapped, older):
        loaded = keyed_state.load(_MapStore(s).items())
        assert loaded is not None
        assert loaded[0].to_dict() == state.to_dict()
