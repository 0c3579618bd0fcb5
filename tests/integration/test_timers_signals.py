"""Durable timers and signals on the Kafka worker: a timer fires once across a SIGKILL
and a restart, at its due time; a signal sent by a plain confluent-kafka producer (or
``eddies signal``) answers a wait; a wait times out; replays call nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from eddies.connectors.inspect.replay import load_history, replay
from eddies.connectors.runtime.client import input_event, producer, read_events, send_event, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import AgentPlan
from eddies.events import (
    AgentEvent,
    CallKind,
    DurableCallRequest,
    DurableCallResult,
    OutputEvent,
    SignalEvent,
    encode,
    headers,
)
from tests.integration.agents import Waiter
from tests.integration.workers import ROOT, start_worker, stop_worker, wait_until

pytestmark = pytest.mark.integration
AGENT = "tests.integration.agents:Waiter"


def _events(settings: Settings) -> list[AgentEvent]:
    return list(read_events(settings, TopicNames(settings.app).events))


def _outputs(settings: Settings) -> dict[str, AgentEvent]:
    return {e.event_id: e for e in read_events(settings, TopicNames(settings.app).output)}


def test_a_timer_fires_once_across_a_sigkill_and_a_restart(settings: Settings, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    sessions = [f"t{i}" for i in range(6)]
    first = start_worker(settings, AGENT, log, EDDIES_INSTANCE_ID="slot-0")
    try:
        prod = producer(settings)
        for s in sessions:
            send_input(settings, s, {"sleep_s": 6}, prod=prod)
        prod.flush(30)
        wait_until("every timer issued", lambda: sum(
            isinstance(e.payload, DurableCallRequest) and e.payload.kind is CallKind.TIMER
            for e in _events(settings)) >= len(sessions), first, log, timeout=60)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    assert not _outputs(settings), "the timers fired before they were due"
    second = start_worker(settings, AGENT, log, EDDIES_INSTANCE_ID="slot-0")
    try:
        wait_until("every session answered", lambda: len(_outputs(settings)) >= len(sessions),
               second, log, timeout=90)
        time.sleep(1.0)  # anything repeated would arrive now
    finally:
        stop_worker(second)

    events = {e.event_id: e for e in _events(settings)}
    issued = {e.session_id: e for e in events.values()
              if isinstance(e.payload, DurableCallRequest) and e.payload.kind is CallKind.TIMER}
    fired = Counter(e.session_id for e in events.values()
                    if isinstance(e.payload, DurableCallResult) and e.payload.kind is CallKind.TIMER)
    assert fired == Counter(dict.fromkeys(sessions, 1))  # once each, across the kill
    outputs = list(_outputs(settings).values())
    assert sorted(o.session_id for o in outputs) == sessions
    for o in outputs:
        req = issued[o.session_id].payload
        assert isinstance(req, DurableCallRequest) and req.not_before is not None
        payload = o.payload
        assert isinstance(payload, OutputEvent) and payload.error is None
        # Due at the input's time + 6 s, and the session's clock moved there with it.
        assert payload.output["at"] >= req.not_before == issued[o.session_id].timestamp + 6_000
    _replays_call_nothing(settings, sessions)


def test_signals_from_a_plain_producer_and_the_cli_answer_waits(settings: Settings, tmp_path: Path) -> None:
    from confluent_kafka import Producer

    log = tmp_path / "worker.log"
    worker = start_worker(settings, AGENT, log, EDDIES_INSTANCE_ID="slot-0")
    try:
        prod = producer(settings)
        send_input(settings, "plain", {"signal": "approve", "timeout_s": 120}, prod=prod)
        send_input(settings, "cli", {"signal": "approve", "timeout_s": 120}, prod=prod)
        send_input(settings, "late", {"signal": "approve", "timeout_s": 1}, prod=prod)
        prod.flush(30)
        wait_until("both waits issued", lambda: {e.session_id for e in _events(settings)
                                             if isinstance(e.payload, DurableCallRequest)
                                             and e.payload.kind is CallKind.SIGNAL} >= {"plain", "cli"},
               worker, log, timeout=60)
        # What a user's service does: the Avro envelope, keyed by the session, with the
        # Java client's partitioner (murmur2), no Eddies code in the loop but the encoder.
        plain = Producer({"bootstrap.servers": settings.bootstrap_servers,
                          "partitioner": "murmur2_random"})
        ev = AgentEvent.external("plain", SignalEvent("approve", {"by": "ana"}), event_id="",
                                 timestamp=int(time.time() * 1000))
        plain.produce(TopicNames(settings.app).input, encode(ev), b"plain", headers=headers())
        assert plain.flush(30) == 0
        done = subprocess.run(
            [sys.executable, "-m", "eddies", "signal", "cli", "approve", '{"by": "cli"}', "--app",
             settings.app, "--bootstrap-servers", settings.bootstrap_servers],
            cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "signalled approve" in done.stdout
        wait_until("three answers", lambda: len(_outputs(settings)) >= 3, worker, log, timeout=60)
    finally:
        stop_worker(worker)
    answers = {o.session_id: o.payload.output for o in _outputs(settings).values()
               if isinstance(o.payload, OutputEvent)}
    assert answers == {"plain": {"by": "ana"}, "cli": {"by": "cli"}, "late": "timeout"}
    _replays_call_nothing(settings, ["plain", "cli", "late"])


def test_waits_of_a_session_on_an_old_clock_are_due_at_once(settings: Settings, tmp_path: Path) -> None:
    """Inputs stamped long ago (a backlog reprocessed on event time): their timers and
    deadlines are long past, and fire at once; they are not mistaken for requests older
    than the journal's retention (never performed again: UNKNOWN)."""
    log = tmp_path / "worker.log"
    worker = start_worker(settings, AGENT, log, EDDIES_INSTANCE_ID="slot-0")
    old = 1_600_000_000_000  # 2020
    try:
        prod = producer(settings)
        send_event(settings, input_event("slept", {"sleep_s": 3}, timestamp=old), "input", prod)
        send_event(settings, input_event("waited", {"signal": "go", "timeout_s": 2},
                                         timestamp=old), "input", prod)
        prod.flush(30)
        wait_until("two answers", lambda: len(_outputs(settings)) >= 2, worker, log, timeout=60)
    finally:
        stop_worker(worker)
    answers = {o.session_id: o.payload.output for o in _outputs(settings).values()
               if isinstance(o.payload, OutputEvent)}
    assert answers == {"slept": {"slept": 3, "at": old + 3_000}, "waited": "timeout"}


def _replays_call_nothing(settings: Settings, sessions: list[str]) -> None:
    plan = AgentPlan.compile(Waiter())
    for s in sessions:
        history = load_history(settings, s)
        report = replay(plan, history, s)
        assert report.ok and not report.extra, (s, [(m.recorded.type, m.recorded.seq)
                                                    for m in report.mismatches])
