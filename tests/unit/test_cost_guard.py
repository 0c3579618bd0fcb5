"""CI's speed guard: the hot paths' instructions against bench/baseline.json (bench/guard.py).

Counting runs under callgrind (about half a minute for all workloads); where valgrind is
missing the tests skip, saying so.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
GUARD = BENCH / "guard.py"

pytestmark = pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("callgrind_control") is None,
    reason="valgrind is not installed (apt-get install valgrind): nothing to count with")


def _guard(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GUARD), *args], capture_output=True, text=True,
                          timeout=600)


def test_hot_paths_cost_no_more_than_the_committed_baseline() -> None:
    """A change that costs more updates bench/baseline.json with a reason in RESULTS.md."""
    proc = _guard()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    baseline = json.loads((BENCH / "baseline.json").read_text())
    for name in baseline["instructions"]:  # every baselined workload was counted
        assert f"ok   {name}" in proc.stdout, proc.stdout


def test_guard_fails_on_a_deliberately_slower_worker_hot_path(tmp_path: Path) -> None:
    # About 60 loop turns more per consumed record (~23k instructions a session, +3%): over
    # the tolerance, and less than any real feature has cost.
    slower = tmp_path / "slower.py"
    slower.write_text(
        "from eddies.connectors.kafka.orchestrator import Orchestrator\n"
        "process = Orchestrator.process\n"
        "def slower(self, msgs):\n"
        "    for _ in range(len(msgs) * 60):\n"
        "        pass\n"
        "    return process(self, msgs)\n"
        "Orchestrator.process = slower\n")
    proc = _guard("--workloads", "worker", "--patch", str(slower))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # 2: it could not count
    assert "FAIL worker" in proc.stdout, proc.stdout
    assert "over the tolerance: worker; counting it again" in proc.stdout  # over both times


def test_comparison_flags_only_what_is_over_the_tolerance() -> None:
    spec = importlib.util.spec_from_file_location("guard", GUARD)
    assert spec is not None and spec.loader is not None
    guard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard)
    baseline = {"tolerance": 0.01, "instructions": {"worker": 1000, "react-1-tool": 1000}}
    lines = guard.compare({"worker": 1011, "react-1-tool": 1009}, baseline)
    assert lines[0].startswith("FAIL worker") and lines[1].startswith("ok   react-1-tool")
    cheaper = guard.compare({"worker": 980}, baseline)
    assert cheaper[0].startswith("ok") and "--update" in cheaper[1]
    assert guard.compare({"input->output": 5}, baseline)[0].startswith("FAIL input->output")
