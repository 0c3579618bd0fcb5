"""``eddies approve`` and ``eddies reject`` answer only an approval the session waits on,
as its history in APP.events shows: a mistyped id, another session's, or one answered
already is refused with exit code 2, naming why and listing the approvals that are pending
with the commands that answer them, and nothing is sent; ``--keep`` sends it anyway. Each
runs as the real command, in a subprocess, against a worker on the broker."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import pytest

from eddies.connectors.inspect.sessions import summarize, timed_history
from eddies.connectors.kafka.worker import Worker
from eddies.connectors.runtime.client import input_event, read_events, send_event
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import ApprovalRequestEvent, SignalEvent
from tests.agents import shop_agent
from tests.integration.workers import eddies_command

pytestmark = pytest.mark.integration


def _eddies(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    # No setting from this environment; the result key is a key, not a setting.
    return eddies_command(settings, *args, env={"LITELLM_LOCAL_MODEL_COST_MAP": "True",
                                                "LITELLM_OFFLINE_MODE": "true"},
                          drop=lambda k: k.startswith("EDDIES_") and k != "EDDIES_RESULT_KEY")


def _refused(proc: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stdout == "", proc.stderr
    for text in expected:
        assert text in proc.stderr, proc.stderr


def _until(what: str, done: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.2)


def test_only_a_pending_approval_is_answered(settings: Settings) -> None:
    names = TopicNames(settings.app)
    worker = Worker(settings, shop_agent(3_600_000)).start()
    try:
        assert worker.wait_assigned(60)
        send_event(settings, input_event("s1", "refund o-1"), "input")
        asks: list[ApprovalRequestEvent] = []

        def asked() -> bool:
            asks[:] = [e.payload for e in read_events(settings, names.output)
                       if isinstance(e.payload, ApprovalRequestEvent)]
            return bool(asks)

        _until("approval request", asked)
        [ask] = asks
        # The line eddies tail shows, its commands to copy.
        answer = f"eddies approve s1 {ask.signal} --app {settings.app}"
        wrong = ask.signal.rsplit(":", 2)[0] + ":i9:c9"  # this session's, no such call
        _refused(_eddies(settings, "approve", "s1", wrong),
                 f"no approval is pending with that id: {wrong} (session 's1' never asked for it)",
                 "approvals pending in session 's1':", "APPROVAL NEEDED by ",
                 f"refund({{\"order\": \"o-1\", \"amount\": 5}}); answer with: {answer}  |  "
                 f"eddies reject s1 {ask.signal} --app {settings.app} --reason TEXT", "--keep")
        _refused(_eddies(settings, "reject", "s2", ask.signal, "--reason", "no"),  # not its session
                 f"no approval is pending with that id: {ask.signal} (the id is of another "
                 "session, not of 's2')", "no approval is pending in session 's2'")
        _refused(_eddies(settings, "approve", "s2", "approval:s2:r1:i3:c0"),
                 "(session 's2' has no history in " + names.events + ")")

        approved = _eddies(settings, "approve", "s1", ask.signal)
        assert approved.returncode == 0, approved.stderr
        assert approved.stdout.strip() == f"approved {ask.signal} of s1"
        _until("answer", lambda: summarize("s1", timed_history(settings, "s1")).status == "answered")
        _refused(_eddies(settings, "reject", "s1", ask.signal),
                 f"no approval is pending with that id: {ask.signal} (it was answered already, or "
                 "its deadline passed)", "no approval is pending in session 's1'")

        # A signal may come before its wait: --keep sends it unchecked.
        kept = _eddies(settings, "reject", "s1", wrong, "--keep")
        assert kept.returncode == 0, kept.stderr
        assert kept.stdout.startswith(f"rejected {wrong} of s1 (unchecked")
    finally:
        worker.stop()
    sent = [e.payload.name for e in read_events(settings, names.input)
            if isinstance(e.payload, SignalEvent)]
    assert sent == [ask.signal, wrong]  # the refused commands sent nothing
