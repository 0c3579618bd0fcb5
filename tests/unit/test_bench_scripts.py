"""The broker-free benchmark drives real sessions end to end (else it would time nothing)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_worker_cpu_bench_runs_every_session_to_its_output() -> None:
    spec = importlib.util.spec_from_file_location("worker_cpu", BENCH / "worker_cpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    times, outputs = module.measure(sessions=60, rounds=2)
    assert outputs == 120
    assert len(times) == 2 and all(t > 0 for t in times)
