"""Avro round trips, headers, custom events and garbage handling."""

from __future__ import annotations

import io
from dataclasses import dataclass

import pytest
from fastavro import schemaless_reader
from fastavro.schema import load_schema
from hypothesis import given, settings
from hypothesis import strategies as st

from eddies.events import (
    FINGERPRINT_HEADER,
    SCHEMA_HEADER,
    AgentEvent,
    CallKind,
    ChatMessage,
    ChatResponseEvent,
    CustomEvent,
    DecodeError,
    DurableCallRequest,
    EncodingError,
    Event,
    InputEvent,
    MessageRole,
    decode,
    encode,
    encode_record,
    from_record,
    headers,
    to_record,
)
from eddies.events.schemas import avro_dir, envelope_schema
from tests.strategies import envelopes


@dataclass
class Reviewed(Event):
    score: int
    notes: list[str]


@given(envelopes)
@settings(max_examples=300, deadline=None)
def test_every_event_round_trips_through_avro(ev: AgentEvent) -> None:
    assert decode(encode(ev)) == ev


@given(envelopes)
@settings(max_examples=100, deadline=None)
def test_record_form_round_trips_and_is_what_fastavro_reads(ev: AgentEvent) -> None:
    assert from_record(to_record(ev)) == ev
    # A reader that knows only the schema files (no eddies code) gets the same record.
    plain = load_schema(str(avro_dir() / "eddies.AgentEvent.avsc"))
    raw = schemaless_reader(io.BytesIO(encode(ev)), plain, None, return_record_name=True,
                            return_record_name_override=True)
    expected = to_record(ev)
    assert raw["event_id"] == expected["event_id"]
    assert raw["payload"][0] == expected["payload"][0]
    assert raw["payload"][1] == expected["payload"][1]


@given(envelopes)
@settings(max_examples=200, deadline=None)
def test_encode_writes_the_bytes_fastavro_writes_for_the_record_form(ev: AgentEvent) -> None:
    # encode() writes straight from the objects; the reference is fastavro on to_record's dict.
    assert encode(ev) == encode_record(to_record(ev), envelope_schema())


def test_encode_names_the_field_of_a_wrongly_typed_value() -> None:
    ev = AgentEvent.external("s", ChatResponseEvent(request_id=7), event_id="e", timestamp=0)  # type: ignore[arg-type]
    with pytest.raises(EncodingError, match="ChatResponseEvent"):
        encode(ev)


def test_request_digest_added_after_v1_round_trips() -> None:
    req = DurableCallRequest("s1:r1:i1:c0", CallKind.TOOL, "add", '{"args":[],"kwargs":{}}', False, 2,
                             None, "0123456789abcdef")
    ev = AgentEvent.external("s1", req, event_id="e", timestamp=1)
    back = decode(encode(ev)).payload
    assert isinstance(back, DurableCallRequest) and back.digest == "0123456789abcdef"


def test_values_are_plain_json_in_the_avro_record() -> None:
    ev = AgentEvent.external("s1", InputEvent(input={"q": "2+2", "n": [1, 2.5, None]}),
                             event_id="e1", timestamp=5)
    plain = load_schema(str(avro_dir() / "eddies.AgentEvent.avsc"))
    raw = schemaless_reader(io.BytesIO(encode(ev)), plain, None, return_record_name=True)
    assert raw["payload"] == ("eddies.InputEvent",
                              {"input": '{"q":"2+2","n":[1,2.5,null]}', "identity": None})


def test_custom_event_class_round_trips_as_itself() -> None:
    ev = AgentEvent.external("s1", Reviewed(3, ["ok"]), event_id="e", timestamp=0)
    assert ev.type == "Reviewed"
    back = decode(encode(ev))
    assert back.payload == Reviewed(3, ["ok"])
    assert to_record(ev)["payload"][0] == "eddies.CustomEvent"


def test_unknown_custom_type_decodes_as_custom_event() -> None:
    ev = AgentEvent.external("s1", CustomEvent("Elsewhere", {"a": 1}), event_id="e", timestamp=0)
    assert ev.type == "Elsewhere"
    assert decode(encode(ev)).payload == CustomEvent("Elsewhere", {"a": 1})


def test_custom_event_cannot_take_a_builtin_name() -> None:
    with pytest.raises(TypeError, match="reserved"):

        class InputEvent(Event):
            pass


def test_headers_name_the_schema_and_its_fingerprint() -> None:
    h = dict(headers())
    assert h[SCHEMA_HEADER] == b"AgentEvent/1"
    assert len(h[FINGERPRINT_HEADER]) == 16
    int(h[FINGERPRINT_HEADER], 16)


def test_unencodable_value_names_the_field() -> None:
    ev = AgentEvent.external("s1", InputEvent(input=b"raw"), event_id="e", timestamp=0)
    with pytest.raises(EncodingError, match="InputEvent.input"):
        encode(ev)


@given(st.binary(max_size=300))
@settings(max_examples=500, deadline=None)
def test_garbage_raises_decode_error_only(data: bytes) -> None:
    try:
        decode(data)
    except DecodeError:
        pass


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\xff" * 40, b"not avro at all, just text", b"\x02" * 9 + b"\x80" * 20],
)
def test_typical_garbage(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(data)


def test_trailing_bytes_and_truncation_are_rejected() -> None:
    ev = AgentEvent.external("s1", ChatResponseEvent("r", ChatMessage(MessageRole.ASSISTANT, "hi")),
                             event_id="e", timestamp=0)
    data = encode(ev)
    with pytest.raises(DecodeError, match="trailing"):
        decode(data + b"\x00")
    with pytest.raises(DecodeError):
        decode(data[:-3])
    with pytest.raises(DecodeError):
        decode("text")  # type: ignore[arg-type]


def test_invalid_json_in_a_value_field_is_a_decode_error() -> None:
    ev = AgentEvent.external("s1", InputEvent(input="x"), event_id="e", timestamp=0)
    rec = to_record(ev)
    rec["payload"] = ("eddies.InputEvent", {"input": "{not json"})
    with pytest.raises(DecodeError, match="InputEvent.input"):
        from_record(rec)


def test_the_docs_name_the_envelope_schemas_fingerprint() -> None:
    """docs/guide/downstream.md gives consumers the fingerprint to check: the current one."""
    from pathlib import Path

    from eddies.events.schemas import envelope_fingerprint

    text = (Path(__file__).resolve().parents[3] / "docs" / "guide" / "downstream.md").read_text()
    assert f"Today:\n`{envelope_fingerprint()}`" in text
