"""Starting ``eddies flink run`` for tests, in its own process group (the JVM that PyFlink
starts is a child of the Python process: a crash is SIGKILL to both)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from eddies.connectors.kafka.broker import free_port
from eddies.connectors.runtime.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def start_flink(settings: Settings, agent: str, log: Path, *, tmp: Path, checkpoints: Path,
                extra: list[str] | None = None, env: dict[str, str] | None = None,
                ) -> subprocess.Popen[bytes]:
    """``eddies flink run`` for ``settings.app`` on ``agent``, its output appended to ``log``,
    its temporary files under ``tmp``."""
    tmp.mkdir(parents=True, exist_ok=True)
    environ = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT),
                   LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true",
                   EDDIES_FLINK_REST_PORT=str(free_port()))
    environ.update(env or {})
    return subprocess.Popen(
        [sys.executable, "-m", "eddies", "flink", "run", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers, "--partitions", str(settings.partitions),
         "--agent", agent, "--checkpoint-dir", str(checkpoints), "--checkpoint-interval-ms", "1000",
         *(extra or [])],
        cwd=ROOT, env=environ, stdout=log.open("ab"), stderr=subprocess.STDOUT,
        start_new_session=True)


def wait_submitted(proc: subprocess.Popen[bytes], log: Path, timeout: float = 120, *,
                   runs: int = 1) -> str:
    """Wait until the ``runs``-th job written to ``log`` is submitted; its line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"eddies flink run exited with {proc.returncode}:\n"
                                 + log.read_text()[-4000:])
        lines = [line for line in log.read_text().splitlines() if " submitted (" in line]
        if len(lines) >= runs:
            return lines[runs - 1]
        time.sleep(0.2)
    raise AssertionError("the job was not submitted in time:\n" + log.read_text()[-4000:])


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the run and its JVM (a machine that died)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


def stop(proc: subprocess.Popen[bytes], timeout: float = 60) -> int:
    """SIGTERM, as an operator stops it; its exit code."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        kill(proc)
        raise
    finally:
        try:  # a JVM left behind would hold ports and CPU for the next tests
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def leftovers(tmp: Path) -> list[Any]:
    """Temporary directories of runs still there."""
    return sorted(p.name for p in tmp.glob("eddies-flink-*"))
