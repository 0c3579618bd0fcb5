"""The campaign: rounds of traffic, kills and restarts, each followed by the checks."""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from eddies.connectors.kafka.broker import EmbeddedBroker
from eddies.connectors.runtime.settings import load_settings
from eddies.connectors.runtime.topics import TopicNames, ensure_topics

from . import checks, netcut, timing
from .evidence import gather, write_trail
from .fleet import ROOT, Fleet, Proc
from .netcut import Relay
from .provider import PROVIDER_ENV, SlowProvider
from .timing import Kill
from .traffic import Feeder, JournalWatch, OutputMonitor, Waves

MIX = {"effects": 0.4, "react": 0.4, "sub": 0.2}
RESTARTS = {"same-now": 0.35, "same-later": 0.35, "fresh-later": 0.3}


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


#: Layouts (--layouts): a base, "all" or "split", and "+slow" for a round with the slow provider.
BASES = ("all", "split")
VARIANTS = ("", "slow")


def layout_roles(layout: str, rng: random.Random, split: str) -> list[tuple[str, str]]:
    """The round's slots and their roles: three workers with every role, or orchestrators
    and executors apart (two and one, or one and two)."""
    if layout == "all":
        return [("w0", "all"), ("w1", "all"), ("w2", "all")]
    if split == "2o1e" or (split == "random" and rng.random() < 0.5):
        return [("o0", "orchestrator"), ("o1", "orchestrator"), ("e0", "executor")]
    return [("o0", "orchestrator"), ("e0", "executor"), ("e1", "executor")]


