"""Settings of a Python process that runs sessions (a worker, a Flink task's interpreter).

Sessions allocate many short-lived objects and keep many long-lived ones (states,
continuations). With CPython's default thresholds the collector runs every 700
allocations and regularly walks everything kept: in a Flink task holding tens of
thousands of sessions that was most of its Python time.

A Kafka worker's threads take turns on one interpreter lock: the orchestrator's thread
applies a fetched batch, call threads, the executor's loop and the journal tail want the
lock meanwhile. By default a thread that wants it makes the holder give it up every 5 ms,
so a batch is cut into slices and the threads change places a few times per session, each
change costing the caches. Every thread here gives the lock up by itself whenever it
waits on the broker (a fetch, a flush, a queue), so a longer interval mostly lets a batch
finish in one piece. Example::

    tune_gc()              # once, after start-up
    tune_thread_switches() # a worker process only
"""

from __future__ import annotations

import gc
import sys

#: Seconds a thread may hold the interpreter lock while others wait for it (CPython's
#: default: 0.005). 0.05 s: measured on a 20,000-session backlog, alternating with the
#: default on one broker, +8% sessions/s and half the context switches, with no change in
#: idle latency (bench/RESULTS.md, Kafka runtime).
SWITCH_INTERVAL_S = 0.05


def tune_gc() -> None:
    """Keep start-up objects out of collections, and collect less often."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def tune_thread_switches() -> None:
    """Let a busy thread keep the interpreter lock for ``SWITCH_INTERVAL_S`` before
    another that waits for it takes it over (see the module's docstring)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
