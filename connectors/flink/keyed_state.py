"""A session's state as entries of Flink keyed state, rewritten only where they changed.

A session's state grows with what it did: the short-term memory, and in a run, one call
record per durable call and the sensory memory (a chat's conversation). Written whole on
every event (one ValueState), a ten-round ReAct run re-serialises its conversation
dozens of times. So the state is kept as entries of one MapState per session:

- ``k:core``: counters, clock, the running run's invocations and waiting calls;
- ``k:inputs``: queued inputs and the ids of recent ones (changes only with inputs);
- ``c:<call id>``: one call record (written when issued and when its outcome arrives);
- ``s:<key>``: one sensory-memory value (per run);
- ``m:<key>``: one short-term-memory value (per session).

:func:`write` compares the state after an event with what was stored and returns only the
entries to put and to remove; :func:`load` joins entries back into a state. Pure: the
Flink function applies the result to its MapState. Example::

    change = write(state, before=None)        # everything, the first time
    change = write(state, before=change.stored)  # then only what changed
    state2, stored = load(change.puts.items())
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from eddies.engine import SessionState

CORE = "k:core"
INPUTS = "k:inputs"
CALL = "c:"
SENSORY = "s:"
MEMORY = "m:"


@dataclass(slots=True)
class Stored:
    """What the keyed state holds for a session, as far as :func:`write` needs to know.

    Call records are known by (status, attempt, request id): the machine changes a record's
    value, error and arguments only together with its status."""

    core: bytes = b""
    inputs: bytes = b""
    calls: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    sensory: dict[str, str] = field(default_factory=dict)
    memory: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Change:
    """Entries to put and to remove after an event, and what is stored then."""

    puts: dict[str, bytes]
    removes: list[str]
    stored: Stored

    @property
    def written(self) -> int:
        """Bytes put (keys and values): what an event costs the state backend."""
        return sum(len(k) + len(v) for k, v in self.puts.items())


def write(state: SessionState, before: Stored | None) -> Change:
    """The entries that differ between ``state`` and what was stored (``before``; None:
    nothing is stored yet)."""
    old = before if before is not None else Stored()
    puts: dict[str, bytes] = {}
    removes: list[str] = []
    d = state.to_dict(parts=False)
    inputs = orjson.dumps([d.pop("queue"), d.pop("recent_inputs")])
    core = orjson.dumps(d)
    if core != old.core:
        puts[CORE] = core
    if inputs != old.inputs:
        puts[INPUTS] = inputs
    run = state.run
    calls: dict[str, tuple[str, int, str]] = {}
    sensory: dict[str, str] = {}
    if run is not None:
        for i, (cid, rec) in enumerate(run.calls.items()):
            mark = (rec.status, rec.attempt, rec.request_id)
            calls[cid] = mark
            if old.calls.get(cid) != mark:
                # With its place: MapState iterates in no particular order, and a run's
                # calls are kept in the order they were issued.
                puts[CALL + cid] = orjson.dumps([i, rec.to_dict()])
        sensory = dict(run.sensory)
    _values(SENSORY, sensory, old.sensory, puts, removes)
    removes.extend(CALL + cid for cid in old.calls if cid not in calls)
    memory = dict(state.memory)
    _values(MEMORY, memory, old.memory, puts, removes)
    return Change(puts, removes, Stored(core if CORE in puts else old.core,
                                        inputs if INPUTS in puts else old.inputs,
                                        calls, sensory, memory))


def _values(prefix: str, now: dict[str, str], old: dict[str, str], puts: dict[str, bytes],
            removes: list[str]) -> None:
    for k, v in now.items():
        was = old.get(k)
        if was is not v and was != v:
            puts[prefix + k] = v.encode()
    removes.extend(prefix + k for k in old if k not in now)


def load(entries: Iterable[tuple[str, bytes]]) -> tuple[SessionState, Stored] | None:
    """The state these entries hold, and what is stored (None: there are none)."""
    core = inputs = b""
    calls: dict[str, list[Any]] = {}
    sensory: dict[str, str] = {}
    memory: dict[str, str] = {}
    for key, value in entries:
        if key == CORE:
            core = value
        elif key == INPUTS:
            inputs = value
        elif key.startswith(CALL):
            calls[key[len(CALL):]] = orjson.loads(value)
        elif key.startswith(SENSORY):
            sensory[key[len(SENSORY):]] = value.decode()
        elif key.startswith(MEMORY):
            memory[key[len(MEMORY):]] = value.decode()
    if not core:
        return None
    d = orjson.loads(core)
    d["queue"], d["recent_inputs"] = orjson.loads(inputs) if inputs else ([], [])
    d["memory"] = memory
    if d["run"] is not None:
        d["run"]["calls"] = {cid: rec for cid, (_, rec) in
                             sorted(calls.items(), key=lambda kv: int(kv[1][0]))}
        d["run"]["sensory"] = sensory
    state = SessionState.from_dict(d)
    run = state.run
    stored = Stored(
        core, inputs,
        {} if run is None else {c: (r.status, r.attempt, r.request_id) for c, r in run.calls.items()},
        dict(sensory) if run is not None else {}, dict(memory))
    return state, stored


