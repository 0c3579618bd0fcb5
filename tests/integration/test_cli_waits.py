"""A command never waits in silence: a refused connection fails it at once (after a
short grace for a broker that is starting), not after ``connect_timeout_ms``; a wait for
topics a worker may be creating is announced when it starts. Real commands in
subprocesses, and the check they share, against the broker of the test session."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from eddies.connectors.kafka.broker import EmbeddedBroker, free_port
from eddies.connectors.runtime.preflight import REFUSED_GRACE_S, BrokerUnreachableError, check_broker
from eddies.connectors.runtime.settings import load_settings
from tests.integration.test_cli_errors import ROOT, assert_short_error, eddies

pytestmark = pytest.mark.integration
DEFAULT_TIMEOUT_MS = "10000"  # connect_timeout_ms's default: what "at once" is set against


@pytest.mark.parametrize("args", [
    ["send", "alice", "hi"],
    ["tail"],
    ["trace", "--session", "alice"],
    ["sessions"],
    ["signal", "alice", "go", "1"],
    ["topics", "describe"],
], ids=" ".join)
def test_a_refused_connection_fails_a_command_at_once(args: list[str]) -> None:
    started = time.monotonic()
    eddies("--version")
    startup = time.monotonic() - started  # this machine's start of the command, now
    address = f"127.0.0.1:{free_port()}"  # nothing listens there: refused
    proc, took = eddies(*args, "-b", address, EDDIES_CONNECT_TIMEOUT_MS=DEFAULT_TIMEOUT_MS)
    assert_short_error(proc, f"cannot reach the Kafka broker at {address}: ", "Connection refused",
                       "(still refused after", "check the address")
    # The grace and a client, beyond the start: not the 10 s the timeout would take.
    assert took < max(3.0, startup + 2.0), f"failed after {took:.1f} s (start-up {startup:.1f} s)"
    assert "waiting for" not in proc.stderr  # it did not wait, so it says no such thing


def test_the_check_fails_on_a_refusal_after_the_grace_not_the_timeout() -> None:
    settings = load_settings(env={}, overrides={"bootstrap_servers": f"127.0.0.1:{free_port()}",
                                                "connect_timeout_ms": 10_000})
    start = time.monotonic()
    with pytest.raises(BrokerUnreachableError, match="Connection refused"):
        check_broker(settings)
    assert REFUSED_GRACE_S <= time.monotonic() - start < 3


def test_a_broker_that_starts_within_the_grace_is_found() -> None:
    # `eddies broker &` then a command at once: the broker may not listen yet.
    port = free_port()
    settings = load_settings(env={}, overrides={"bootstrap_servers": f"127.0.0.1:{port}",
                                                "connect_timeout_ms": 10_000})
    broker = EmbeddedBroker(port)
    starter = threading.Timer(0.1, broker.start)  # it listens ~20 ms after its start
    starter.start()
    try:
        assert check_broker(settings).topics is not None
    finally:
        starter.join()
        broker.stop()


def test_a_starting_worker_waits_for_a_refusing_broker_and_says_so() -> None:
    address = f"127.0.0.1:{free_port()}"
    proc, took = eddies("worker", "-b", address, EDDIES_CONNECT_TIMEOUT_MS="3000")
    assert took >= 3
    assert proc.stderr.startswith(f"waiting for the broker at {address} (connect_timeout_ms=3000)..."), \
        proc.stderr
    assert_short_error(proc, f"cannot reach the Kafka broker at {address} within 3 s",
                       "Connection refused")


def test_tail_of_an_app_without_topics_says_at_once_that_it_waits_for_them(bootstrap: str) -> None:
    app = f"t{uuid.uuid4().hex[:10]}"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("EDDIES_")},
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true",
           "EDDIES_CONNECT_TIMEOUT_MS": "5000"}
    proc = subprocess.Popen([sys.executable, "-m", "eddies", "tail", "--app", app, "-b", bootstrap],
                            cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        said = time.monotonic()
        assert first.rstrip("\n") == (f"waiting for topic {app}.output... (up to 5 s): is a "
                                      "worker starting?")
        rest = proc.stderr.read()
        ended = time.monotonic()
        assert proc.wait(30) == 2
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert ended - said > 3, "said at the end of the wait, not at its start"
    assert f"app {app} has no topics on {bootstrap}" in rest and "(waited 5 s" in rest, rest
