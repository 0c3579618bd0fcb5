"""Ctrl-C of ``eddies worker`` while a slow call runs: the first says at once what the
stop waits for; a second stops the worker at once, and the journal decides the call
when the next worker resumes its session (as after a kill). Real processes, on the
broker of the test session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eddies.connectors.runtime.client import send_input
from eddies.connectors.runtime.settings import Settings
from tests.integration.workers import ROOT, answers, start_worker, stop_worker, wait_until

pytestmark = pytest.mark.integration
#: The slow call's first execution: far longer than any bound below, so that a stop
#: within them cannot be the call ending by itself.
CALL_S = 60


class Stderr(threading.Thread):
    """The lines a process writes to its stderr, each with the time it was read."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        super().__init__(daemon=True)
        self.proc = proc
        self.lines: list[tuple[float, str]] = []

    def run(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def first(self, text: str, timeout: float) -> float | None:
        """When the first line containing ``text`` was read, waiting up to ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            found = next((at for at, line in self.lines if text in line), None)
            if found is not None or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def test_a_second_ctrl_c_stops_at_once_and_the_next_worker_resumes(settings: Settings,
                                                                   tmp_path: Path) -> None:
    effects = tmp_path / "effects.log"
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true",
               TEST_EFFECTS=str(effects), TEST_EFFECT_DELAY=str(CALL_S))
    proc = subprocess.Popen(
        [sys.executable, "-m", "eddies", "worker", "--app", settings.app, "-b",
         settings.bootstrap_servers, "--partitions", str(settings.partitions),
         "--agent", "tests.integration.agents:dawdler"],
        cwd=ROOT, env=env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = Stderr(proc)
    err.start()
    try:
        assert err.first("worker for app", 90) is not None, err.text()
        send_input(settings, "alice", "alice")
        deadline = time.monotonic() + 60
        while not (effects.exists() and "dawdle alice" in effects.read_text()):
            assert time.monotonic() < deadline and proc.poll() is None, err.text()
            time.sleep(0.05)

        proc.send_signal(signal.SIGINT)
        asked = time.monotonic()
        said = err.first("stopping: finishing 1 call in flight (Ctrl-C again to stop now)", 10)
        assert said is not None, err.text()
        assert said - asked < 2, f"said after {said - asked:.1f} s"
        time.sleep(0.5)
        assert proc.poll() is None, err.text()  # still waiting for the call

        proc.send_signal(signal.SIGINT)
        asked = time.monotonic()
        code = proc.wait(30)
        took = time.monotonic() - asked
        assert took < 3, f"stopped {took:.1f} s after the second Ctrl-C"
        assert code == 130, err.text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    err.join(5)
    assert "stopped at once, as by a kill: the journal decides the 1 call in flight" in err.text()
    assert "Traceback" not in err.text(), err.text()

    # The next worker resumes the session: the call was idempotent, so it is redone
    # (quick the second time) and the session answers once.
    log = tmp_path / "next.log"
    nxt = start_worker(settings, "tests.integration.agents:dawdler", log,
                       TEST_EFFECTS=str(effects), TEST_EFFECT_DELAY=str(CALL_S))
    try:
        got = wait_until("the session's answer", lambda: answers(settings), nxt, log, timeout=90)
    finally:
        stop_worker(nxt)
    assert [(e.session_id, e.payload.output) for e in got] == [("alice", "done alice")]
    assert effects.read_text().count("dawdle alice ") == 2  # interrupted, then redone
