"""One session's failure is that session's, on the Kafka worker (issue 53): a
non-deterministic action fails its run and nothing else, with one worker, its restart
and three workers in a group; an error that escapes the engine for one session halts
that session alone, until ``eddies resume`` after a fixed worker."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from eddies.connectors.runtime.client import producer, read_events, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import AgentEvent, OutputEvent
from tests.integration.sessions import sessions_on_every_partition
from tests.integration.workers import ROOT, start_worker, stop_worker, wait_until

pytestmark = pytest.mark.integration

AGENT = "tests.integration.agents:unsteady_agent"


def _outputs(settings: Settings) -> dict[str, list[OutputEvent]]:
    """Each session's outputs, once each (a restart may write one again)."""
    seen: dict[str, AgentEvent] = {}
    for e in read_events(settings, TopicNames(settings.app).output):
        if isinstance(e.payload, OutputEvent):
            seen.setdefault(e.event_id, e)
    out: dict[str, list[OutputEvent]] = {}
    for e in seen.values():
        assert isinstance(e.payload, OutputEvent)
        out.setdefault(e.session_id, []).append(e.payload)
    return out


def _send(settings: Settings, inputs: list[tuple[str, str]]) -> None:
    prod = producer(settings)
    for sid, value in inputs:
        send_input(settings, sid, value, prod=prod)
    prod.flush(30)


def _answered(settings: Settings, counts: dict[str, int]) -> dict[str, list[OutputEvent]] | None:
    outs = _outputs(settings)
    return outs if all(len(outs.get(s, [])) >= n for s, n in counts.items()) else None


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eddies", *args, "--app", settings.app, "--bootstrap-servers",
         settings.bootstrap_servers], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_a_non_deterministic_session_fails_its_run_and_no_worker_stops(
        settings: Settings, tmp_path: Path) -> None:
    good = sessions_on_every_partition("ok", settings.partitions, 2)
    bad = sessions_on_every_partition("bad", settings.partitions, 1)
    logs = [tmp_path / f"w{i}.log" for i in range(4)]
    workers = [start_worker(settings, AGENT, logs[0])]
    try:
        _send(settings, [(s, "one") for s in [*bad[:1], *good]])
        outs = wait_until("every session's first answer", lambda: _answered(
            settings, {s: 1 for s in [*bad[:1], *good]}), workers[0], logs[0])
        for s in good:
            assert [o.output for o in outs[s]] == [[0, "one"]]
        [failed] = outs[bad[0]]
        assert failed.error is not None and failed.error.type == "JournalMismatchError"
        assert "other arguments" in failed.error.message
        # A worker killed and started again reads the same records: it stays up too.
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait(30)
        workers[0] = start_worker(settings, AGENT, logs[1])
        _send(settings, [(bad[0], "two"), *((s, "two") for s in good)])
        outs = wait_until("every session's second answer", lambda: _answered(
            settings, {s: 2 for s in [bad[0], *good]}), workers[0], logs[1])
        assert outs[bad[0]][1].error is not None
        assert outs[bad[0]][1].error.type == "JournalMismatchError"
        # Three workers in one group, bad sessions on every partition.
        workers += [start_worker(settings, AGENT, logs[i]) for i in (2, 3)]
        _send(settings, [*((s, "three") for s in bad), *((s, "three") for s in good)])
        wanted = {**{s: 1 for s in bad}, bad[0]: 3, **{s: 3 for s in good}}
        outs = wait_until("every session's third answer", lambda: _answered(settings, wanted),
                          workers[0], logs[1], timeout=120)
        for s in good:
            assert [o.output for o in outs[s]][-1] == [0, "three"]
        for s in bad:
            assert outs[s][-1].error is not None and outs[s][-1].error.type == "JournalMismatchError"
        for proc, log in zip(workers, logs[1:], strict=True):
            assert proc.poll() is None, log.read_text()[-3000:]
            assert "worker failed" not in log.read_text()
    finally:
        for proc in workers:
            if proc.poll() is None:
                stop_worker(proc)


def test_an_engine_defect_halts_its_session_alone_until_resumed(
        settings: Settings, tmp_path: Path) -> None:
    log, fixed_log = tmp_path / "broken.log", tmp_path / "fixed.log"
    worker = start_worker(settings, AGENT, log, TEST_ENGINE_DEFECT="halt")
    fixed: subprocess.Popen[bytes] | None = None
    try:
        _send(settings, [("halt1", "one"), ("ok1", "one"), ("ok2", "one")])
        outs = wait_until("the good answers and the halt", lambda: _answered(
            settings, {"halt1": 1, "ok1": 1, "ok2": 1}), worker, log)
        assert [o.output for o in outs["ok1"]] == [[0, "one"]]
        [notice] = outs["halt1"]
        assert notice.error is not None and notice.error.type == "SessionHaltedError"
        assert "KeyError" in notice.error.message and "an injected defect for halt1" in notice.error.message
        assert isinstance(notice.output, dict) and notice.output["fault"] is True
        lines = [x for x in log.read_text().splitlines() if "session 'halt1' halted" in x]
        assert lines and "ERROR" in lines[0] and "Traceback" in log.read_text()
        # Its later input waits; the others go on.
        _send(settings, [("halt1", "two"), ("ok1", "two")])
        wait_until("ok1's second answer", lambda: _answered(settings, {"ok1": 2}), worker, log)
        listed = _cli(settings, "sessions", "--status", "halted")
        assert listed.returncode == 0, listed.stderr
        assert "halt1" in listed.stdout and "KeyError" in listed.stdout and "ok1" not in listed.stdout
        stop_worker(worker)  # its state is saved, halted, with the records that wait
        assert worker.returncode == 0, log.read_text()[-3000:]
        fixed = start_worker(settings, AGENT, fixed_log)
        done = _cli(settings, "resume", "halt1")
        assert done.returncode == 0, done.stderr
        outs = wait_until("halt1's answers once resumed", lambda: _answered(
            settings, {"halt1": 3}), fixed, fixed_log)
        assert [o.output for o in outs["halt1"][1:]] == [[0, "one"], [0, "two"]]
    finally:
        for proc in (worker, fixed):
            if proc is not None and proc.poll() is None:
                stop_worker(proc)
