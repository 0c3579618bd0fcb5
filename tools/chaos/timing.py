"""How long answers waited around each kill, and per input: the campaign's liveness numbers
(reported, not checked: how long is too long depends on ``outcome_wait_ms``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from eddies.events.partitioner import partition_for

from .traffic import Seen, Sent


@dataclass
class Kill:
    """One SIGKILL of the campaign and how its slot came back."""

    t: float
    slot: str
    role: str
    pid: int
    mode: str  # same-now | same-later | fresh-later
    restart_after: float
    restart_slot: str
    owned: list[int] = field(default_factory=list)  # partitions the victim owned
    second: bool = False  # a second kill soon after another
    provider_in_flight: int | None = None  # model calls the slow provider held (+slow rounds)


def stalls(kills: list[Kill], sent: list[Sent], seen: list[Seen], firsts: dict[tuple[str, int], float],
           partitions: int, t_start: float) -> list[dict[str, Any]]:
    """Per kill: for each partition with inputs unanswered at the kill, the wait until its
    next answer; the victim's partitions' longest such wait ("never": one never answered)."""
    answers = sorted((o for o in seen if o.final), key=lambda o: o.t)
    rows = []
    for kill in kills:
        pending: Counter[int] = Counter()
        for s in sent:
            if s.t < kill.t and firsts.get((s.session, s.run), float("inf")) > kill.t:
                pending[partition_for(s.session, partitions)] += 1
        waits: dict[int, float | None] = {}
        for part in pending:
            nxt = next((o.t for o in answers if o.t > kill.t and o.partition == part), None)
            waits[part] = None if nxt is None else round(nxt - kill.t, 2)
        victim = [w for part, w in waits.items() if part in kill.owned]
        rows.append({
            "t": round(kill.t - t_start, 1), "victim": kill.slot, "role": kill.role, "pid": kill.pid,
            "mode": kill.mode, "restart_after": round(kill.restart_after, 1),
            "restart_slot": kill.restart_slot, "second": kill.second, "owned": kill.owned,
            "provider_in_flight": kill.provider_in_flight,
            "pending_partitions": dict(pending), "first_answer_after_kill": waits,
            "victim_partitions_stall_s": "never" if None in victim
            else max((w for w in victim if w is not None), default=None),
        })
    return rows


def latency(sent: list[Sent], firsts: dict[tuple[str, int], float]) -> dict[str, Any]:
    """Input-to-answer seconds: median, 95th percentile, max, and how many over 30 s."""
    lat = sorted(firsts[(s.session, s.run)] - s.t for s in sent if (s.session, s.run) in firsts)
    if not lat:
        return {"p50": None, "p95": None, "max": None, "over_30s": 0}
    return {"p50": round(lat[len(lat) // 2], 2), "p95": round(lat[int(len(lat) * 0.95)], 2),
            "max": round(lat[-1], 2), "over_30s": sum(1 for x in lat if x > 30)}
