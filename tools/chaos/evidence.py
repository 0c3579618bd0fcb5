"""What a round left behind, read into plain data for ``chaos.checks``: the topics (after every
worker stopped), the side-effect lines and the workers' exits and logs."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eddies.connectors.runtime.client import read_records
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import DecodeError, DurableCallRequest, DurableCallResult, OutputEvent, decode

from .agents import KEYED_BY_INPUT
from .fleet import Proc
from .provider import read_arrivals

#: Log lines worth a look even when every invariant held.
SUSPICIOUS = re.compile(
    r"Traceback|\bERROR\b|\bWARNING\b|\bCRITICAL\b|Exception|stopped with an error|failed")
#: What an executor logs when another worker's call is UNKNOWN after its wait.
WAITED_UNKNOWN = re.compile(r"call (\S+): no outcome from the worker that started it within the wait")

Run = tuple[str, int]  # (session, run)
Attempt = tuple[str, int]  # (call id, attempt)


@dataclass
class Answer:
    """One final OutputEvent of a run (by event id)."""

    output: Any
    error: str | None


@dataclass
class Call:
    """One attempt of a durable call, with everything recorded about it."""

    call_id: str
    attempt: int
    session: str
    run: int
    target: str
    idempotent: bool
    #: The effect lines' key of its executions: the call id, or for the durable function
    #: keyed by input, that input's key (its first argument).
    effect_key: str
    #: Result statuses on APP.events (as the sessions applied them), and as executors sent
    #: them on APP.input (one per answer: a call answered twice shows twice).
    applied: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    #: Its started marks on APP.journal, in order: (claimant "instance|incarnation", record time).
    marks: list[tuple[str, float]] = field(default_factory=list)
    #: Its journaled outcomes' statuses, and when each could first be read (else its
    #: record's timestamp).
    outcomes: list[str] = field(default_factory=list)
    outcome_times: list[float] = field(default_factory=list)
    #: What it calls (the request's CallKind: FUNCTION, TOOL, CHAT_MODEL, ...).
    kind: str = ""


@dataclass
class Effect:
    """One side-effect line: EXEC before the effect's work, DONE after it."""

    tag: str
    kind: str
    key: str
    pid: int
    t: float


@dataclass
class Evidence:
    inputs: dict[Run, dict[str, Any]]  # the input bodies the feeder sent
    answers: dict[Run, dict[str, Answer]]  # by event id
    output_records: Counter[Run]  # OutputEvent records per run, rewrites of one id included
    other_output_types: Counter[str]
    calls: dict[Attempt, Call]
    effects: list[Effect]
    processes: list[dict[str, Any]]  # Proc.info() of every process of the round
    crashes: list[dict[str, Any]]  # processes that exited on their own during the round
    missing_after_drain: list[Run]
    dlq_reasons: Counter[str]
    log_lines: dict[str, list[str]]  # suspicious lines by log file
    #: Per call id, how many times a worker logged answering it UNKNOWN after waiting for
    #: another worker's outcome (a request issued again is answered from the journal).
    waited_unknown: Counter[str] = field(default_factory=Counter)
    #: The slow provider's requests of a ``+slow`` round: (arrival time, session, run, the
    #: name of the process that asked: its log's stem).
    provider_requests: list[tuple[float, str, int, str]] = field(default_factory=list)


def read_effects(path: Path) -> list[Effect]:
    effects = []
    for line in path.read_text().splitlines():
        if line.strip():
            tag, kind, key, pid, t = line.split()
            effects.append(Effect(tag, kind, key, int(pid), float(t)))
    return effects


