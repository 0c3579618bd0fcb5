"""What may enter the session machine: the checks every ``APP.input`` record passes first.

Runner-independent (the Kafka worker uses it; a Flink job can too). A record is either
admitted (an event to apply), refused (a reason for the dead-letter topic), or misrouted
(a valid record on a partition its session does not hash to: forward it). Checks, in order:

- a key, a value, at most ``max_record_bytes``; decodable Avro; the key is the event's
  ``session_id``; ids of at most :data:`MAX_ID_CHARS` characters;
- a well-formed envelope: a known ``schema_version``, a ``type`` naming the payload's type,
  a timestamp every Avro reader decodes (:func:`eddies.events.envelope_problem`);
- a payload a producer may send: an InputEvent (with no sub-agent scope), or a
  DurableCallResult signed by an executor (:mod:`.signing`); nothing else; an input's
  identity (who asked) is kept only when its producer signed the record with the identity
  key (``identities``), and cleared otherwise: the input is then anonymous;
- this worker's agent, when the event names one;
- the partition the session id hashes to (murmur2, as Kafka's Java client does).

Example::

    admission = Admission(partitions=4, max_record_bytes=1 << 20, agent_name="calc",
                          signer=signer)
    verdict = admission.check(key, value, partition=0, offset=7, timestamp_ms=ts)
    if isinstance(verdict, Refused): ...      # dead-letter it with verdict.reason
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.signing import IDENTITY_HEADER, SIGNATURE_HEADER, ResultSigner
from eddies.events import (
    MAX_TIMESTAMP_MS,
    AgentEvent,
    DecodeError,
    DurableCallResult,
    InputEvent,
    SignalEvent,
    decode,
    envelope_problem,
    event_type_name,
    partition_for,
)

#: The longest session id or event id accepted (they are kept in snapshots and keys).
MAX_ID_CHARS = 256


@dataclass(frozen=True, slots=True)
class Refused:
    """The record cannot enter the machine; ``reason`` says why (for the DLQ header)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Misrouted:
    """A valid record on the wrong partition: it belongs on ``partition``. Forward its
    bytes unchanged, with :data:`FORWARDED_HEADER` naming where it arrived (its id, when
    it has none, derives from there) and its original timestamp."""

    event: AgentEvent
    partition: int


#: Header of a forwarded record: ``topic/partition/offset`` where it first arrived.
FORWARDED_HEADER = "eddies.forwarded.from"

Headers = Callable[[str], bytes | None]


def _no_headers(name: str) -> bytes | None:
    return None


def _origin(header: Headers) -> str | None:
    """``partition/offset`` of a forwarded record's first arrival, if well-formed."""
    raw = header(FORWARDED_HEADER)
    if not raw:
        return None
    parts = raw.decode(errors="replace").rsplit("/", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return f"{int(parts[1])}/{int(parts[2])}"
    return None


def arrival_id(payload: InputEvent | SignalEvent, header: Headers, partition: int, offset: int) -> str:
    """The id of an input or signal its producer sent without one: ``in/PARTITION/OFFSET``
    (``sig/...``) of the record, or of its first arrival if it was forwarded, so that it is
    the same across re-reads, forwarding and re-runs (eddies reprocess)."""
    prefix = "in" if isinstance(payload, InputEvent) else "sig"
    return f"{prefix}/{_origin(header) or f'{partition}/{offset}'}"


class Admission:
    """Checks records arriving on the input topic; see the module docstring."""

    def __init__(self, *, partitions: int, max_record_bytes: int, agent_name: str,
                 signer: ResultSigner, input_topic: str = "input",
                 identities: ResultSigner | None = None, counters: Counters | None = None) -> None:
        self.partitions = partitions
        self.max_record_bytes = max_record_bytes
        self.agent_name = agent_name
        self.signer = signer
        self.input_topic = input_topic
        #: Checks the signature of inputs' identities (None: none is vouched for).
        self.identities = identities
        #: Where ``identities_cleared`` is counted (identities claimed, not signed).
        self.counters = counters

    def check(self, key: bytes | None, value: bytes | None, *, partition: int, offset: int,
              timestamp_ms: int, header: Headers = _no_headers,
              decoded: AgentEvent | None = None) -> AgentEvent | Refused | Misrouted:
        """The admitted event, or why not, or where it belongs.

        An InputEvent without an id gets ``in/PARTITION/OFFSET`` of the record (of its
        first arrival, if it was forwarded): stable across re-reads and forwarding; without
        a timestamp it gets the record's. ``header(name)`` returns a record header (read
        only for results and forwarded inputs). ``decoded``: the event of ``value`` when
        ``value`` is exactly what this process's executor signed and sent (it is neither
        decoded nor verified again).
        """
        if key is None:
            return Refused("record has no key; the key must be the session id")
        if value is None:
            return Refused("record has no value")
        if len(value) > self.max_record_bytes:
            return Refused(f"record of {len(value)} bytes exceeds max_record_bytes="
                           f"{self.max_record_bytes}")
        ev = decoded
        if ev is None:
            try:
                ev = decode(value)
            except DecodeError as err:
                return Refused(f"undecodable: {err}")
        try:
            sid = key.decode()
        except UnicodeDecodeError:
            return Refused("the key is not UTF-8 text")
        if ev.session_id != sid:
            return Refused(f"key {sid[:MAX_ID_CHARS]!r} differs from the event's session_id "
                           f"{ev.session_id[:MAX_ID_CHARS]!r}")
        if len(sid) > MAX_ID_CHARS or len(ev.event_id) > MAX_ID_CHARS:
            return Refused(f"session_id or event_id longer than {MAX_ID_CHARS} characters")
        payload = ev.payload
        if isinstance(payload, InputEvent | SignalEvent):
            if ev.scope:
                return Refused(f"an {ev.type} from a producer has an empty scope (sub-agent "
                               "scopes are the engine's)")
            if not ev.event_id:
                ev.event_id = arrival_id(payload, header, partition, offset)
            if not ev.timestamp:
                ev.timestamp = min(max(timestamp_ms, 0), MAX_TIMESTAMP_MS)
            if type(payload) is InputEvent and payload.identity is not None:
                vouched = self.identities
                if vouched is None or not vouched.verify(value, header(IDENTITY_HEADER)):
                    payload.identity = None  # a claim anyone could make: anonymous
                    if self.counters is not None:
                        self.counters.inc("identities_cleared")
        elif isinstance(payload, DurableCallResult):
            # ``decoded``: bytes this process signed itself, read back unchanged.
            if decoded is None and not self.signer.verify(value, header(SIGNATURE_HEADER)):
                return Refused(f"a DurableCallResult without a valid executor signature "
                               f"({SIGNATURE_HEADER} header): only executors answer calls; "
                               "producers may send InputEvent and SignalEvent")
        else:
            return Refused(f"{event_type_name(payload)} is not accepted on {self.input_topic}; producers "
                           "may send InputEvent and SignalEvent (call results come from executors)")
        problem = envelope_problem(ev)
        if problem is not None:
            return Refused(problem)
        if ev.agent and ev.agent != self.agent_name:
            return Refused(f"unknown agent {ev.agent[:100]!r}; this worker runs "
                           f"{self.agent_name!r}")
        home = partition_for(sid, self.partitions)
        if home != partition:
            return Misrouted(ev, home)
        return ev