class Chaos:
    """The kill loop of a round: who dies when, and when (and as what) it comes back."""

    def __init__(self, fleet: Fleet, rng: random.Random, args: argparse.Namespace,
                 pause_rng: random.Random, cut_rng: random.Random,
                 broker: subprocess.Popen[bytes] | None = None,
                 broker_rng: random.Random | None = None,
                 provider: SlowProvider | None = None) -> None:
        self.fleet = fleet
        # A +slow round's provider: how many model calls it holds is told at each fault.
        self.provider = provider
        self.rng = rng
        self.args = args
        # Pauses draw from a generator of their own: a seed's kill plan is the same with them.
        self.pause_rng = pause_rng
        self.next_pause = (time.time() + pause_rng.expovariate(1 / args.pause_every)
                           if args.pause_every else float("inf"))
        self.pauses = 0
        # Network cuts too: their own generator, for the same reason.
        self.cut_rng = cut_rng
        self.next_cut = (time.time() + cut_rng.expovariate(1 / args.partition_every)
                         if args.partition_every else float("inf"))
        self.cuts = 0
        # The broker stood still too (--broker-pause-every): every worker's requests and
        # heartbeats wait, and the group coordinator, once it goes on, finds every member's
        # session expired at once. Its own generator, for the same reason.
        self.broker = broker
        self.broker_rng = broker_rng or random.Random()
        self.next_broker_pause = (
            time.time() + self.broker_rng.expovariate(1 / args.broker_pause_every)
            if args.broker_pause_every and broker is not None else float("inf"))
        self.broker_paused_until: float | None = None
        self.broker_pauses = 0
        self.kills: list[Kill] = []
        self.crashes: list[dict[str, Any]] = []
        self.pending: list[tuple[float, str, str]] = []  # (due, slot, role)
        self.fresh = 0
        self.next_kill = 0.0

    def tick(self) -> None:
        for p in self.fleet.reap():
            self.crashes.append(p.info())
            say(f"  CRASH: {p.slot} pid {p.pid} rc {p.rc}; restarting it")
            self.pending.append((time.time(), p.slot, p.role))
        self.restart_due()
        for p in self.fleet.resume_due():
            say(f"  SIGCONT {p.slot} ({p.role}) pid {p.pid}")
        if time.time() >= self.next_pause:
            self.pause()
        if time.time() >= self.next_cut:
            self.cut()
        if self.broker_paused_until is not None and time.time() >= self.broker_paused_until:
            self.resume_broker()
        if time.time() >= self.next_broker_pause:
            self.pause_broker()
        if time.time() >= self.next_kill:
            # Paused and cut-off workers too: the kill plan follows from the seed alone.
            alive = self.fleet.alive()
            if len(alive) >= 2:  # another worker stays up
                victims = [self.rng.choice(alive)]
                if len(alive) >= 3 and self.rng.random() < self.args.double_kill:
                    victims.append(self.rng.choice([p for p in alive if p is not victims[0]]))
                for i, victim in enumerate(victims):
                    if i:
                        time.sleep(self.rng.uniform(0.2, 3.0))
                    self.kill(victim, second=bool(i))
            self.next_kill = time.time() + self.rng.uniform(self.args.kill_min, self.args.kill_max)

    def pause(self) -> None:
        serving = self.fleet.serving()
        if len(serving) >= 2:  # another worker stays up
            victim = self.pause_rng.choice(serving)
            seconds = self.pause_rng.uniform(2.0, self.args.pause_for)
            owned = sorted(victim.owned_at(time.time()))
            self.fleet.pause(victim, seconds)
            self.pauses += 1
            say(f"  SIGSTOP {victim.slot} ({victim.role}) pid {victim.pid} owned {owned} for "
                f"{seconds:.1f}s{self.held()}")
        self.next_pause = time.time() + self.pause_rng.expovariate(1 / self.args.pause_every)

    def cut(self) -> None:
        serving = self.fleet.serving()
        if len(serving) >= 2:  # another worker stays up
            victim = self.cut_rng.choice(serving)
            seconds = self.cut_rng.uniform(2.0, self.args.cut_for)
            mode = self.cut_rng.choices(["drop", "blackhole", "delay"], weights=[4, 4, 2])[0]
            owned = sorted(victim.owned_at(time.time()))
            self.fleet.cut(victim, mode, seconds)
            self.cuts += 1
            say(f"  CUT ({mode}) {victim.slot} ({victim.role}) pid {victim.pid} owned {owned} "
                f"for {seconds:.1f}s{self.held()}")
        self.next_cut = time.time() + self.cut_rng.expovariate(1 / self.args.partition_every)

    def held(self) -> str:
        """"; the provider holds N calls" in a +slow round, else ""."""
        if self.provider is None:
            return ""
        return f"; the provider holds {self.provider.stats().get('in_flight')} calls"

    def pause_broker(self) -> None:
        assert self.broker is not None
        seconds = self.broker_rng.uniform(2.0, self.args.broker_pause_for)
        self.broker.send_signal(signal.SIGSTOP)
        self.broker_paused_until = time.time() + seconds
        self.broker_pauses += 1
        say(f"  SIGSTOP the broker pid {self.broker.pid} for {seconds:.1f}s")
        self.next_broker_pause = (self.broker_paused_until
                                  + self.broker_rng.expovariate(1 / self.args.broker_pause_every))

    def resume_broker(self) -> None:
        if self.broker is not None and self.broker_paused_until is not None:
            self.broker.send_signal(signal.SIGCONT)
            self.broker_paused_until = None
            say(f"  SIGCONT the broker pid {self.broker.pid}")

    def kill(self, victim: Proc, second: bool) -> None:
        mode = self.rng.choices(list(RESTARTS), weights=list(RESTARTS.values()))[0]
        delay = 0.0 if mode == "same-now" else self.rng.uniform(2, 25)
        slot = victim.slot
        if mode == "fresh-later":
            self.fresh += 1
            slot = f"{victim.slot[0]}-f{self.fresh}"
        owned = sorted(victim.owned_at(time.time()))
        in_flight = self.provider.stats().get("in_flight") if self.provider is not None else None
        self.fleet.kill(victim)
        self.kills.append(Kill(victim.killed_at or time.time(), victim.slot, victim.role, victim.pid,
                               mode, delay, slot, owned, second, in_flight))
        say(f"  KILL -9 {victim.slot} ({victim.role}) pid {victim.pid} owned {owned}; "
            f"{mode} -> {slot} in {delay:.1f}s"
            + ("" if in_flight is None else f"; the provider held {in_flight} calls"))
        self.pending.append((time.time() + delay, slot, victim.role))
        self.restart_due()

    def restart_due(self, everyone: bool = False) -> None:
        for item in [x for x in self.pending if everyone or x[0] <= time.time()]:
            self.pending.remove(item)
            proc = self.fleet.start(item[1], item[2])
            say(f"  restart {item[1]} ({item[2]}) pid {proc.pid}")


