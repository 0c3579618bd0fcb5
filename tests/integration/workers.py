"""Worker processes for integration tests: ``eddies worker`` on the test's app, its output
in a log file, the model kept offline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames, ensure_topics

ROOT = Path(__file__).resolve().parents[2]


def start_worker(settings: Settings, agent: str, log: Path, *, option: str = "--agent",
                 args: tuple[str, ...] = (), **env: str) -> subprocess.Popen[bytes]:
    """The app's topics made, then a worker of ``agent`` (``module:attr``, or the file
    given to ``option``: ``--yaml``, ``--sql``) started with ``args`` and with ``env``
    added to this process's environment."""
    from confluent_kafka.admin import AdminClient

    ensure_topics(AdminClient(settings.client_config()), TopicNames(settings.app), settings.partitions)
    return subprocess.Popen(
        [sys.executable, "-m", "eddies", "worker", "--app", settings.app, "--bootstrap-servers",
         settings.bootstrap_servers, "--partitions", str(settings.partitions), option, agent, *args],
        cwd=ROOT, stdout=log.open("ab"), stderr=subprocess.STDOUT,
        env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true", **env))


def answers(settings: Settings) -> list[Any]:
    """The OutputEvents written to the app's APP.output so far."""
    from eddies.connectors.runtime.client import read_events
    from eddies.events import OutputEvent

    return [e for e in read_events(settings, TopicNames(settings.app).output)
            if isinstance(e.payload, OutputEvent)]


def stop_worker(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL if it has not left within 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def wait_until(what: str, check: Callable[[], Any], proc: subprocess.Popen[bytes], log: Path,
               timeout: float = 60) -> Any:
    """The first truthy value of ``check()`` within ``timeout`` s; fails naming ``what``,
    with the end of the worker's log, if the worker exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the worker exited with {proc.returncode}: {log.read_text()[-3000:]}"
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"waited {timeout} s for: {what}; worker log: {log.read_text()[-3000:]}")


def eddies_command(settings: Settings, *args: str, env: dict[str, str] | None = None,
                   drop: Callable[[str], bool] = lambda name: False) -> subprocess.CompletedProcess[str]:
    """``eddies ARGS --app APP -b BOOTSTRAP`` run from the project's root, with ``env``
    added to this process's environment and the variables ``drop`` names left out; what
    it printed."""
    kept = {k: v for k, v in os.environ.items() if not drop(k)}
    return subprocess.run([sys.executable, "-m", "eddies", *args, "--app", settings.app,
                           "-b", settings.bootstrap_servers], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=dict(kept, **(env or {})))
