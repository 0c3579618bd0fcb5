"""A worker process's interpreter settings: the collector, and how long a busy thread
keeps the interpreter lock."""

from __future__ import annotations

import subprocess
import sys


def test_a_worker_process_lets_a_busy_thread_keep_the_lock_for_50_ms() -> None:
    """The worker's start-up tuning, in a process of its own (as `eddies worker` runs it):
    the switch interval is 50 ms, not CPython's 5, and the collector runs less often."""
    code = (
        "import gc, sys\n"
        "from eddies.connectors.runtime.process_tuning import tune_gc, tune_thread_switches\n"
        "before = sys.getswitchinterval()\n"
        "tune_gc(); tune_thread_switches()\n"
        "print(before, sys.getswitchinterval(), gc.get_threshold()[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    # (CPython keeps the interval in microseconds: 0.05 reads back as 0.049999...)
    assert [round(float(out[0]), 6), round(float(out[1]), 6), int(out[2])] == [0.005, 0.05, 50_000]
