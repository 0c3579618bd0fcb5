"""No record can stop a worker, forge a result, or strand a session (issue 9's findings,
one by one, each followed by a crash and a restart that reads the record again)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from eddies.connectors.runtime.admission import FORWARDED_HEADER
from eddies.connectors.runtime.client import input_event, read_events, read_records, send_input
from eddies.connectors.runtime.records import DLQ_TRUNCATED_HEADER, HEADERS, header
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.signing import DEV_KEY, SIGNATURE_HEADER, ResultSigner
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import (
    MAX_TIMESTAMP_MS,
    AgentEvent,
    CallStatus,
    DurableCallRequest,
    DurableCallResult,
    encode,
    partition_for,
)
from tests.avro_bytes import varint, with_raw_timestamp

from .agents import effects_agent
from .hostile import (
    big_producer,
    crash,
    dead_letters,
    healthy,
    outputs_by_session,
    reason,
    start,
)
from .sessions import sessions_on_every_partition

pytestmark = pytest.mark.integration

MiB = 1 << 20


def prompt(sid: str, value: Any, timestamp: int | None = None) -> bytes:
    return encode(input_event(sid, value, timestamp=timestamp))


# Each poison: (records to send for session "poison"; what the session gets: a substring
# of its output, or None for no output; a substring of a dead letter's reason, or None).
Poison = tuple[Callable[[], list[bytes]], str | None, str | None]
POISONS: dict[str, Poison] = {
    # Under max_record_bytes, over librdkafka's default message.max.bytes once wrapped.
    "prompt of 1,010,000 bytes": (lambda: [prompt("poison", "x" * 1_010_000)],
                                  "1010000 characters", None),
    "record over 1 MiB": (lambda: [prompt("poison", "x" * (MiB + 10_000))], None,
                          "exceeds max_record_bytes"),
    "memory of 4 turns of 300 KB": (
        lambda: [prompt("poison", {"remember": "m" * 300_000}) for _ in range(4)],
        "MemoryLimitError", None),
    "output over a record": (lambda: [prompt("poison", {"repeat": 3, "text": "o" * 400_000})],
                             "RecordTooLargeError", "over the largest record a worker writes"),
    "call result over a record": (lambda: [prompt("poison", {"inflate": 2 * MiB})],
                                  "ResultTooLargeError", None),
    "timestamp 2^68": (lambda: [with_raw_timestamp(
        input_event("poison", "hi"), varint((2**68) << 1))], None, "undecodable"),
    "timestamp 2^62": (lambda: [prompt("poison", "hi", timestamp=2**62)], None,
                       "outside 0..253402300799999"),
}


@pytest.mark.parametrize("poison", list(POISONS))
def test_a_poison_record_stops_neither_the_worker_nor_its_restart(settings: Settings,
                                                                  poison: str) -> None:
    records, answer, dead = POISONS[poison]
    names = TopicNames(settings.app)
    lazy = dataclasses.replace(settings, commit_interval_ms=600_000)  # commits nothing
    worker = start(lazy)
    prod = big_producer(settings)
    for value in records():
        prod.produce(names.input, value, b"poison", headers=HEADERS)
    send_input(settings, "before", "fine", prod=prod)
    prod.flush(30)
    got = outputs_by_session(settings, {"before"})
    assert got["before"][0].output == '4 characters'
    healthy(worker)
    crash(worker)  # the restart reads the poison again
    worker = start(settings)
    try:
        send_input(settings, "after", "fine", prod=prod)
        prod.flush(30)
        got = outputs_by_session(settings, {"after"})
        assert [o.output for o in got["after"]] == ['4 characters']
        healthy(worker)
    finally:
        worker.stop()
    assert not worker.errors, worker.errors
    outs = got.get("poison", [])
    if answer is None:
        assert not outs
    else:
        texts = [o.output if o.error is None else f"{o.error.type}: {o.error.message}" for o in outs]
        assert any(answer in t for t in texts), texts
    reasons = [reason(m) for m in dead_letters(settings, 1 if dead else 0, timeout=10)]
    if dead is None:
        assert not reasons, reasons
    else:
        assert any(dead in r for r in reasons), reasons
    for msg in read_records(settings, names.dlq):  # nothing larger than a record
        assert len(msg.value()) <= settings.max_record_bytes
        if len(msg.value()) == settings.max_record_bytes:
            assert int(header(msg.headers(), DLQ_TRUNCATED_HEADER) or 0) > len(msg.value())


def test_a_result_without_a_valid_signature_is_refused_and_the_executors_is_accepted(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "k" * 40
    monkeypatch.setenv("EDDIES_RESULT_KEY", key)
    monkeypatch.setenv("TEST_EFFECT_DELAY", "3")  # the real call is slow; forgers are quick
    names = TopicNames(settings.app)
    worker = start(settings, effects_agent())
    try:
        send_input(settings, "victim", json.dumps({"a": 1, "b": 2}))
        request = None
        deadline = time.monotonic() + 30
        while request is None and time.monotonic() < deadline:
            for ev in read_events(settings, names.events):
                if ev.session_id == "victim" and isinstance(ev.payload, DurableCallRequest):
                    request = ev
                    break
        assert request is not None
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        forged = AgentEvent.external("victim", DurableCallResult(
            req.call_id, req.kind, CallStatus.OK, json.dumps("FORGED receipt"), None,
            req.attempt, req.digest), event_id=f"forged-{req.call_id}", timestamp=1)
        data = encode(forged)
        prod = big_producer(settings)
        for signature in (None, b"", ResultSigner([b"another key"]).sign(data),
                          ResultSigner([DEV_KEY]).sign(data)):
            headers = HEADERS + ([(SIGNATURE_HEADER, signature)] if signature is not None else [])
            prod.produce(names.input, data, b"victim", headers=headers)
        prod.flush(30)
        got = outputs_by_session(settings, {"victim"})
        healthy(worker)
    finally:
        worker.stop()
    reasons = [reason(m) for m in dead_letters(settings, 4)]
    assert len(reasons) == 4 and all("without a valid executor signature" in r for r in reasons)
    results = [ev.payload for ev in read_events(settings, names.events)
               if isinstance(ev.payload, DurableCallResult) and ev.payload.call_id == req.call_id]
    assert [r.value for r in results] == [json.dumps("charged s1 2")]
    assert got["victim"][0].error is None


def send_misrouted(settings: Settings, sessions: list[str]) -> None:
    """Two inputs per session, both on a partition the session does not hash to."""
    prod = big_producer(settings)
    for turn in range(2):
        for sid in sessions:
            wrong = (partition_for(sid, settings.partitions) + 1) % settings.partitions
            prod.produce(TopicNames(settings.app).input, prompt(sid, "x" * (turn + 1)),
                         sid.encode(), partition=wrong, headers=HEADERS)
    prod.flush(30)


def answered_once_in_order(got: dict[str, list[Any]], sessions: list[str]) -> None:
    assert {sid: [o.output for o in got.get(sid, [])] for sid in sessions} == {
        sid: ["1 characters", "2 characters"] for sid in sessions}


def test_records_on_the_wrong_partition_are_forwarded_in_order(settings: Settings) -> None:
    """A producer that does not partition by murmur2 (the issue: confluent-kafka's default
    partitioner, two workers, 5 of 12 sessions never answered)."""
    names = TopicNames(settings.app)
    sessions = sessions_on_every_partition("misrouted-", settings.partitions, 3)
    first, second = start(settings), start(settings)
    try:
        send_misrouted(settings, sessions)
        got = outputs_by_session(settings, set(sessions), each=2)
        healthy(first)
        healthy(second)
    finally:
        first.stop()
        second.stop()
    answered_once_in_order(got, sessions)
    assert first.counters.get("forwarded") + second.counters.get("forwarded") == 2 * len(sessions)
    forwarded = [m for m in read_records(settings, names.input) if header(m.headers(), FORWARDED_HEADER)]
    assert len(forwarded) == 2 * len(sessions)
    for msg in forwarded:
        assert msg.partition() == partition_for(msg.key().decode(), settings.partitions)


def test_forwarding_again_after_a_crash_answers_each_input_once(settings: Settings) -> None:
    """A crash before the commit: the restart forwards the records again, and each input is
    still answered once (a forwarded input keeps the id of where it first arrived)."""
    sessions = sessions_on_every_partition("misrouted-", settings.partitions, 3)
    worker = start(dataclasses.replace(settings, commit_interval_ms=600_000))  # commits nothing
    send_misrouted(settings, sessions)
    outputs_by_session(settings, set(sessions), each=2)
    healthy(worker)
    assert worker.counters.get("forwarded") == 2 * len(sessions)
    crash(worker)
    again = start(settings)
    try:
        # Everything read again: the forwarded copies of the first run, and new ones.
        deadline = time.monotonic() + 60
        while again.counters.get("inputs") < 4 * len(sessions) and time.monotonic() < deadline:
            time.sleep(0.2)
        healthy(again)
    finally:
        again.stop()  # flushes what it wrote
    assert not again.errors
    assert again.counters.get("inputs") == 4 * len(sessions)
    assert again.counters.get("forwarded") == 2 * len(sessions)  # read again, forwarded again
    answered_once_in_order(outputs_by_session(settings, set(sessions), each=2), sessions)


def test_envelopes_that_lie_about_themselves_go_to_the_dlq(settings: Settings) -> None:
    names = TopicNames(settings.app)
    signer = ResultSigner([DEV_KEY])  # the embedded broker's key, as a worker there signs
    bad: dict[str, tuple[AgentEvent, str]] = {}

    def lie(sid: str, why: str, **fields: Any) -> None:
        bad[sid] = (dataclasses.replace(input_event(sid, "hi", event_id=f"id-{sid}"), **fields), why)

    lie("t-answer", "does not name the payload's type", type="ChatResponseEvent")
    lie("t-bogus", "does not name the payload's type", type="Bogus")
    lie("t-empty", "does not name the payload's type", type="")
    lie("v-2", "schema_version 2 is not one this worker reads", schema_version=2)
    lie("scoped", "empty scope", scope=("child",))
    lie("long-id", "longer than 256 characters", event_id="i" * 257)
    lie("t-future", "outside 0..", timestamp=MAX_TIMESTAMP_MS + 1)
    lie("t-past", "outside 0..", timestamp=-1)
    orphan = AgentEvent.external("orphan", DurableCallResult(
        "orphan/1/1/1", status=CallStatus.OK, value="1"), event_id="r-orphan", timestamp=1)
    worker = start(dataclasses.replace(settings, commit_interval_ms=600_000))  # commits nothing
    prod = big_producer(settings)
    for sid, (ev, _) in bad.items():
        prod.produce(names.input, encode(ev), sid.encode(), headers=HEADERS)
    data = encode(orphan)  # signed, so refused only because nothing waits for it
    prod.produce(names.input, data, b"orphan",
                 headers=[*HEADERS, (SIGNATURE_HEADER, signer.sign(data))])
    send_input(settings, "honest", "fine", prod=prod)
    prod.flush(30)
    assert [o.output for o in outputs_by_session(settings, {"honest"})["honest"]] == ["4 characters"]
    dead = dead_letters(settings, len(bad) + 1)
    healthy(worker)
    crash(worker)  # the restart reads them all again
    worker = start(settings)
    try:
        send_input(settings, "honest-2", "fine", prod=prod)
        prod.flush(30)
        assert outputs_by_session(settings, {"honest-2"})["honest-2"]
        again = dead_letters(settings, 2 * len(dead))
        healthy(worker)
    finally:
        worker.stop()
    assert len(again) == 2 * len(dead) == 2 * (len(bad) + 1)
    by_key = {m.key().decode(): reason(m) for m in dead}
    for sid, (_, why) in bad.items():
        assert why in by_key.get(sid, ""), (sid, by_key.get(sid))
    assert "no state here" in by_key["orphan"]
    recorded = {ev.session_id for ev in read_events(settings, names.events)}
    assert recorded == {"honest", "honest-2"}  # nothing of the refused records is in the history
    saved = {m.key().partition(b"/")[2] for m in read_records(settings, names.journal)
             if m.key().startswith(b"snap")}
    assert b"orphan" not in saved and b"honest" in saved


def test_a_session_whose_clock_is_in_the_future_still_expires(settings: Settings) -> None:
    settings.session_ttl_ms = 1500
    worker = start(settings)
    try:
        prod = big_producer(settings)
        prod.produce(TopicNames(settings.app).input,
                     prompt("future", "hi", timestamp=MAX_TIMESTAMP_MS), b"future", headers=HEADERS)
        prod.flush(30)
        assert outputs_by_session(settings, {"future"})["future"]
        deadline = time.monotonic() + 20
        while not worker.counters.get("sessions_closed") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert worker.counters.get("sessions_closed") == 1
    finally:
        worker.stop()


def test_topics_that_would_refuse_what_a_worker_writes_fail_its_start(settings: Settings) -> None:
    from confluent_kafka.admin import AdminClient

    from eddies.connectors.kafka.worker import Worker
    from eddies.connectors.runtime.topics import TopicError, ensure_topics

    from .agents import echo_agent

    ensure_topics(AdminClient(settings.client_config()), TopicNames(settings.app),
                  settings.partitions, max_message_bytes=500_000)
    with pytest.raises(TopicError, match=r"max\.message\.bytes=500000, below the 1114112 bytes.*"
                                         r"lower max_record_bytes to 434464"):
        Worker(settings, echo_agent()).start()


def test_journal_records_no_worker_writes_stop_neither_a_restore_nor_a_call(
        settings: Settings) -> None:
    """The journal is the workers' alone (see the ACLs in docs/operations/trust.md), but a record there that
    no worker wrote must not stop one either."""
    from confluent_kafka.admin import AdminClient

    from eddies.connectors.runtime.topics import ensure_topics
    from eddies.events.ids import call_id

    names = TopicNames(settings.app)
    ensure_topics(AdminClient(settings.client_config()), names, settings.partitions,
                  max_message_bytes=settings.write_limit)
    sid = "garbled"
    part = partition_for(sid, settings.partitions)
    first_call = call_id(sid, (), 1, 1, 0)  # the echo agent's first call, before it is made
    prod = big_producer(settings)
    for key, value in [(b"\xff\xfe", b"x"), (b"out/nonsense/1", b"x"), (b"start/x/y", b"x"),
                       (b"snap/broken", b"{not json"), (f"out/{first_call}/1".encode(), b"\x00?")]:
        prod.produce(names.journal, value, key, partition=part)
    prod.flush(30)
    worker = start(settings)
    try:
        send_input(settings, sid, "hi")
        send_input(settings, "fine", "hi")
        got = outputs_by_session(settings, {sid, "fine"})
        healthy(worker)
    finally:
        worker.stop()
    assert [o.output for o in got["fine"]] == ["2 characters"]
    error = got[sid][0].error  # its outcome unreadable: unknown, and not run again
    assert error is not None and error.type == "DurableCallUnknownError", got[sid]
    assert worker.counters.get("outcomes_unreadable") == 1
    assert worker.counters.get("snapshots_unreadable") == 1
