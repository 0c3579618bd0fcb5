"""docs/architecture.md walks one input through the code, file by file: the walk names
every file the input really touches (traced by bench/input_path.py), and the path does
not grow unnoticed."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Files one one-turn input touches today; a change that adds one updates this number and
#: the walk in docs/architecture.md in the same commit (and says why). 44: whether a call
#: catches up with a partition's journal after a gain (kafka/catching_up.py, one concept
#: the loop's and the threads' calls share, out of call_running.py). 43: the executor's
#: making of calls (threads, the call loop, provider gates) left executor.py, 642 lines,
#: for kafka/call_running.py. 42: each record is
#: noted for the session's last trusted state (runtime/isolation.py: one session's error
#: halts that session alone, on that state). 43: events/codec.py
#: (617 lines) split into the bytes (codec.py) and the payloads' fields (records.py); 42:
#: the orchestrator keeps each partition's next offset itself (positions.py: gaps only);
#: 41: the chat action takes its sensory memory only when a request goes round (memory.py).
MOST_FILES = 44


def _traced() -> set[str]:
    spec = importlib.util.spec_from_file_location("input_path", ROOT / "bench" / "input_path.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return set(module.touched())


def _walk() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    return text.split("## One input, file by file", 1)[1].split("\n## ", 1)[0]


def test_the_walk_names_every_file_one_input_touches() -> None:
    traced = _traced()
    named = set(re.findall(r"`((?:connectors|engine|events|eddies)/[\w/]+\.py)`", _walk()))
    assert traced - named == set(), f"files on the path the walk does not name: {sorted(traced - named)}"
    assert named - traced == set(), f"files the walk names off the path: {sorted(named - traced)}"
    assert len(traced) <= MOST_FILES, f"one input now touches {len(traced)} files (was {MOST_FILES})"
