"""The compiled codec is byte-for-byte fastavro's encoding, and reads what fastavro writes."""

from __future__ import annotations

import io
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from hypothesis import given, settings
from hypothesis import strategies as st

from eddies.events import AgentEvent, to_record
from eddies.events.avro_compiled import compile_schema
from eddies.events.schemas import envelope_schema
from tests.strategies import envelopes


def _fastavro_bytes(schema: Any, rec: Any) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, schema, rec)
    return buf.getvalue()


@given(envelopes)
@settings(max_examples=300, deadline=None)
def test_envelope_bytes_equal_fastavro(ev: AgentEvent) -> None:
    encode, decode = compile_schema(envelope_schema())
    rec = to_record(ev)
    data = _fastavro_bytes(envelope_schema(), rec)
    assert encode(rec) == data
    back = decode(data)
    assert back["payload"][0] == rec["payload"][0]
    assert back["payload"][1] == rec["payload"][1]
    assert {k: v for k, v in back.items() if k not in ("payload", "scope")} == {
        k: v for k, v in rec.items() if k not in ("payload", "scope")}


EVERYTHING = parse_schema({
    "type": "record", "name": "All", "namespace": "t", "fields": [
        {"name": "n", "type": "null"},
        {"name": "flag", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["R", "G", "B"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "maybe", "type": ["null", "t.Color"]},
        {"name": "nested", "type": {"type": "array", "items": {
            "type": "record", "name": "Inner", "fields": [{"name": "x", "type": "double"}]}}},
    ]})

everything = st.fixed_dictionaries({
    "n": st.none(), "flag": st.booleans(), "i": st.integers(-(2**31), 2**31 - 1),
    "l": st.integers(-(2**63), 2**63 - 1),
    "f": st.floats(width=32, allow_nan=False), "d": st.floats(allow_nan=False),
    "s": st.text(max_size=80), "raw": st.binary(max_size=80), "fx": st.binary(min_size=4, max_size=4),
    "color": st.sampled_from(["R", "G", "B"]), "tags": st.lists(st.text(max_size=5), max_size=4),
    "attrs": st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1), max_size=4),
    "maybe": st.none() | st.sampled_from(["R", "B"]),
    "nested": st.lists(st.fixed_dictionaries({"x": st.floats(allow_nan=False)}), max_size=3),
})


@given(everything)
@settings(max_examples=300, deadline=None)
def test_every_supported_type_matches_fastavro(rec: dict[str, Any]) -> None:
    encode, decode = compile_schema(EVERYTHING)
    data = _fastavro_bytes(EVERYTHING, rec)
    assert encode(rec) == data
    assert decode(data) == schemaless_reader(io.BytesIO(data), EVERYTHING, None)


def test_blocked_arrays_from_other_writers_are_read() -> None:
    schema = parse_schema({"type": "record", "name": "B", "fields": [
        {"name": "xs", "type": {"type": "array", "items": "long"}}]})
    _, decode = compile_schema(schema)
    # Block of count -2 (zigzag 3) with byte size 2, items 1 and 2, then a block of 1 item.
    data = bytes([3, 4, 2, 4, 2, 6, 0])
    assert decode(data) == {"xs": [1, 2, 3]} == schemaless_reader(io.BytesIO(data), schema, None)


@pytest.mark.parametrize("data", [bytes([2, 0xFF]), bytes([0x80] * 12), bytes([0x7F])])
def test_bad_lengths_and_varints_raise(data: bytes) -> None:
    schema = parse_schema({"type": "record", "name": "S", "fields": [{"name": "s", "type": "string"}]})
    _, decode = compile_schema(schema)
    with pytest.raises((ValueError, IndexError)):
        decode(data)


POINT = parse_schema({
    "type": "record", "name": "Point", "namespace": "t", "fields": [
        {"name": "label", "type": "string"},
        {"name": "tag", "type": ["null", "string"]},
        {"name": "x", "type": "long"},
        {"name": "shape", "type": [
            {"type": "record", "name": "Dot", "fields": [{"name": "size", "type": "int"}]},
            {"type": "record", "name": "Blob", "fields": [{"name": "json", "type": "string"}]},
        ]},
    ]})


class Point:
    def __init__(self, label: Any, tag: Any, x: Any, shape: Any) -> None:
        self.label, self.tag, self.x, self.shape = label, tag, x, shape


class Dot:
    def __init__(self, size: int) -> None:
        self.size = size


def test_object_writer_writes_what_the_record_writer_writes() -> None:
    from eddies.events.avro_compiled import ObjectBinding, compile_object_writer

    binding = ObjectBinding(
        classes={"t.Point": Point, "t.Dot": Dot},
        convert={"t.Blob.json": lambda obj: str(sorted(obj.items()))},
        # Anything else (a dict here) is written as a Blob.
        fallback=lambda obj: ("t.Blob", obj),
        cached=frozenset({"t.Point.label", "t.Point.tag"}),
    )
    write = compile_object_writer(POINT, binding)
    # More distinct cached strings than the cache holds, each written twice (a hit and a miss).
    for i in range(9000):
        for _ in range(2):
            label = "é" * (i % 70) + str(i)  # lengths on both sides of the one-byte prefix
            tag = None if i % 3 else f"t{i % 5}"
            shape = Dot(i) if i % 2 else {"k": i}
            rec = {"label": label, "tag": tag, "x": -i * 10**9,
                   "shape": ("t.Dot", {"size": i}) if i % 2 else
                   ("t.Blob", {"json": str(sorted(shape.items()))})}
            assert write(Point(label, tag, -i * 10**9, shape)) == _fastavro_bytes(POINT, rec)
    with pytest.raises(AttributeError):
        write(Point(123, None, 0, Dot(1)))  # a cached string field given an int
