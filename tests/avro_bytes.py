"""Crafting Avro bytes no conforming writer produces (varints beyond a long), for tests
of what readers do with them."""

from __future__ import annotations

import dataclasses

from eddies.events import AgentEvent, encode

#: A timestamp whose varint occurs once in an encoded event: the spot to replace.
MARKER = 0x5A5A_5A5A_5A5A


def varint(n: int) -> bytes:
    """The Avro varint of ``n`` (already zigzagged), of any size."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def with_raw_timestamp(ev: AgentEvent, raw: bytes) -> bytes:
    """``ev`` encoded with the varint of its timestamp replaced by ``raw``."""
    data = encode(dataclasses.replace(ev, timestamp=MARKER))
    old = varint(MARKER << 1)
    assert data.count(old) == 1
    return data.replace(old, raw)
