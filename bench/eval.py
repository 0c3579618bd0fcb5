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

Then, with ``--workers 1,2`` (the default), **eval on workers** (``--on-workers``): the same
range evaluated by 1, then 2, ``eddies worker`` processes of the candidate's app, each
started once the evaluation sent its cases; sessions per second from the first case
answered to the last, by the output records' times (the workers' start, ~3 s to import,
reading the recording and joining the group, is timed apart).
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
from eddies.connectors.runtime.client import producer, read_events, read_records, send_input
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


def on_workers(settings: Settings, plan: AgentPlan, count: int, rnd: str) -> tuple[float, float, float]:
    """The range evaluated on ``count`` worker processes of its own app: (sessions per
    second from the first answer to the last, by the output records' times; seconds from
    the workers' launch to the first answer; seconds in all)."""
    import os
    import subprocess
    import sys

    procs: list[subprocess.Popen[bytes]] = []
    launched: list[float] = []
    target = dataclasses.replace(settings, app=f"{settings.app}-{rnd}-same")

    def started(target: Settings) -> None:
        launched.append(time.time())
        for _ in range(count):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "eddies", "worker", "--app", target.app, "-b",
                 target.bootstrap_servers, "--partitions", str(target.partitions),
                 "--agent", "eddies.demo:calculator_agent"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true")))

    t0 = time.perf_counter()
    traffic = recorded_traffic(settings, from_time_ms=0)
    try:
        evaluated = evaluate(traffic.cases, {"same": plan}, [Equals()], baseline=RECORDED, traffic=traffic,
                             on_workers=lambda _name: target, started=started, wait_s=120)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
    took = time.perf_counter() - t0
    assert evaluated.summary("same").pass_rates["all"] == 1.0, evaluated.lines()
    # The workers' pace, by when the broker took each answer (the evaluation reads them
    # in batches: its reading times say less).
    times = sorted(msg.timestamp()[1] for msg in read_records(target, TopicNames(target.app).output))
    return (len(times) - 1) / ((times[-1] - times[0]) / 1000), times[0] / 1000 - launched[0], took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", default="1,2",
                        help="worker processes of each eval on workers ('': none)")
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args()
    with EmbeddedBroker() as broker:
        settings = load_settings(env={}, overrides={
            "bootstrap_servers": broker.bootstrap, "app": f"bench{uuid.uuid4().hex[:8]}",
            "partitions": args.partitions})
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
        for count in [int(n) for n in args.workers.split(",") if n.strip()]:
            rate, first, took = on_workers(settings, plan, count, f"w{count}")
            print(f"eval on {count} worker{'s' if count > 1 else ''}: {rate:.0f} sessions/s from the first "
                  f"answer to the last; {first:.1f} s from their launch to the first answer (start, "
                  f"reading the recording, joining); {took:.1f} s in all")


if __name__ == "__main__":
    main()
