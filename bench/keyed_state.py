"""Bytes the Flink job writes to keyed state per event in a ten-round ReAct run.

Run: ``.venv/bin/python bench/keyed_state.py``. Drives one session of ``tests.agents:
react_agent`` (ten tool rounds of ~1 KB results, then an answer; then the same run on
ReActAgent's loop, ``react_loop_agent``) through the session
machine and stores its state after every applied event as the Flink job does
(``connectors/flink/keyed_state.py``: MapState entries, only changed ones put), next to
what one ValueState holding the whole state would write (``SessionState.to_bytes``).
No broker, no JVM: the bytes are the same as in the job (its ``state_bytes`` counter).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eddies.connectors.flink import keyed_state  # noqa: E402
from eddies.engine import SessionMachine  # noqa: E402
from eddies.events import DurableCallResult  # noqa: E402
from tests.agents import react_agent, react_loop_agent, react_rounds  # type: ignore[import-not-found]  # noqa: E402
from tests.unit.engine.executor import applied  # type: ignore[import-not-found]  # noqa: E402


def measure(title: str, agent: Any) -> None:
    """Print what one ten-round run of ``agent`` writes per event."""
    machine = SessionMachine(agent)
    stored = None
    rows: list[tuple[str, int, int]] = []
    for ev, state, _ in applied(machine, [("s", "research kafka")], react_rounds):
        change = keyed_state.write(state, stored)
        stored = change.stored
        kind = ev.type
        if isinstance(ev.payload, DurableCallResult):
            kind = f"result of {ev.payload.kind}"
        rows.append((kind, change.written, len(state.to_bytes())))
    print(f"{title}\nevent                     entries written   whole state (one ValueState)")
    for i, (kind, written, whole) in enumerate(rows):
        print(f"{i:2} {kind:26} {written:9,} B   {whole:9,} B")
    total, whole = sum(r[1] for r in rows), sum(r[2] for r in rows)
    tools = [r[1] for r in rows if r[0] == "result of TOOL"]
    models = [r[1] for r in rows if r[0] == "result of CHAT_MODEL"]
    print(f"total over {len(rows)} events: {total:,} B written as entries, {whole:,} B as one "
          f"value ({whole / total:.1f}x)")
    print(f"per model result: {min(models[:-1]):,}-{max(models[:-1]):,} B; per tool result: "
          f"{min(tools):,}-{max(tools):,} B\n")


def main() -> None:
    measure("built-in chat action (tests.agents:react_agent)", react_agent())
    measure("ReActAgent (tests.agents:react_loop_agent)", react_loop_agent())


if __name__ == "__main__":
    main()
