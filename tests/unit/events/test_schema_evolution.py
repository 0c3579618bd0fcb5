"""Schema evolution: data written with a released schema is read by the current one and
vice versa. ``tests/schemas/v1`` is a frozen copy of the first released schemas; freeze
each release there (``tests/schemas/vN``) and never edit a frozen copy."""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema
from hypothesis import assume, given, settings

from eddies.events import (
    AgentEvent,
    CallKind,
    DurableCallRequest,
    ErrorCategory,
    ErrorInfo,
    InputEvent,
    OutputEvent,
    SignalEvent,
    decode,
    decode_record,
    encode_record,
    to_record,
)
from eddies.events.payloads import BUILTIN_TYPES
from eddies.events.records import from_record
from eddies.events.schemas import avro_dir, envelope_schema, load_envelope_from
from tests.strategies import envelopes

FROZEN = sorted((Path(__file__).parents[2] / "schemas").glob("v*"))


def test_there_is_a_frozen_release() -> None:
    assert [p.name for p in FROZEN][:1] == ["v1"]
    # Schemas are only ever added (a new payload type is a new file).
    assert {p.name for p in FROZEN[0].glob("*.avsc")} <= {p.name for p in avro_dir().glob("*.avsc")}


def _as_known_to(frozen: Path, ev: AgentEvent) -> AgentEvent | None:
    """``ev`` as a release knows it: None if that release cannot hold it (a payload type or
    an enum symbol added since); fields added since at their defaults, at any depth."""
    def avsc(name: str) -> Any:
        path = frozen / f"eddies.{name}.avsc"
        return json.loads(path.read_text()) if path.exists() else None

    class Unknown(Exception):
        pass

    def project(value: Any) -> Any:
        if isinstance(value, enum.Enum):
            schema = avsc(type(value).__name__)
            if schema is not None and value.value not in schema["symbols"]:
                raise Unknown
            return value
        if isinstance(value, list | tuple):
            return type(value)(project(v) for v in value)
        if not dataclasses.is_dataclass(value) or isinstance(value, type):
            return value
        schema = avsc(type(value).__name__)
        if schema is None:  # a record type added since
            raise Unknown
        known = {f["name"] for f in schema["fields"]}
        changes = {}
        for f in dataclasses.fields(value):
            if f.name not in known and f.init:
                changes[f.name] = (f.default_factory() if f.default is dataclasses.MISSING  # type: ignore[misc]
                                   else f.default)
            elif f.init:
                changes[f.name] = project(getattr(value, f.name))
        return dataclasses.replace(value, **changes)

    p = ev.payload
    if type(p).event_type not in BUILTIN_TYPES:  # a user's event travels as a CustomEvent
        return ev
    try:
        return dataclasses.replace(ev, payload=project(p))
    except Unknown:
        return None


def test_what_a_release_cannot_hold_is_known() -> None:
    v1 = FROZEN[0]
    sig = AgentEvent.external("s", SignalEvent("go", 1), event_id="e", timestamp=1)
    assert _as_known_to(v1, sig) is None
    timer = AgentEvent.external("s", DurableCallRequest("c", CallKind.TIMER), event_id="e", timestamp=1)
    assert _as_known_to(v1, timer) is None
    call = AgentEvent.external("s", DurableCallRequest("c", not_before=5), event_id="e", timestamp=1)
    seen = _as_known_to(v1, call)
    assert seen is not None and isinstance(seen.payload, DurableCallRequest)
    assert seen.payload.not_before is None
    failed = AgentEvent.external("s", OutputEvent(None, ErrorInfo(
        "E", "m", True, ErrorCategory.TRANSIENT, 429, 5)), event_id="e", timestamp=1)
    seen = _as_known_to(v1, failed)
    assert seen is not None and isinstance(seen.payload, OutputEvent)
    assert seen.payload.error == ErrorInfo("E", "m", True)


@pytest.mark.parametrize("frozen", FROZEN, ids=lambda p: p.name)
@given(ev=envelopes)
@settings(max_examples=150, deadline=None)
def test_old_writer_new_reader_and_back(frozen: Path, ev: AgentEvent) -> None:
    known = _as_known_to(frozen, ev)
    assume(known is not None)  # new payload types and call kinds: not for older readers
    assert known is not None
    old = load_envelope_from(frozen)
    new = envelope_schema()
    # Written by the released schema, read by the current one.
    assert decode(encode_record(to_record(known), old), writer_schema=old) == known
    # Written by the current schema, read by a consumer still on the released one.
    back = decode_record(encode_record(to_record(ev), new), new, old)
    assert from_record(back) == known


def _schema_dir_variant(tmp_path: Path, edit: Any) -> Any:
    """A copy of the current schemas with one file edited, parsed from its own directory."""
    for src in avro_dir().glob("*.avsc"):
        (tmp_path / src.name).write_text(src.read_text())
    target = tmp_path / "eddies.InputEvent.avsc"
    schema = json.loads(target.read_text())
    edit(schema)
    target.write_text(json.dumps(schema))
    return load_envelope_from(tmp_path)


def test_adding_an_optional_field_is_compatible_both_ways(tmp_path: Path) -> None:
    v2 = _schema_dir_variant(
        tmp_path,
        lambda s: s["fields"].append({"name": "priority", "type": ["null", "int"], "default": None}),
    )
    current = envelope_schema()
    ev = AgentEvent.external("s1", InputEvent(input={"q": 1}), event_id="e", timestamp=7)
    rec = to_record(ev)
    # Old data, new reader: the new field takes its default.
    upgraded = decode_record(encode_record(rec, current), current, v2)
    assert upgraded["payload"][1] == {"input": '{"q":1}', "identity": None, "priority": None}
    # New data (with the field set), old reader: the field is skipped.
    rec2 = dict(rec, payload=("eddies.InputEvent", {"input": '{"q":1}', "identity": None, "priority": 3}))
    assert from_record(decode_record(encode_record(rec2, v2), v2, current)) == ev


def test_a_field_without_default_breaks_old_data_and_the_check_notices(tmp_path: Path) -> None:
    broken = _schema_dir_variant(
        tmp_path, lambda s: s["fields"].append({"name": "priority", "type": "int"})
    )
    current = envelope_schema()
    ev = AgentEvent.external("s1", InputEvent(input=1), event_id="e", timestamp=7)
    with pytest.raises(Exception, match="priority"):
        decode_record(encode_record(to_record(ev), current), current, broken)


def test_frozen_schemas_still_parse_on_their_own() -> None:
    for frozen in FROZEN:
        for path in frozen.glob("*.avsc"):
            json.loads(path.read_text())
        assert parse_schema(load_envelope_from(frozen))
