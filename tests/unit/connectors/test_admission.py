"""What may enter the session machine from the input topic, and signed call results."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from typing import Any

import pytest

from eddies.connectors.runtime.admission import (
    FORWARDED_HEADER,
    MAX_ID_CHARS,
    Admission,
    Misrouted,
    Refused,
)
from eddies.connectors.runtime.client import input_event
from eddies.connectors.runtime.signing import DEV_KEY, SIGNATURE_HEADER, ResultKeyError, ResultSigner
from eddies.events import (
    MAX_TIMESTAMP_MS,
    AgentEvent,
    CallKind,
    CallStatus,
    CustomEvent,
    DurableCallResult,
    InputEvent,
    OutputEvent,
    SignalEvent,
    encode,
    partition_for,
)

PARTITIONS = 4
KEY = b"k" * 32
SIGNER = ResultSigner([KEY])
SID = "s1"
HOME = partition_for(SID, PARTITIONS)
ELSEWHERE = (HOME + 1) % PARTITIONS


def admission(max_record_bytes: int = 1 << 20) -> Admission:
    return Admission(partitions=PARTITIONS, max_record_bytes=max_record_bytes, agent_name="calc",
                     signer=SIGNER)


def check(value: bytes | None, key: bytes | None = SID.encode(), *, partition: int = HOME,
          offset: int = 7, timestamp_ms: int = 1_000, signature: bytes | None = None,
          forwarded: bytes | None = None, gate: Admission | None = None) -> Any:
    headers = {SIGNATURE_HEADER: signature, FORWARDED_HEADER: forwarded}
    return (gate or admission()).check(key, value, partition=partition, offset=offset,
                                       timestamp_ms=timestamp_ms, header=headers.get)


def prompt(sid: str = SID, event_id: str = "in-1", timestamp: int = 500, **changes: Any) -> bytes:
    ev = input_event(sid, "hi", event_id, timestamp)
    return encode(dataclasses.replace(ev, **changes) if changes else ev)


def result(sid: str = SID, **changes: Any) -> bytes:
    ev = AgentEvent.external(sid, DurableCallResult(f"{sid}:r1:i1:c0", CallKind.FUNCTION,
                                                    CallStatus.OK, "42"),
                             event_id="res-1", timestamp=500)
    return encode(dataclasses.replace(ev, **changes) if changes else ev)


def refused(verdict: Any, reason: str) -> None:
    assert isinstance(verdict, Refused), verdict
    assert reason in verdict.reason, verdict.reason


# --- admitted inputs -----------------------------------------------------------------------

def test_an_input_is_admitted_as_sent() -> None:
    ev = check(prompt())
    assert isinstance(ev, AgentEvent)
    assert (ev.session_id, ev.event_id, ev.timestamp, ev.payload) == (SID, "in-1", 500, InputEvent("hi"))


def test_an_input_without_id_or_timestamp_gets_its_position_and_the_records_time() -> None:
    ev = check(prompt(event_id="", timestamp=0), partition=HOME, offset=41, timestamp_ms=1_234)
    assert isinstance(ev, AgentEvent)
    assert (ev.event_id, ev.timestamp) == (f"in/{HOME}/41", 1_234)


@pytest.mark.parametrize(("record_ts", "expected"), [
    (-1, 0),  # a record without a timestamp
    (-5_000, 0),
    (MAX_TIMESTAMP_MS + 1, MAX_TIMESTAMP_MS),
    (2**62, MAX_TIMESTAMP_MS),
])
def test_a_defaulted_timestamp_is_clamped_to_what_readers_decode(record_ts: int, expected: int) -> None:
    ev = check(prompt(timestamp=0), timestamp_ms=record_ts)
    assert isinstance(ev, AgentEvent) and ev.timestamp == expected


def test_headers_are_read_only_for_results_and_inputs_without_an_id() -> None:
    def no_reading(name: str) -> bytes | None:
        raise AssertionError(f"header {name} of an input with an id was read")

    ev = admission().check(SID.encode(), prompt(), partition=HOME, offset=0, timestamp_ms=0,
                           header=no_reading)
    assert isinstance(ev, AgentEvent)


# --- refused records -----------------------------------------------------------------------

def test_a_record_needs_a_key_and_a_value() -> None:
    refused(check(prompt(), key=None), "no key")
    refused(check(None), "no value")


def test_a_record_over_max_record_bytes_is_refused_and_one_at_it_admitted() -> None:
    value = prompt()
    assert isinstance(check(value, gate=admission(max_record_bytes=len(value))), AgentEvent)
    refused(check(value, gate=admission(max_record_bytes=len(value) - 1)),
            f"record of {len(value)} bytes exceeds max_record_bytes={len(value) - 1}")


def test_garbage_and_a_non_utf8_key_are_refused() -> None:
    refused(check(b"\xff\xfe\x00garbage"), "undecodable")
    refused(check(b""), "undecodable")
    refused(check(prompt(), key=b"\xff\xfe"), "not UTF-8")


def test_the_key_must_be_the_session_id() -> None:
    refused(check(prompt(sid="s1"), key=b"s2"), "differs from the event's session_id")


def test_ids_longer_than_256_characters_are_refused() -> None:
    long, limit = "s" * (MAX_ID_CHARS + 1), "s" * MAX_ID_CHARS
    refused(check(prompt(sid=long), key=long.encode(), partition=partition_for(long, PARTITIONS)),
            "longer than 256 characters")
    refused(check(prompt(event_id="e" * (MAX_ID_CHARS + 1))), "longer than 256 characters")
    ev = check(prompt(sid=limit), key=limit.encode(), partition=partition_for(limit, PARTITIONS))
    assert isinstance(ev, AgentEvent) and ev.session_id == limit
    ev = check(prompt(event_id="e" * MAX_ID_CHARS))
    assert isinstance(ev, AgentEvent) and ev.event_id == "e" * MAX_ID_CHARS


def test_an_unknown_schema_version_is_refused() -> None:
    refused(check(prompt(schema_version=2)), "schema_version 2")


@pytest.mark.parametrize("type_name", ["ChatResponseEvent", "Bogus", "", "DurableCallResult"])
def test_a_type_that_does_not_name_the_payload_is_refused(type_name: str) -> None:
    refused(check(prompt(type=type_name)), "does not name the payload's type 'InputEvent'")


def test_timestamps_outside_what_readers_decode_are_refused() -> None:
    refused(check(prompt(timestamp=-1)), "timestamp -1 is outside")
    refused(check(prompt(timestamp=MAX_TIMESTAMP_MS + 1)), f"timestamp {MAX_TIMESTAMP_MS + 1} is outside")
    ev = check(prompt(timestamp=MAX_TIMESTAMP_MS))
    assert isinstance(ev, AgentEvent) and ev.timestamp == MAX_TIMESTAMP_MS


def test_a_result_keeps_its_timestamp_and_is_refused_outside_the_range() -> None:
    value = result(timestamp=0)
    ev = check(value, signature=SIGNER.sign(value), timestamp_ms=9_999)
    assert isinstance(ev, AgentEvent) and ev.timestamp == 0  # only inputs get the record's
    value = result(timestamp=-1)
    refused(check(value, signature=SIGNER.sign(value)), "timestamp -1 is outside")


def test_an_input_from_a_producer_has_no_scope() -> None:
    refused(check(prompt(scope=("critic",))), "empty scope")


@pytest.mark.parametrize("payload", [OutputEvent("forged"), CustomEvent("AdmissionTestEvent", {"score": 3})])
def test_only_inputs_and_results_may_come_from_producers(payload: Any) -> None:
    value = encode(AgentEvent.external(SID, payload, event_id="x", timestamp=1))
    verdict = check(value, signature=SIGNER.sign(value))  # a signature does not help
    refused(verdict, "producers may send InputEvent")
    assert verdict.reason.startswith(("OutputEvent", "AdmissionTestEvent"))


def test_a_signal_from_any_producer_is_admitted_without_a_signature() -> None:
    ev = check(encode(AgentEvent.external(SID, SignalEvent("approval:c1", True), event_id="",
                                          timestamp=0)), offset=9, timestamp_ms=1_234)
    assert isinstance(ev, AgentEvent) and isinstance(ev.payload, SignalEvent)
    assert ev.event_id == f"sig/{HOME}/9" and ev.timestamp == 1_234  # from the record
    scoped = AgentEvent.external(SID, SignalEvent("go"), event_id="g", timestamp=1, scope=("critic",))
    refused(check(encode(scoped)), "empty scope")


def test_an_event_for_another_agent_is_refused() -> None:
    refused(check(prompt(agent="billing")), "unknown agent 'billing'")
    ev = check(prompt(agent="calc"))
    assert isinstance(ev, AgentEvent) and ev.agent == "calc"


# --- signed results ------------------------------------------------------------------------

def test_a_result_needs_the_signature_of_an_executor() -> None:
    value = result()
    for signature in (None, b"", ResultSigner([b"o" * 32]).sign(value), ResultSigner([DEV_KEY]).sign(value),
                      SIGNER.sign(value + b"x"), SIGNER.sign(value).upper()):
        refused(check(value, signature=signature), f"without a valid executor signature "
                                                   f"({SIGNATURE_HEADER} header)")
    ev = check(value, signature=SIGNER.sign(value))
    assert isinstance(ev, AgentEvent) and isinstance(ev.payload, DurableCallResult)
    assert ev.payload.value == "42"


def test_a_signature_is_the_hex_hmac_sha256_of_the_value() -> None:
    value = result()
    assert SIGNER.sign(value) == hmac.new(KEY, value, hashlib.sha256).hexdigest().encode()
    assert SIGNATURE_HEADER == "eddies.signature"


def test_keys_rotate_the_first_signs_and_any_verifies() -> None:
    old, new = b"o" * 32, b"n" * 32
    value = result()
    rotated = ResultSigner([new, old])
    assert rotated.verify(value, ResultSigner([old]).sign(value))
    assert rotated.sign(value) == ResultSigner([new]).sign(value) != ResultSigner([old]).sign(value)
    assert not ResultSigner([old]).verify(value, rotated.sign(value))
    gate = Admission(partitions=PARTITIONS, max_record_bytes=1 << 20, agent_name="calc",
                     signer=rotated)
    assert isinstance(check(value, signature=ResultSigner([old]).sign(value), gate=gate), AgentEvent)


def test_a_signer_needs_a_key() -> None:
    with pytest.raises(ValueError, match="at least one key"):
        ResultSigner([])


# --- misrouted records ---------------------------------------------------------------------
# A misrouted record is forwarded as it is (its bytes, so a result's signature still holds),
# with FORWARDED_HEADER naming where it first arrived and its original record timestamp.

def forwarded_from(partition: int, offset: int) -> bytes:
    return f"app.input/{partition}/{offset}".encode()


def test_a_misrouted_input_goes_to_its_sessions_partition() -> None:
    verdict = check(prompt(), partition=ELSEWHERE)
    assert isinstance(verdict, Misrouted)
    assert verdict.partition == HOME
    assert verdict.event.event_id == "in-1"


def test_a_forwarded_input_keeps_the_id_of_where_it_first_arrived() -> None:
    value = prompt(event_id="", timestamp=0)
    verdict = check(value, partition=ELSEWHERE, offset=12, timestamp_ms=777)
    assert isinstance(verdict, Misrouted) and verdict.partition == HOME
    # Read at home, at another offset, with the original record time: the id of its arrival.
    ev = check(value, partition=HOME, offset=3, timestamp_ms=777,
               forwarded=forwarded_from(ELSEWHERE, 12))
    assert isinstance(ev, AgentEvent)
    assert (ev.event_id, ev.timestamp) == (f"in/{ELSEWHERE}/12", 777)


@pytest.mark.parametrize("bad", [b"", b"nonsense", b"t/x/1", b"t/1/-3"])
def test_a_malformed_forwarding_header_is_ignored(bad: bytes) -> None:
    ev = check(prompt(event_id="", timestamp=0), partition=HOME, offset=3, forwarded=bad)
    assert isinstance(ev, AgentEvent) and ev.event_id == f"in/{HOME}/3"


def test_a_misrouted_input_at_max_record_bytes_is_admitted_after_forwarding() -> None:
    # On its own partition this record is admitted; forwarded (the same bytes), it is too.
    value = prompt(event_id="", timestamp=0)
    gate = admission(max_record_bytes=len(value))
    assert isinstance(check(value, gate=gate, partition=HOME, offset=123_456), AgentEvent)
    verdict = check(value, gate=gate, partition=ELSEWHERE, offset=123_456, timestamp_ms=1_700_000_000_000)
    assert isinstance(verdict, Misrouted)
    ev = check(value, gate=gate, partition=HOME, offset=9,
               forwarded=forwarded_from(ELSEWHERE, 123_456))
    assert isinstance(ev, AgentEvent), ev
    assert ev.event_id == f"in/{ELSEWHERE}/123456"


def test_a_misrouted_result_is_admitted_at_home_with_its_signature() -> None:
    value = result()
    signature = SIGNER.sign(value)
    verdict = check(value, partition=ELSEWHERE, signature=signature)
    assert isinstance(verdict, Misrouted) and verdict.partition == HOME
    assert isinstance(check(value, partition=HOME, signature=signature,
                            forwarded=forwarded_from(ELSEWHERE, 1)), AgentEvent)


def test_a_refused_record_is_not_forwarded() -> None:
    refused(check(prompt(agent="billing"), partition=ELSEWHERE), "unknown agent")
    refused(check(result(), partition=ELSEWHERE), "without a valid executor signature")


# --- keys from the environment -------------------------------------------------------------

def test_a_missing_key_is_an_error_naming_the_variable() -> None:
    with pytest.raises(ResultKeyError, match="environment variable EDDIES_TEST_KEY is not set"):
        ResultSigner.from_env("EDDIES_TEST_KEY", allow_dev_key=False, environ={})
    with pytest.raises(ResultKeyError, match="EDDIES_TEST_KEY is not set"):
        ResultSigner.from_env("EDDIES_TEST_KEY", allow_dev_key=False,
                              environ={"EDDIES_TEST_KEY": " , "})


def test_the_development_key_only_when_allowed_and_no_key_is_set() -> None:
    dev = ResultSigner.from_env("EDDIES_TEST_KEY", allow_dev_key=True, environ={})
    assert dev.dev
    assert dev.sign(b"v") == ResultSigner([DEV_KEY]).sign(b"v")
    real = ResultSigner.from_env("EDDIES_TEST_KEY", allow_dev_key=True,
                                 environ={"EDDIES_TEST_KEY": "a" * 32})
    assert not real.dev
    assert real.sign(b"v") == ResultSigner([b"a" * 32]).sign(b"v")


def test_a_short_key_is_an_error() -> None:
    with pytest.raises(ResultKeyError, match="a key in EDDIES_TEST_KEY has 31 characters; use at least 32"):
        ResultSigner.from_env("EDDIES_TEST_KEY", allow_dev_key=True,
                              environ={"EDDIES_TEST_KEY": "a" * 31})
    with pytest.raises(ResultKeyError, match="has 5 characters"):
        ResultSigner.from_env("EDDIES_TEST_KEY", allow_dev_key=False,
                              environ={"EDDIES_TEST_KEY": f"{'a' * 32},short"})


def test_comma_separated_keys_rotate() -> None:
    new, old = "n" * 40, "o" * 32
    signer = ResultSigner.from_env("EDDIES_TEST_KEY", allow_dev_key=False,
                                   environ={"EDDIES_TEST_KEY": f" {new} , {old},"})
    assert not signer.dev
    assert signer.sign(b"v") == ResultSigner([new.encode()]).sign(b"v")
    assert signer.verify(b"v", ResultSigner([old.encode()]).sign(b"v"))
    assert not signer.verify(b"v", ResultSigner([b"x" * 32]).sign(b"v"))


# --- who asked -------------------------------------------------------------------------------

def test_an_identity_counts_only_when_the_identity_key_signed_the_record() -> None:
    from eddies.connectors.runtime.counters import Counters
    from eddies.connectors.runtime.signing import IDENTITY_HEADER, identity_signer
    from eddies.events import Identity

    vouching = identity_signer("ID_KEY", allow_dev_key=False, environ={"ID_KEY": "i" * 32})
    assert vouching is not None
    counters = Counters()
    gate = Admission(partitions=PARTITIONS, max_record_bytes=1 << 20, agent_name="calc", signer=SIGNER,
                     identities=vouching, counters=counters)
    ann = encode(input_event(SID, "hi", "in-1", 500, identity=Identity("ann", "acme")))
    other = encode(input_event(SID, "hi", "in-2", 500, identity=Identity("ann", "other")))

    def who(value: bytes, signature: bytes | None, via: Admission = gate) -> Identity | None:
        ev = via.check(SID.encode(), value, partition=HOME, offset=0, timestamp_ms=0,
                       header={IDENTITY_HEADER: signature}.get)
        assert isinstance(ev, AgentEvent) and isinstance(ev.payload, InputEvent)
        return ev.payload.identity

    assert who(ann, vouching.sign(ann)) == Identity("ann", "acme")
    assert who(ann, None) is None  # a claim without a signature: anonymous, admitted
    assert who(other, vouching.sign(ann)) is None  # another record's signature
    assert who(ann, SIGNER.sign(ann)) is None  # the result key's is not the identity key's
    assert who(ann, vouching.sign(ann), admission()) is None  # a worker holding no identity key
    assert counters.get("identities_cleared") == 3
    # Without a key, the embedded broker's public development key; elsewhere none.
    assert identity_signer("ID_KEY", allow_dev_key=False, environ={}) is None
    dev = identity_signer("ID_KEY", allow_dev_key=True, environ={})
    assert dev is not None and dev.dev
    with pytest.raises(ResultKeyError, match="identity_key_env: a key in ID_KEY has 5 characters"):
        identity_signer("ID_KEY", allow_dev_key=True, environ={"ID_KEY": "short"})


def test_a_producer_with_a_weak_identity_key_is_stopped_naming_the_setting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from eddies.connectors.runtime.preflight import producer_identity_signer
    from eddies.connectors.runtime.settings import ConfigError, load_settings

    monkeypatch.setenv("MY_ID_KEY", "too-short")
    settings = load_settings(env={}, overrides={"identity_key_env": "MY_ID_KEY"})
    with pytest.raises(ConfigError, match="identity_key_env: a key in MY_ID_KEY has 9 characters"):
        producer_identity_signer(settings)
