"""Settings of a Python process that runs sessions (a worker, a Flink task's interpreter).

Sessions allocate many short-lived objects and keep many long-lived ones (states,
continuations). With CPython's default thresholds the collector runs every 700
allocations and regularly walks everything kept: in a Flink task holding tens of
thousands of sessions that was most of its Python time. Example::

    tune_gc()   # once, after start-up
"""

from __future__ import annotations

import gc


def tune_gc() -> None:
    """Keep start-up objects out of collections, and collect less often."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