def gather(settings: Settings, inputs: dict[Run, dict[str, Any]], effects_file: Path,
           procs: list[Proc], crashes: list[dict[str, Any]],
           missing_after_drain: list[Run], provider_arrivals: Path | None = None,
           readable: dict[bytes, float] | None = None) -> Evidence:
    """Read the round's topics, effects and logs (every worker has stopped), and the slow
    provider's log of requests (``provider_arrivals``) in a ``+slow`` round. An outcome's
    time is when it could first be read (``readable``, by outcome key: see
    :class:`.traffic.JournalWatch`), else its record's timestamp."""
    names = TopicNames(settings.app)
    answers: dict[Run, dict[str, Answer]] = defaultdict(dict)
    records: Counter[Run] = Counter()
    other: Counter[str] = Counter()
    for m in read_records(settings, names.output, timeout=30):
        e = decode(m.value() or b"")
        if not isinstance(e.payload, OutputEvent):
            other[e.type] += 1
            continue
        error = e.payload.error
        answers[(e.session_id, e.run)][e.event_id] = Answer(
            e.payload.output, None if error is None else f"{error.type}: {error.message}"[:400])
        records[(e.session_id, e.run)] += 1

    calls: dict[Attempt, Call] = {}
    applied: dict[Attempt, list[str]] = defaultdict(list)
    seen_ids: set[str] = set()
    for m in read_records(settings, names.events, timeout=30):
        try:
            e = decode(m.value() or b"")
        except DecodeError:
            continue
        if e.event_id in seen_ids:  # an event rewritten after a crash is one event
            continue
        seen_ids.add(e.event_id)
        p = e.payload
        if isinstance(p, DurableCallRequest):
            key = p.call_id
            if p.kind.value == "FUNCTION" and KEYED_BY_INPUT in p.target:
                key = str(json.loads(p.args)["args"][0])
            calls.setdefault((p.call_id, p.attempt), Call(
                p.call_id, p.attempt, e.session_id, e.run, p.target, p.idempotent, key,
                kind=p.kind.value))
        elif isinstance(p, DurableCallResult):
            applied[(p.call_id, p.attempt)].append(p.status.value)
    for ref, statuses in applied.items():
        if ref in calls:
            calls[ref].applied = statuses
    for m in read_records(settings, names.input, timeout=30):
        try:
            e = decode(m.value() or b"")
        except DecodeError:
            continue
        p = e.payload
        if isinstance(p, DurableCallResult) and (p.call_id, p.attempt) in calls:
            calls[(p.call_id, p.attempt)].sent.append(p.status.value)
    for m in read_records(settings, names.journal, timeout=30):
        kind, _, rest = (m.key() or b"").decode(errors="replace").partition("/")
        value = m.value()
        if kind not in ("start", "out") or value is None:
            continue
        cid, _, att = rest.rpartition("/")
        call = calls.get((cid, int(att)))
        if call is None:
            continue
        if kind == "start":
            call.marks.append((value.decode(errors="replace"), m.timestamp()[1] / 1000))
        else:
            call.outcome_times.append((readable or {}).get(m.key() or b"", m.timestamp()[1] / 1000))
            try:
                result = decode(value).payload
                call.outcomes.append(result.status.value if isinstance(result, DurableCallResult)
                                     else "not a result")
            except DecodeError:
                call.outcomes.append("undecodable")

    dlq: Counter[str] = Counter()
    for m in read_records(settings, names.dlq, timeout=30):
        reason = dict(m.headers() or []).get("eddies.dlq.reason") or b"?"
        dlq[reason.decode(errors="replace")[:120]] += 1
    lines = {}
    waited: Counter[str] = Counter()
    for proc in procs:
        text = proc.log.read_text(errors="replace") if proc.log.exists() else ""
        hits = [ln for ln in text.splitlines() if SUSPICIOUS.search(ln)]
        if hits:
            lines[proc.log.name] = hits[:60]
        waited.update(WAITED_UNKNOWN.findall(text))
    return Evidence(inputs=inputs, answers=dict(answers), output_records=records,
                    other_output_types=other, calls=calls, effects=read_effects(effects_file),
                    processes=[p.info() for p in procs], crashes=crashes,
                    missing_after_drain=missing_after_drain, dlq_reasons=dlq, log_lines=lines,
                    waited_unknown=waited,
                    provider_requests=[] if provider_arrivals is None
                    else read_arrivals(provider_arrivals))


def write_trail(settings: Settings, sessions: set[str], path: Path) -> None:
    """Every record of ``sessions`` on APP.input, APP.events and APP.journal (with their
    partitions' epoch markers) and the orchestrators' committed offsets, in offset order,
    to ``path``: what a stuck session's story is read from once the broker is gone."""
    from confluent_kafka import Consumer, TopicPartition

    from eddies.connectors.journal.epochs import stamp_of
    from eddies.events import partition_for

    names = TopicNames(settings.app)
    parts = {partition_for(s, settings.partitions) for s in sessions}
    keys = {s.encode() for s in sessions}
    markers = {f"own/orchestrator/{p}".encode() for p in parts}
    lines: list[str] = []
    for topic in (names.input, names.events, names.journal):
        lines.append(f"== {topic}")
        for m in read_records(settings, topic, partitions=sorted(parts), timeout=30):
            key = m.key() or b""
            ours = key in keys or key in markers or (
                key.startswith(b"snap") and key.partition(b"/")[2] in keys) or any(
                key.startswith(f"{k}/{s}".encode()) for s in sessions for k in ("out", "start"))
            if not ours:
                continue
            what = ""
            value = m.value()
            if topic == names.journal and key.startswith(b"snap") and value:
                what = f"stamp {stamp_of(value)}"
            elif value and not key.startswith((b"own/", b"start/")):
                try:
                    e = decode(value)
                    what = f"{e.type} seq={e.seq} run={e.run} id={e.event_id} {str(e.payload)[:160]}"
                except DecodeError:
                    what = "undecodable"
            elif value:
                what = value.decode(errors="replace")
            lines.append(f"{m.partition()}/{m.offset()} t={m.timestamp()[1]} {key.decode(errors='replace')} "
                         f"{'TOMBSTONE' if value is None else what} {dict(m.headers() or [])}")
    c = Consumer(settings.client_config(**{"group.id": f"{settings.app}.orchestrator"}))
    try:
        committed = c.committed([TopicPartition(names.input, p) for p in sorted(parts)], timeout=10)
        lines.append(f"== committed {[(tp.partition, tp.offset) for tp in committed]}")
    finally:
        c.close()
    path.write_text("\n".join(lines) + "\n")
