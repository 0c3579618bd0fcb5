"""Evaluation throughput on recorded traffic, next to ``eddies reprocess`` of the same range.

Run: ``.venv/bin/python bench/eval.py`` (``make bench-eval``; about a minute). An embedded
broker; a worker of the offline calculator (a model call, the ``add`` tool, a model call a
session) answers ``--sessions`` one-prompt sessions; then, in one run, alternated
``--rounds`` times:

1. **reprocess**: :func:`eddies.connectors.local.rerun.reprocess` of the whole range into
   another app, with the same agent: every call answered from the recording, the events
   written to the target's topics;
2. **eval**: :func:`eddies.connectors.local.evaluation.evaluate` of the same range, the same
   agent as the candidate, the recording as the baseline, scorers ``equals`` and a
   threshold (calls answered from the recording the same way; nothing written).

Sessions per second of each, and eval's as a share of reprocess's (issue 33's target: at
least 80%). Reading the range (inputs and the sessions' histories) is timed apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
import uuid
from typing import Any

from eddies.connectors.kafka.broker import EmbeddedBroker
from eddies.connectors.kafka.worker import Worker
from eddies.connectors.local.evaluation import RECORDED, evaluate, recorded_traffic
from eddies.connectors.local.rerun import reprocess
from eddies.connectors.runtime.client import producer, read_events, send_input
from eddies.connectors.runtime.settings import Settings, load_settings
from eddies.connectors.runtime.topics import TopicNames, ensure_topics
from eddies.demo import calculator_agent
from eddies.engine import AgentPlan
from eddies.eval import Equals, Threshold


def record(settings: Settings, sessions: int) -> None:
    """``sessions`` one-prompt sessions answered by a worker of the offline calculator."""
    worker = Worker(settings, calculator_agent()).start()
    try:
        if not worker.wait_assigned(60):
            raise SystemExit("the worker did not get its partitions")
        prod = producer(settings)
        for n in range(sessions):
            send_input(settings, f"s{n}", f'{{"a": {n}, "b": 1}}', prod=prod)
        prod.flush(30)
        for got, _ in enumerate(read_events(settings, worker.names.output, follow=True, timeout=300), 1):
            if got == sessions:
                break
    finally:
        worker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with EmbeddedBroker() as broker:
        settings = load_settings(env={}, overrides={
            "bootstrap_servers": broker.bootstrap, "app": f"bench{uuid.uuid4().hex[:8]}", "partitions": 2})
        started = time.perf_counter()
        record(settings, args.sessions)
        print(f"recorded {args.sessions} sessions in {time.perf_counter() - started:.1f} s")
        plan = AgentPlan.compile(calculator_agent())
        rates: dict[str, list[float]] = {"reprocess": [], "eval": []}
        for rnd in range(args.rounds):
            target = dataclasses.replace(settings, app=f"{settings.app}-re{rnd}")
            from confluent_kafka.admin import AdminClient

            ensure_topics(AdminClient(settings.client_config()), TopicNames(target.app), settings.partitions)
            t0 = time.perf_counter()
            report: Any = reprocess(settings, target, plan, from_time_ms=0)
            rates["reprocess"].append(len(report.sessions) / (time.perf_counter() - t0))
            t0 = time.perf_counter()
            traffic = recorded_traffic(settings, from_time_ms=0)
            read_s = time.perf_counter() - t0
            evaluated = evaluate(traffic.cases, {"same": plan}, [Equals(), Threshold("tokens", max=1000)],
                                 baseline=RECORDED, traffic=traffic)
            rates["eval"].append(len(traffic.cases) / (time.perf_counter() - t0))
            assert evaluated.summary("same").pass_rates["all"] == 1.0
            assert len(report.live) == 0 and evaluated.summary("same").refused_calls == 0
            print(f"round {rnd + 1}: reprocess {rates['reprocess'][-1]:.0f} sessions/s, eval "
                  f"{rates['eval'][-1]:.0f} sessions/s (reading the range {read_s:.2f} s of it)")
        rep, ev = statistics.median(rates["reprocess"]), statistics.median(rates["eval"])
        print(f"median of {args.rounds}: reprocess {rep:.0f} sessions/s, eval {ev:.0f} sessions/s: "
              f"eval at {ev / rep:.0%} of reprocess")


if __name__ == "__main__":
    main()
