"""Random faults on the broker-less driver: three orchestrators of one app, whose group
evicts one that stands still (and gives its partitions to another), moves partitions
cleanly, and whose woken members write before they hear of it or notice it first; an
executor that sometimes dies between journaling an outcome and sending it; a journal that
compacts. Whatever the order, every input is answered once, as it should be.

The campaign (tools/chaos, ``make chaos``) does this with real processes on a real broker;
this finds the same kind of ordering bug in milliseconds, with the seed to replay it.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from chaos.agents import expected_output, mixed_agent

from eddies.connectors.kafka.driver import Driver
from eddies.events import OutputEvent

PARTITIONS = 2
NAMES = ["a", "b", "c"]
SESSIONS = [f"s{i}" for i in range(6)]


def _body(rng: random.Random, session: str, n: int) -> dict[str, Any]:
    kind = rng.choice(["effects", "react", "sub"])
    if kind == "effects":
        return {"kind": kind, "key": f"{session}#{n}", "a": rng.randint(0, 9), "b": n}
    return {"kind": kind, "ref": f"{session}/{n}", "rounds": rng.randint(1, 3)}


def _faulty_run(seed: int, steps: int = 300) -> tuple[dict[tuple[str, int], Any], Driver]:
    """Inputs sent, and the driver after the faults and a final settle."""
    rng = random.Random(seed)
    driver = Driver(mixed_agent(), partitions=PARTITIONS,
                    snapshot_delay_ms=rng.choice([0, 60_000]))
    for name in NAMES:
        driver.orchestrator(name)
    owner = {p: rng.choice(NAMES) for p in range(PARTITIONS)}
    for p, name in owner.items():
        driver.assign(name, [p])
    paused: set[str] = set()
    counts: dict[str, int] = {}
    sent: dict[tuple[str, int], Any] = {}
    ops = ["send", "turn", "perform", "pause", "wake", "move", "compact"]
    for _ in range(steps):
        op = rng.choices(ops, [20, 40, 20, 4, 6, 4, 1])[0]
        awake = [n for n in NAMES if n not in paused]
        if op == "send":
            session = rng.choice(SESSIONS)
            n = counts[session] = counts.get(session, 0) + 1
            sent[(session, n)] = body = _body(rng, session, n - 1)
            driver.send(session, json.dumps(body))
        elif op == "turn" and awake:
            driver.turn(rng.choice(awake), rng.randint(1, 3))
        elif op == "perform":
            driver.perform_requests(send=rng.random() > 0.1)
        elif op == "pause" and len(awake) >= 2:
            victim = rng.choice(awake)
            held = [p for p, o in owner.items() if o == victim]
            if held:  # it stands still past its session timeout: its partitions move on
                paused.add(victim)
                driver.evict(victim, notice_after=rng.randint(0, 4))
                to = rng.choice([n for n in awake if n != victim])
                owner.update(dict.fromkeys(held, to))
                driver.assign(to, held)
        elif op == "wake" and paused:
            name = rng.choice(sorted(paused))
            paused.discard(name)
            how = rng.choice(["notices", "writes first", "says nothing"])
            if how == "notices":
                driver.stall(name)
            elif how == "writes first":
                driver.orchestrators[name].checkpoints.commit(driver.consumer(name),
                                                              everything=rng.random() < 0.5)
        elif op == "move" and len(awake) >= 2:
            src = rng.choice(awake)
            held = [p for p, o in owner.items() if o == src]
            if held:
                p = rng.choice(held)
                driver.revoke(src, [p])
                driver.turn(src)
                owner[p] = dst = rng.choice([n for n in awake if n != src])
                driver.assign(dst, [p])
        elif op == "compact":
            driver.broker.compact(driver.names.journal)
    for name in paused:
        driver.stall(name)
    for _ in range(3):
        driver.settle(turns=300)
    return sent, driver


@pytest.mark.parametrize("seed", range(60))
def test_every_input_is_answered_once_whatever_the_faults(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAOS_DELAY_MIN", "0")
    monkeypatch.setenv("CHAOS_DELAY_MAX", "0")
    monkeypatch.delenv("CHAOS_EFFECTS", raising=False)
    sent, driver = _faulty_run(seed)
    answers: dict[tuple[str, int], dict[str, OutputEvent]] = {}
    for ev in driver.outputs():
        if isinstance(ev.payload, OutputEvent) and not ev.scope:
            answers.setdefault((ev.session_id, ev.run), {})[ev.event_id] = ev.payload
    missing = sorted(set(sent) - set(answers))
    twice = sorted(run for run, ids in answers.items() if len(ids) > 1)
    wrong = sorted(run for run, ids in answers.items()
                   if run in sent and next(iter(ids.values())).error is None
                   and next(iter(ids.values())).output != expected_output(sent[run]))
    assert (missing, twice, wrong) == ([], [], []), f"seed {seed}"
