"""The Flink job's per-record logic without Flink (connectors/flink/processor.py): keyed
state written through a Store, journal retention and idle sessions on timers, and the
batch format the Java OutputBatch reads."""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest

from eddies.connectors.flink.processor import (
    EXPIRING,
    IDLE_DUE,
    InputRecord,
    Processor,
    decode_headers,
    encode_batch,
    encode_headers,
)
from eddies.connectors.runtime.client import input_event
from eddies.connectors.runtime.records import HEADERS, outcome_key
from eddies.connectors.runtime.settings import load_settings
from eddies.connectors.runtime.signing import DEV_KEY, SIGNATURE_HEADER, ResultSigner
from eddies.demo import one_turn_agent
from eddies.engine import AgentPlan
from eddies.events import (
    AgentEvent,
    CallStatus,
    DurableCallRequest,
    DurableCallResult,
    OutputEvent,
    SignalEvent,
    decode,
    encode,
    partition_for,
)
from eddies.events.ids import result_event_id

SIGNER = ResultSigner([DEV_KEY])


class Store(dict[str, bytes]):
    """A MapState of one key, in memory."""

    def items(self) -> list[tuple[str, bytes]]:  # type: ignore[override]
        return list(super().items())

    def put(self, key: str, value: bytes) -> None:
        self[key] = value

    def put_all(self, entries: dict[str, bytes]) -> None:
        self.update(entries)

    def remove(self, key: str) -> None:
        del self[key]


def _processor(**overrides: object) -> Processor:
    settings = load_settings(env={}, overrides={"app": "p", **overrides})
    return Processor(settings, AgentPlan.compile(one_turn_agent()), SIGNER)


def _record(sid: str, data: bytes, offset: int, headers: list[tuple[str, bytes]]) -> InputRecord:
    return InputRecord("p.input", sid.encode(), data, partition_for(sid, 4), offset, 1,
                       encode_headers(headers))


def _run_session(p: Processor, store: Store, sid: str) -> list[tuple]:  # type: ignore[type-arg]
    """One input and its model call's result; every row written."""
    rows = p.handle(_record(sid, encode(input_event(sid, "hi", timestamp=1)), 0, HEADERS), store)
    [req] = [decode(r[3]) for r in rows if r[0] == "p.requests"]
    call = req.payload
    assert isinstance(call, DurableCallRequest)
    result = AgentEvent.external(sid, DurableCallResult(
        call.call_id, call.kind, CallStatus.OK,
        '{"role": "assistant", "content": "hello", "tool_calls": [], "extra_args": {}}', None,
        call.attempt, call.digest), event_id=result_event_id(call.call_id, call.attempt), timestamp=2)
    data = encode(result)
    rows += p.handle(_record(sid, data, 1, [*HEADERS, (SIGNATURE_HEADER, SIGNER.sign(data))]), store)
    return rows


def test_a_session_runs_through_its_store_and_writes_its_records() -> None:
    p, store = _processor(), Store()
    rows = _run_session(p, store, "s1")
    topics = [r[0] for r in rows]
    assert topics.count("p.events") == 6 and topics.count("p.output") == 1
    assert topics.count("p.requests") == 1
    # A new processor (a restored task) reads the session from the store alone.
    fresh = _processor()
    state = fresh._session("s1", store)
    assert state is not None and state[0].runs == 1 and state[0].idle


def test_a_finished_runs_journal_records_are_tombstoned_on_its_timer() -> None:
    p, store = _processor(journal_retention_ms=1000), Store()
    _run_session(p, store, "s1")
    [(key, keys)] = [(k, v) for k, v in store.items() if k.startswith(EXPIRING)]
    due = int(key[len(EXPIRING):].split("/")[0])
    assert due in p.timers
    assert p.on_timer("s1", due - 60_000, store) == []  # not yet
    rows = p.on_timer("s1", due, store)
    call = keys.decode().split("\n")[0].split("/")[1]
    assert ("p.journal", partition_for("s1", 4), outcome_key(call, 1), None) in [r[:4] for r in rows]
    assert all(r[3] is None for r in rows) and not any(k.startswith(EXPIRING) for k in store)