def run_round(k: int, layout: str, args: argparse.Namespace, rundir: Path,
              seed: int) -> dict[str, Any]:
    """One round; its layout, kills and restarts follow from ``seed`` and ``k`` alone (the
    inputs have a generator of their own), so that a seed replays a round's kill plan. A
    layout "BASE+slow" adds the slow provider and waves of inputs whose model calls go to it
    (``chaos.provider``)."""
    rng = random.Random(f"{seed}/{k}/kills")
    base, _, variant = layout.partition("+")
    rdir = rundir / f"round-{k}-{layout}"
    rdir.mkdir(parents=True, exist_ok=True)
    effects = rdir / "effects.log"
    effects.touch()
    app = f"chaos{k}x{uuid.uuid4().hex[:6]}"
    broker = None if args.bootstrap_servers else EmbeddedBroker().start()
    relay: Relay | None = None
    provider: SlowProvider | None = None
    provider_relay: Relay | None = None
    arrivals = rdir / "provider-arrivals.jsonl"
    bootstrap: str = args.bootstrap_servers if broker is None else broker.bootstrap
    try:
        settings = load_settings(env={}, overrides={
            "bootstrap_servers": bootstrap, "app": app, "partitions": args.partitions})
        ensure_topics(AdminClient(settings.client_config()), TopicNames(app), args.partitions)
        say(f"round {k} ({layout}): app {app}, broker {bootstrap}, results in {rdir}")
        extra = {} if args.outcome_wait_ms is None else {"EDDIES_OUTCOME_WAIT_MS": str(args.outcome_wait_ms)}
        if args.partition_every:
            # A worker started into a cut waits for the broker connect_timeout_ms (10 s by
            # default), then exits 2 naming the address, as documented; on this network a
            # cut lasts up to --cut-for seconds, so the workers are configured to outwait
            # one, as an operator would on such a network (a round saw a worker cut off 0.3 s
            # after its start, for 13.4 s).
            extra["EDDIES_CONNECT_TIMEOUT_MS"] = str(int((args.cut_for + 10) * 1000))
            relay = Relay(int(bootstrap.rpartition(":")[2])).start()
        if variant == "slow":
            provider = SlowProvider(arrivals, (args.slow_delay_min, args.slow_delay_max),
                                    random.Random(f"{seed}/{k}/provider").randrange(1 << 30))
            extra[PROVIDER_ENV] = provider.base_url
            if relay is not None:  # the workers reach it from their namespaces through this
                provider_relay = Relay(provider.port).start()
            say(f"  slow provider at {provider.base_url}: answers after "
                f"{args.slow_delay_min}-{args.slow_delay_max} s; waves of {args.slow_wave} inputs "
                f"every {args.slow_every} s over {args.slow_sessions} sessions")
        fleet = Fleet(settings, rdir, effects, args.concurrency, extra, relay, provider_relay)
        for slot, role in layout_roles(base, rng, args.split_roles):
            fleet.start(slot, role)
        monitor = OutputMonitor(settings)
        monitor.start()
        journal = JournalWatch(settings)
        journal.start()
        waves = None if provider is None else Waves(
            [f"k{k}p{i}" for i in range(args.slow_sessions)], args.slow_wave, args.slow_every)
        feeder = Feeder(settings, [f"k{k}s{i}" for i in range(args.sessions)],
                        random.Random(f"{seed}/{k}/inputs"), args.mean_gap, MIX, waves)
        chaos = Chaos(fleet, rng, args, random.Random(f"{seed}/{k}/pauses"),
                      random.Random(f"{seed}/{k}/cuts"),
                      None if broker is None else broker.process,
                      random.Random(f"{seed}/{k}/broker-pauses"), provider)
        joined_by = time.time() + 90
        while time.time() < joined_by and not fleet.joined():
            time.sleep(0.5)
        feeder.start()
        t_start = time.time()
        chaos.next_kill = t_start + rng.uniform(args.kill_min, args.kill_max) / 2
        while time.time() < t_start + args.round_seconds:
            chaos.tick()
            time.sleep(0.1)
        chaos.resume_broker()  # before the feeder's last flush, which waits for it
        feeder.halt.set()
        feeder.join(90)
        t_fed = time.time()
        chaos.restart_due(everyone=True)  # every slot runs for the drain
        fleet.resume_due(everyone=True)
        want = {(s.session, s.run) for s in feeder.sent}
        say(f"  fed {len(want)} inputs over {t_fed - t_start:.0f}s; {len(chaos.kills)} kills, "
            f"{chaos.pauses} pauses, {chaos.cuts} cuts, {chaos.broker_pauses} broker pauses; "
            "draining")
        while time.time() < t_fed + args.drain_seconds and not want <= monitor.answered():
            for p in fleet.reap():
                chaos.crashes.append(p.info())
                say(f"  CRASH (drain): {p.slot} pid {p.pid} rc {p.rc}; restarting it")
                fleet.start(p.slot, p.role)
            time.sleep(0.5)
        t_drained = time.time()
        missing = sorted(want - monitor.answered())
        say(f"  drained in {t_drained - t_fed:.1f}s: {len(want) - len(missing)}/{len(want)} answered")
        time.sleep(2)  # a late duplicate answer, if any, is in the topic by now
        fleet.stop_all()
        time.sleep(1)
        monitor.halt.set()
        journal.halt.set()
        monitor.join(10)
        journal.join(10)
        provider_stats = {} if provider is None else provider.stats()
        evidence = gather(settings, {(s.session, s.run): s.body for s in feeder.sent}, effects,
                          fleet.procs, chaos.crashes, missing,
                          None if provider is None else arrivals, journal.readable)
        if missing:  # the broker goes with the round: keep the stuck sessions' story
            write_trail(settings, {session for session, _ in missing}, rdir / "stuck-trail.txt")
    finally:
        if relay is not None:
            fleet.close_namespaces()
            relay.stop()
        if provider_relay is not None:
            provider_relay.stop()
        if provider is not None:
            provider.stop()
        if broker is not None:
            if broker.process is not None:  # a paused broker would not hear its stop
                broker.process.send_signal(signal.SIGCONT)
            broker.stop()
    results = checks.check(evidence)
    firsts = monitor.first_answers()
    report: dict[str, Any] = {
        "round": k, "layout": layout, "app": app, "dir": str(rdir),
        "ok": all(r["ok"] for r in results.values()),
        "inputs": len(feeder.sent), "undelivered_inputs": sum(1 for s in feeder.sent if not s.delivered),
        "feeder_errors": feeder.errors, "feed_seconds": round(t_fed - t_start, 1),
        "drain_seconds": round(t_drained - t_fed, 1), **results,
        "pauses": chaos.pauses, "cuts": chaos.cuts, "broker_pauses": chaos.broker_pauses,
        # The slow provider's counts: requests received, and the most held at once.
        "provider": provider_stats,
        "kills": timing.stalls(chaos.kills, feeder.sent, monitor.seen, firsts, args.partitions, t_start),
        "latency_s": timing.latency(feeder.sent, firsts), "processes": evidence.processes,
    }
    (rdir / "report.json").write_text(json.dumps(report, indent=1, default=str))
    return report


