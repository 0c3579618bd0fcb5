"""The project's files one input touches on the worker's path, from the Kafka record to the
output record: one one-turn session of the scripted model (one model call) through the
real Orchestrator and local executor of ``eddies worker``, on the in-memory stand-ins of
``bench/worker_cpu.py``, traced with ``sys.setprofile``. docs/architecture.md walks the
same path file by file, and tests/unit/test_input_path.py keeps the two in step.

Run: ``.venv/bin/python bench/input_path.py`` (``-v``: the functions called in each file).
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Stand-ins for librdkafka, not the path: the in-memory broker and the bench's clients.
NOT_THE_PATH = ("bench/", "connectors/kafka/memory_broker.py",
                # The virtualenv sits in the repository: a library another test of the same
                # process left a hook of (hypothesis's, at garbage collection) is not the path.
                ".venv/")


def touched() -> dict[str, set[str]]:
    """{file relative to the repository: names of the functions called in it} for the
    second session of a fresh worker path (the first pays for imports and caches)."""
    spec = importlib.util.spec_from_file_location("worker_cpu", ROOT / "bench" / "worker_cpu.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    from eddies.connectors.runtime.client import input_event
    from eddies.events import encode

    path = bench.WorkerPath()
    # Sessions no earlier run in this process used: per-session caches (a session's
    # partition) would leave their files off the path.
    first = random.randrange(10**6, 10**9)
    prompts = {i: encode(input_event(f"s{i}", f"hello {i}")) for i in (first, first + 1)}
    path.sessions(first, 1, prompts)
    root = f"{ROOT}/"
    seen: dict[str, set[str]] = {}

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        name = frame.f_code.co_filename
        if event == "call" and name.startswith(root):
            rel = name[len(root):]
            if not rel.startswith(NOT_THE_PATH):
                seen.setdefault(rel, set()).add(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        path.sessions(first + 1, 1, prompts)
    finally:
        sys.setprofile(None)
    assert path.outputs == 2, "the traced session answered"
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="the functions called per file")
    args = parser.parse_args()
    files = touched()
    for name in sorted(files):
        print(f"{name}: {', '.join(sorted(files[name]))}" if args.verbose else name)
    print(f"{len(files)} files")


if __name__ == "__main__":
    main()
