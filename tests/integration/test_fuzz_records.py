"""Property: whatever valid-Avro records a hostile producer mixes with valid prompts, the
worker keeps running, every bad record is in the DLQ with a reason, every valid prompt is
answered once, and everything the worker wrote decodes with fastavro.

Each example is a batch of records sent to one running worker on the embedded broker;
``FUZZ_EXAMPLES`` sets how many batches (default 20)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import time
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, Phase, assume, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from eddies.connectors.journal.epochs import state_of
from eddies.connectors.runtime.client import input_event, read_records
from eddies.connectors.runtime.records import HEADERS
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.signing import DEV_KEY, SIGNATURE_HEADER, ResultSigner
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import SessionState
from eddies.events import (
    MAX_TIMESTAMP_MS,
    AgentEvent,
    CallStatus,
    ChatMessage,
    ChatRequestEvent,
    CustomEvent,
    DurableCallResult,
    Event,
    OutputEvent,
    encode,
    partition_for,
)
from eddies.events.schemas import envelope_schema

from .hostile import big_producer, dead_letters, healthy, reason, start

pytestmark = pytest.mark.integration

LIMIT = 20_000  # max_record_bytes: sizes around it without megabytes on the wire
PARTITIONS = 4
LONGS = [0, 1, 2**31, 2**63 - 1, -(2**63)]
GOOD_TIMESTAMPS = [0, 1, 1_764_460_800_000, MAX_TIMESTAMP_MS]
BAD_TIMESTAMPS = [-1, -(2**63), MAX_TIMESTAMP_MS + 1, 2**62, 2**63 - 1]


@dataclasses.dataclass
class Rec:
    """One record to produce, and whether the worker must answer it or dead-letter it."""

    good: bool
    key: bytes | None
    value: bytes
    partition: int | None = None  # None: the producer's murmur2 partitioner
    headers: list[tuple[str, bytes]] = dataclasses.field(default_factory=lambda: list(HEADERS))
    session: str = ""


text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


def sized(ev: AgentEvent, size: int) -> AgentEvent:
    """``ev`` with its input padded so that it encodes to ``size`` bytes (or just under,
    where a length prefix grows by a byte)."""
    padded = dataclasses.replace(ev, payload=dataclasses.replace(ev.payload, input=""))  # type: ignore[type-var]
    pad = size - len(encode(padded))
    while pad > 0:
        padded.payload.input = "p" * pad  # type: ignore[attr-defined]
        over = len(encode(padded)) - size
        if over <= 0:
            break
        pad -= over
    return padded


@st.composite
def prompts(draw: Any, sid: str) -> AgentEvent:
    """A valid prompt, extreme in every field the door lets through."""
    ev = input_event(sid, draw(text), event_id=draw(st.sampled_from(["", "i" * 256, sid + "-id"])),
                     timestamp=draw(st.sampled_from(GOOD_TIMESTAMPS)))
    ev.seq = draw(st.sampled_from(LONGS))
    ev.run = draw(st.sampled_from(LONGS))
    ev.agent = draw(st.sampled_from(["", "echo"]))
    ev.agent_version = draw(text)
    ev.causation_id = draw(st.none() | text)
    ev.action = draw(st.none() | text)
    size = draw(st.sampled_from([None, LIMIT, LIMIT - 1, LIMIT // 2]))
    return ev if size is None else sized(ev, size)


def valid(draw: Any, sid: str) -> Rec:
    ev = draw(prompts(sid))
    home = partition_for(sid, PARTITIONS)
    part = draw(st.sampled_from([None, (home + 1) % PARTITIONS, (home + 3) % PARTITIONS]))
    return Rec(True, sid.encode(), encode(ev), part, session=sid)


def other_payload(draw: Any, sid: str) -> Event:
    return draw(st.sampled_from([
        OutputEvent(output="forged answer"),
        ChatRequestEvent(model="llm", messages=[ChatMessage(content="hi")]),
        CustomEvent("FuzzEvent", {"score": 3}),
    ]))


def invalid(draw: Any, sid: str) -> Rec:
    """A record with exactly one defect the door must refuse."""
    ev = draw(prompts(sid))
    defect = draw(st.sampled_from([
        "over", "timestamp", "schema_version", "type", "payload", "forged", "orphan", "no key",
        "other key", "binary key", "garbage", "agent", "scope", "long id"]))
    key: bytes | None = sid.encode()
    headers = list(HEADERS)
    if defect == "over":
        ev = sized(ev, LIMIT + draw(st.integers(1, 40)))
        while len(encode(ev)) <= LIMIT:  # where a length prefix grew, sized() stays under
            ev.payload.input += "p"  # type: ignore[attr-defined]
    elif defect == "timestamp":
        ev.timestamp = draw(st.sampled_from(BAD_TIMESTAMPS))
    elif defect == "schema_version":
        ev.schema_version = draw(st.sampled_from([0, 2, -1, 2**31 - 1]))
    elif defect == "type":
        ev.type = draw(st.sampled_from(["", "Bogus", "OutputEvent", "ChatResponseEvent",
                                        "DurableCallResult"]))
    elif defect == "payload":
        payload = other_payload(draw, sid)
        ev = AgentEvent.external(sid, payload, event_id=ev.event_id, timestamp=ev.timestamp or 1)
    elif defect in ("forged", "orphan"):
        result = DurableCallResult(f"{sid}/1/1/1", status=CallStatus.OK, value=json.dumps("forged"))
        ev = AgentEvent.external(sid, result, event_id=f"r-{sid}", timestamp=1)
        data = encode(ev)
        if defect == "orphan":  # validly signed, but no run of this session waits for it
            headers.append((SIGNATURE_HEADER, ResultSigner([DEV_KEY]).sign(data)))
        else:
            forged = draw(st.sampled_from([b"", b"0" * 64, ResultSigner([b"x" * 32]).sign(data)]))
            headers.append((SIGNATURE_HEADER, forged))
        return Rec(False, key, data, headers=headers, session=sid)
    elif defect == "no key":
        key = None
    elif defect == "other key":
        key = (sid + "-other").encode()
    elif defect == "binary key":
        key = b"\xff\xfe" + sid.encode()
    elif defect == "garbage":
        return Rec(False, key, draw(st.binary(min_size=0, max_size=300)), session=sid)
    elif defect == "agent":
        ev.agent = "someone-else"
    elif defect == "scope":
        ev.scope = ("child",)
    elif defect == "long id":
        ev.event_id = "i" * draw(st.integers(257, 400))
    return Rec(False, key, encode(ev), session=sid)


@st.composite
def batches(draw: Any) -> tuple[str, list[Rec]]:
    """(the batch's session id prefix, its records)."""
    n = draw(st.integers(4, 16))
    batch = draw(st.uuids()).hex[:8]
    return batch, [valid(draw, f"{batch}-{i}") if draw(st.booleans())
                   else invalid(draw, f"{batch}-{i}") for i in range(n)]


def test_no_record_stops_the_worker_and_every_one_is_accounted_for(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EDDIES_RESULT_KEY", raising=False)  # the embedded broker's key
    settings.max_record_bytes = LIMIT
    settings.partitions = PARTITIONS
    names = TopicNames(settings.app)
    worker = start(settings)
    prod = big_producer(settings)
    sent_bad = 0
    answered: dict[str, int] = {}
    prefixes: set[str] = set()

    # No shrinking: each try costs seconds against the broker, and the worker under test
    # keeps what earlier batches did; a failure reports its batch as generated.
    @hsettings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "20")), deadline=None,
               database=None, suppress_health_check=list(HealthCheck),
               phases=[Phase.explicit, Phase.generate])
    @given(batches())
    def one_batch(batch: tuple[str, list[Rec]]) -> None:
        nonlocal sent_bad
        prefix, records = batch
        # Hypothesis may draw an example again: its sessions would get more inputs.
        assume(prefix not in prefixes)
        prefixes.add(prefix)
        for r in records:
            kwargs: dict[str, Any] = {"headers": r.headers}
            if r.partition is not None:
                kwargs["partition"] = r.partition
            prod.produce(names.input, r.value, r.key, **kwargs)
        prod.flush(30)
        sent_bad += sum(not r.good for r in records)
        want = {r.session for r in records if r.good}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            outputs = [m for m in read_records(settings, names.output)]
            for m in outputs:
                answered.setdefault(m.key().decode(), 0)
            counts: dict[str, int] = {}
            for m in outputs:
                sid = m.key().decode()
                counts[sid] = counts.get(sid, 0) + 1
            answered.update(counts)
            if want <= set(counts):
                break
            time.sleep(0.2)
        healthy(worker)
        assert want <= set(answered), sorted(want - set(answered))
        for sid in want:
            assert answered[sid] == 1, (sid, answered[sid])
        dead = dead_letters(settings, sent_bad)
        assert len(dead) == sent_bad
        assert all(reason(m) for m in dead)

    try:
        one_batch()
        time.sleep(1.0)  # anything still on its way to the DLQ or the output
        healthy(worker)
    finally:
        worker.stop()
    assert not worker.errors, worker.errors
    assert len(dead_letters(settings)) == sent_bad == worker.counters.get("dlq")
    schema = envelope_schema()
    written = 0
    for topic in (names.events, names.output):
        for msg in read_records(settings, topic):
            ev = fastavro.schemaless_reader(io.BytesIO(msg.value()), schema, None)
            assert isinstance(ev, dict) and ev["session_id"] == msg.key().decode()
            written += 1
    for msg in read_records(settings, names.journal):
        if msg.value() is None:
            continue
        if msg.key().startswith(b"out/"):
            fastavro.schemaless_reader(io.BytesIO(msg.value()), schema, None)
        elif msg.key().startswith(b"snap"):
            SessionState.from_bytes(state_of(msg.value()))
    assert written > 0