def summary_line(rep: dict[str, Any]) -> str:
    one, fx, stuck, procs, asked = (rep[name] for name in checks.INVARIANTS)
    stall = [r["victim_partitions_stall_s"] for r in rep["kills"]]
    numbers = [x for x in stall if isinstance(x, (int, float))]
    failed = [name for name in checks.INVARIANTS if not rep[name]["ok"]]
    return (f"round {rep['round']} {rep['layout']}: {'ok' if rep['ok'] else 'FAILED ' + ', '.join(failed)}"
            f" | inputs {rep['inputs']}, answered {one['answered']}, missing {one['n_missing']}, "
            f"two answers {len(one['distinct_output_ids_for_one_run'])}, wrong {one['n_wrong']}, "
            f"degraded {one['degraded_by_failed_call']} | effects {fx['effect_executions']}, "
            f"repeated {len(fx['repeated'])}, unknown {fx['unknown_outcomes']} (justified "
            f"{fx['unknown_justified']}; sent twice {fx['unknown_sent_twice']}, waited for twice "
            f"{len(fx['unknown_waited_twice'])}) | "
            f"stuck {len(stuck['stuck'])} | processes {procs['processes']}, bad exits "
            f"{len(procs['bad_exits'])} | kills {len(rep['kills'])}, pauses {rep['pauses']}, "
            f"cuts {rep.get('cuts', 0)}, broker pauses {rep.get('broker_pauses', 0)}, "
            f"longest stall {max(numbers) if numbers else None} s, never {stall.count('never')} | "
            f"drain {rep['drain_seconds']} s, latency max {rep['latency_s']['max']} s"
            + _provider_part(rep, asked))