def test_an_idle_session_is_closed_on_its_timer_and_a_busy_one_is_not() -> None:
    p, store = _processor(session_ttl_ms=60_000), Store()
    _run_session(p, store, "s1")
    due = int(store[IDLE_DUE])
    assert due >= time.time() * 1000 + 60_000 - 1
    p.on_timer("s1", due, store)
    assert not any(k.startswith("k:") for k in store)  # closed
    assert p.counters.get("sessions_closed") == 1

    # Idle once, then busy again when its timer fires: kept, and no timer until it is idle.
    busy = Store()
    _run_session(p, busy, "s2")
    due = int(busy[IDLE_DUE])
    p.timers.clear()
    p.handle(_record("s2", encode(input_event("s2", "again", timestamp=3)), 2, HEADERS), busy)
    assert p.timers == []  # a busy session needs none
    p.on_timer("s2", due, busy)
    assert "k:core" in busy  # waiting for its call: kept
    assert p.timers == [int(next(k for k in busy if k.startswith(EXPIRING))[2:].split("/")[0])]


def test_a_session_keeps_one_timer_at_its_first_due_time() -> None:
    """Journal expiry first, then the idle close: one registration per idle period, the
    timer registering the next when it fires."""
    p, store = _processor(journal_retention_ms=60_000, session_ttl_ms=600_000), Store()
    _run_session(p, store, "s1")
    [expiry] = [int(k[2:].split("/")[0]) for k in store if k.startswith(EXPIRING)]
    idle = int(store[IDLE_DUE])
    assert p.timers == [expiry] and expiry < idle
    p.timers.clear()
    p.on_timer("s1", expiry, store)
    assert p.timers == [idle]  # the next thing to do
    assert not any(k.startswith(EXPIRING) for k in store)


def test_rows_travel_as_one_batch_in_the_java_format() -> None:
    rows = [("t1", 3, b"k", b"v", encode_headers([("h", b"x"), ("n", None)]), 7),
            ("t2", -1, None, None, b"", -1)]
    data = encode_batch(rows)
    out, i = [], 0
    while i < len(data):  # what OutputBatch.java reads
        fields = []
        for nullable in (False, None, True, True, False):
            if nullable is None:
                fields.append(struct.unpack_from(">i", data, i)[0])
                i += 4
                continue
            (n,) = struct.unpack_from(">i", data, i)
            i += 4
            fields.append(None if n < 0 else data[i:i + n])
            i += max(n, 0)
        (stamp,) = struct.unpack_from(">q", data, i)
        i += 8
        out.append((fields[0].decode(), fields[1], fields[2], fields[3], fields[4], stamp))
    assert out == rows
    assert decode_headers(rows[0][4]) == [("h", b"x"), ("n", None)]


def test_an_engine_defect_halts_its_session_on_what_keyed_state_holds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An error that escapes the machine for one session halts it on the state its keyed
    state holds (written after each record), its record parked there; resumed, it goes on."""
    from eddies.engine import halts
    from eddies.engine.outcomes import CallOutcomes

    accept = CallOutcomes.accept_result
    broken = {"on": True}

    def defect(self: CallOutcomes, state: Any, ev: Any, result: Any, out: Any) -> None:
        if broken["on"]:
            state.seq += 9  # half-changed
            raise KeyError("a defect")
        accept(self, state, ev, result, out)

    monkeypatch.setattr(CallOutcomes, "accept_result", defect)
    p, store = _processor(), Store()
    rows = _run_session(p, store, "s1")
    [notice] = [decode(r[3]) for r in rows if r[0] == "p.output"]
    assert isinstance(notice.payload, OutputEvent) and notice.payload.error is not None
    assert notice.payload.error.type == halts.HALTED and notice.payload.output["fault"] is True
    assert p.counters.get("sessions_faulted") == 1
    # What keyed state holds: the state before the result, halted, the result parked; a
    # restored task (a new processor) reads it so.
    state, _ = _processor()._session("s1", store)  # type: ignore[misc]
    assert state.fault is not None and state.seq == notice.seq and not state.idle
    assert [type(e.payload).__name__ for e in state.fault.parked] == ["DurableCallResult"]
    broken["on"] = False
    signal = AgentEvent.external("s1", SignalEvent(state.fault.signal, None), event_id="resume-1",
                                 timestamp=3)
    rows = p.handle(_record("s1", encode(signal), 2, HEADERS), store)
    [answer] = [decode(r[3]) for r in rows if r[0] == "p.output"]
    assert isinstance(answer.payload, OutputEvent) and answer.payload.output == "hello"
