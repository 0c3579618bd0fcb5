"""How Eddies events sit in Kafka records: keys, headers, journal entries, DLQ entries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eddies.events import headers, partition_for

DLQ_REASON_HEADER = "eddies.dlq.reason"
DLQ_SOURCE_HEADER = "eddies.dlq.source"  # topic/partition/offset
#: Set when the DLQ copy holds only the first bytes of the value: the original's size.
DLQ_TRUNCATED_HEADER = "eddies.dlq.truncated"
#: Original headers a dead letter keeps, in bytes (the rest are left on the source record).
DLQ_MAX_HEADER_BYTES = 16_384

Headers = list[tuple[str, bytes]]

#: On an APP.requests record whose value lists calls ([[call id, attempt], ...]) that no
#: run waits for any more (their run ended): executors stop holding their requests.
CANCEL_HEADER = "eddies.cancel"


#: The headers of every event record: the writer schema and its fingerprint.
HEADERS: Headers = headers()


def header(record_headers: Any, name: str) -> bytes | None:
    """The first value of header ``name`` in a confluent-kafka message's headers."""
    for key, value in record_headers or ():
        if key == name:
            return value if isinstance(value, bytes) else (value.encode() if value else None)
    return None


def snapshot_key(session_id: str, epoch: int = -1) -> bytes:
    """Journal key of a session's latest state as saved in ownership ``epoch``
    (``snap@EPOCH/SESSION``; without one, ``snap/SESSION``: tools, older workers). One key
    per epoch: on a compacted journal a worker that had lost the partition cannot replace
    the newer owner's snapshot with its own; the highest epoch's is the session's."""
    if epoch < 0:
        return f"snap/{session_id}".encode()
    return f"snap@{epoch}/{session_id}".encode()


def outcome_key(call_id: str, attempt: int) -> bytes:
    """Journal key of a call's outcome."""
    return f"out/{call_id}/{attempt}".encode()


def started_key(call_id: str, attempt: int) -> bytes:
    """Journal key marking that a call started: every non-idempotent one, and an idempotent
    one being made when its partition was revoked (handed over to the new owner)."""
    return f"start/{call_id}/{attempt}".encode()


def finished_run_keys(calls: Mapping[str, Any]) -> list[bytes]:
    """Journal keys of a finished run's calls (``RunState.calls``): every attempt's outcome
    and started mark, which both runners tombstone after ``journal_retention_ms``."""
    return [k for cid, rec in calls.items() for a in range(1, rec.attempt + 1)
            for k in (outcome_key(cid, a), started_key(cid, a))]


def journal_partition(session_id: str, partitions: int) -> int:
    """Journal records are keyed by kind, so they are placed explicitly: a session's
    journal records go to its partition, like all of its other records."""
    return partition_for(session_id, partitions)


def dlq_headers(reason: str, topic: str, partition: int, offset: int, original: Any) -> Headers:
    """Headers of a dead-letter record: reason, source position, then the original headers
    (up to :data:`DLQ_MAX_HEADER_BYTES`; the source position finds the rest)."""
    h: Headers = [
        (DLQ_REASON_HEADER, reason.encode()[:4000]),
        (DLQ_SOURCE_HEADER, f"{topic}/{partition}/{offset}".encode()),
    ]
    room = DLQ_MAX_HEADER_BYTES
    for key, value in original or ():
        value = value if isinstance(value, bytes) else b""
        room -= len(key) + len(value)
        if room < 0:
            break
        h.append((key, value))
    return h


def dlq_value(value: bytes | None, limit: int, headers: Headers) -> bytes | None:
    """The value a dead letter can carry: ``value``, or its first ``limit`` bytes (adding
    the original size in the ``eddies.dlq.truncated`` header) when it is larger, so a
    record too large to copy is still dead-lettered with its reason."""
    if value is None or len(value) <= limit:
        return value
    headers.append((DLQ_TRUNCATED_HEADER, str(len(value)).encode()))
    return value[:limit]