def _provider_part(rep: dict[str, Any], asked: dict[str, Any]) -> str:
    """The slow provider's part of a summary line ("" in a round without it)."""
    stats = rep.get("provider") or {}
    if not stats and not asked.get("requests"):
        return ""
    held = [k.get("provider_in_flight") for k in rep["kills"]]
    return (f" | provider: peak {stats.get('peak')} in flight, held at the kills {held}, "
            f"{asked['requests']} requests for {asked['slow_inputs']} slow inputs, asked again "
            f"{asked['asked_again']}, asked after its outcome {asked['n_asked_after_outcome']} "
            f"(and {asked.get('asked_on_waking', 0)} by a worker waking from a pause or cut, "
            f"{asked.get('asked_as_it_came', 0)} within {checks.AT_ONCE_S:g} s of it, "
            f"{asked.get('answered_from_afar', 0)} after an outcome from a worker cut off or paused)")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--round-seconds", type=float, default=120, help="of traffic and kills, per round")
    ap.add_argument("--layouts", default="all,split,all+slow",
                    help="cycled over the rounds: all or split, +slow for the slow provider "
                         "(model calls of 0.5-3 s, hundreds in flight)")
    ap.add_argument("--split-roles", default="random", choices=["random", "2o1e", "1o2e"],
                    help="split layout: 2 orchestrators + 1 executor, 1 + 2, or either at random")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--mean-gap", type=float, default=0.4, help="mean seconds between inputs")
    ap.add_argument("--kill-min", type=float, default=10, help="seconds between kills, at least")
    ap.add_argument("--kill-max", type=float, default=30, help="seconds between kills, at most")
    ap.add_argument("--double-kill", type=float, default=0.15,
                    help="probability of a second kill soon after one")
    ap.add_argument("--pause-every", type=float, default=12,
                    help="mean seconds between SIGSTOPs of a random worker (0: none)")
    ap.add_argument("--pause-for", type=float, default=8,
                    help="a pause lasts 2 s to this many (past the group's session timeout)")
    ap.add_argument("--partition-every", type=float, default=12,
                    help="mean seconds between network cuts of a random worker (0: none; needs "
                         "root and a broker on this machine's loopback: each worker runs in a "
                         "network namespace of its own)")
    ap.add_argument("--cut-for", type=float, default=15,
                    help="a cut lasts 2 s to this many (dropped, blackholed or slowed)")
    ap.add_argument("--broker-pause-every", type=float, default=30,
                    help="mean seconds between SIGSTOPs of the round's embedded broker (0: none; "
                         "not with --bootstrap-servers)")
    ap.add_argument("--broker-pause-for", type=float, default=6,
                    help="a broker pause lasts 2 s to this many (past the group's session timeout)")
    ap.add_argument("--drain-seconds", type=float, default=240,
                    help="at most, for the backlog after the traffic stops")
    ap.add_argument("--concurrency", type=int, default=8, help="each executor's call threads")
    ap.add_argument("--slow-sessions", type=int, default=600,
                    help="+slow rounds: sessions of the slow kind (one model call per input)")
    ap.add_argument("--slow-wave", type=int, default=300,
                    help="+slow rounds: slow inputs sent at once, to as many sessions")
    ap.add_argument("--slow-every", type=float, default=6,
                    help="+slow rounds: seconds between waves")
    ap.add_argument("--slow-delay-min", type=float, default=0.5,
                    help="+slow rounds: the provider's answers take this many seconds at least")
    ap.add_argument("--slow-delay-max", type=float, default=3.0, help="... and at most")
    ap.add_argument("--outcome-wait-ms", type=int, default=None,
                    help="the workers' outcome_wait_ms (default: theirs, 60000)")
    ap.add_argument("--bootstrap-servers", default="",
                    help="a running broker to use (default: an embedded one per round)")
    ap.add_argument("--seed", type=int, default=None, help="the same seed, the same kills and inputs")
    ap.add_argument("--out", default=str(ROOT / ".eddies" / "chaos"), help="results directory")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run the campaign; 0 if every invariant held in every round, else 1."""
    args = parser().parse_args(argv)
    why = netcut.available(args.bootstrap_servers)
    if args.partition_every and why is not None:
        say(f"no network cuts: {why}")
        args.partition_every = 0
    if args.broker_pause_every and args.bootstrap_servers:
        say("no broker pauses: --bootstrap-servers names a broker the campaign does not run")
        args.broker_pause_every = 0
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rundir = Path(args.out) / time.strftime("%Y%m%d-%H%M%S")
    rundir.mkdir(parents=True, exist_ok=True)
    say(f"campaign seed {seed}, results in {rundir}")
    layouts = args.layouts.split(",")
    for layout in layouts:
        base, _, variant = layout.partition("+")
        if base not in BASES or variant not in VARIANTS:
            parser().error(f"--layouts: {layout!r} is not all or split, with or without +slow")
    reports = []
    for k in range(1, args.rounds + 1):
        reports.append(run_round(k, layouts[(k - 1) % len(layouts)], args, rundir, seed))
        say(summary_line(reports[-1]))
        (rundir / "summary.json").write_text(json.dumps(
            {"seed": seed, "args": vars(args), "rounds": [summary_line(r) for r in reports],
             "ok": all(r["ok"] for r in reports)}, indent=1))
    say(f"summary (seed {seed}, {rundir}):")
    for r in reports:
        say(summary_line(r))
    return 0 if all(r["ok"] for r in reports) else 1
