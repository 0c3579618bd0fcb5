"""Timestamps at and beyond the 64 bits of an Avro long, written and read."""

from __future__ import annotations

import dataclasses

import pytest

from eddies.events import (
    MAX_TIMESTAMP_MS,
    AgentEvent,
    DecodeError,
    EncodingError,
    InputEvent,
    decode,
    encode,
    envelope_problem,
)
from tests import avro_bytes
from tests.avro_bytes import MARKER, varint


def event(timestamp: int) -> AgentEvent:
    return AgentEvent.external("s1", InputEvent("hi"), event_id="in-1", timestamp=timestamp)


def with_raw_timestamp(raw: bytes) -> bytes:
    """The bytes of :func:`event` whose timestamp varint is ``raw``."""
    return avro_bytes.with_raw_timestamp(event(0), raw)


def test_the_marker_substitution_itself_round_trips() -> None:
    assert decode(with_raw_timestamp(varint(1_234 << 1))).timestamp == 1_234
    assert decode(with_raw_timestamp(varint((5 << 1) - 1))).timestamp == -5


@pytest.mark.parametrize("timestamp", [2**63, -(2**63) - 1, 2**64, -(2**64), 2**100])
def test_a_timestamp_beyond_64_bits_cannot_be_written(timestamp: int) -> None:
    with pytest.raises(EncodingError, match="outside the 64-bit range of an Avro long"):
        encode(event(timestamp))


@pytest.mark.parametrize("timestamp", [2**63 - 1, -(2**63), MAX_TIMESTAMP_MS + 1, -1])
def test_a_timestamp_in_64_bits_round_trips_even_when_readers_could_not_use_it(timestamp: int) -> None:
    data = encode(event(timestamp))
    assert decode(data).timestamp == timestamp
    assert decode(data) == event(timestamp)


def test_the_extremes_take_ten_bytes() -> None:
    assert with_raw_timestamp(varint(2**64 - 1)) == encode(event(-(2**63)))
    assert with_raw_timestamp(varint(2**64 - 2)) == encode(event(2**63 - 1))
    assert len(varint(2**64 - 1)) == 10


@pytest.mark.parametrize(("raw", "message"), [
    (b"\x80" * 10 + b"\x01", "longer than the 10 bytes"),  # 11 bytes
    (b"\xff" * 10 + b"\x00", "longer than the 10 bytes"),
    (b"\x80" * 15 + b"\x00", "longer than the 10 bytes"),
    (varint(2**64), "beyond the 64 bits"),  # 10 bytes, 65 bits
    (varint((2**68) << 1), "beyond the 64 bits"),
    (b"\xff" * 9 + b"\x7f", "beyond the 64 bits"),  # 10 bytes, 70 bits
])
def test_a_timestamp_varint_beyond_a_long_is_undecodable(raw: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        decode(with_raw_timestamp(raw))


def test_a_truncated_timestamp_varint_is_undecodable() -> None:
    data = encode(event(MARKER))
    cut = data.index(varint(MARKER << 1)) + 3
    with pytest.raises(DecodeError):
        decode(data[:cut])


@pytest.mark.parametrize("timestamp", [0, 1, 1_700_000_000_000, MAX_TIMESTAMP_MS])
def test_timestamps_readers_decode_make_no_problem(timestamp: int) -> None:
    assert envelope_problem(event(timestamp)) is None


@pytest.mark.parametrize("timestamp", [-1, MAX_TIMESTAMP_MS + 1, 2**63 - 1, -(2**63), 2**63,
                                       -(2**63) - 1])
def test_timestamps_outside_what_readers_decode_are_a_problem(timestamp: int) -> None:
    problem = envelope_problem(event(timestamp))
    assert problem is not None
    assert problem.startswith(f"timestamp {timestamp} is outside 0..{MAX_TIMESTAMP_MS}")


def test_schema_version_and_type_are_a_problem_before_the_timestamp() -> None:
    ev = event(-1)
    assert envelope_problem(dataclasses.replace(ev, schema_version=2)) == (
        "schema_version 2 is not one this worker reads (1)")
    assert envelope_problem(dataclasses.replace(ev, type="Bogus")) == (
        "type 'Bogus' does not name the payload's type 'InputEvent'")
    long_type = dataclasses.replace(event(0), type="T" * 1_000)
    problem = envelope_problem(long_type)
    assert problem is not None and len(problem) < 200  # a hostile type is cut in the reason
