"""The campaign's worker processes: started in a slot, SIGKILLed, reaped, stopped."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eddies.connectors.runtime.settings import Settings

from .agents import PROC_ENV
from .netcut import Namespace, Relay

#: The repository root: workers run there, with ``tools`` on their path for ``chaos.agents``.
ROOT = Path(__file__).resolve().parents[2]
AGENT = "chaos.agents:mixed_agent"
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")
#: A worker's log line of a partition move: its role, what moved, the partitions.
MOVE = re.compile(r"(orchestrator|executor) (assigned partitions|partitions (?:revoked|lost[^:]*):) "
                  r"\[([\d, ]*)\]")


def offline_env() -> dict[str, str]:
    """The environment every worker of the campaign runs with: no network, INFO logs."""
    tools = str(ROOT / "tools")
    path = os.environ.get("PYTHONPATH", "")
    return {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_OFFLINE_MODE": "true",
        "EDDIES_LOG_LEVEL": "INFO",
        "PYTHONPATH": tools if not path else f"{tools}{os.pathsep}{path}",
    }


@dataclass
class Proc:
    """One worker process of a slot (a slot is restarted as a new Proc)."""

    slot: str
    role: str
    popen: subprocess.Popen[bytes]
    log: Path
    started: float
    incarnation: str = ""
    ended: float | None = None
    end: str = ""  # killed | term | crash | term-timeout-killed
    rc: int | None = None
    killed_at: float | None = None
    #: While SIGSTOPped: when it gets SIGCONT. Its pauses: (start, seconds).
    paused_until: float | None = None
    pauses: list[tuple[float, float]] = field(default_factory=list)
    #: Its network namespace (with network cuts on), and its cuts: (start, seconds, mode).
    netns: Namespace | None = None
    cut_until: float | None = None
    cuts: list[tuple[float, float, str]] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.ended is None and self.popen.poll() is None

    def serving(self) -> bool:
        """Alive, not paused and not cut off."""
        return (self.alive() and self.paused_until is None
                and (self.cut_until is None or self.cut_until <= time.time()))

    def away(self) -> list[tuple[float, float]]:
        """(start, seconds) of every time it was paused or cut off."""
        return sorted([*self.pauses, *((t, d) for t, d, _ in self.cuts)])

    def read_incarnation(self) -> str:
        """The process incarnation the worker logged on joining ("" before it joined): the
        name its started marks carry."""
        if not self.incarnation and self.log.exists():
            found = re.search(rf"worker {re.escape(self.slot)}/([0-9a-f]+) joining",
                              self.log.read_text(errors="replace"))
            if found:
                self.incarnation = found.group(1)
        return self.incarnation

    def info(self) -> dict[str, Any]:
        return {"slot": self.slot, "role": self.role, "pid": self.pid, "log": self.log.name,
                "incarnation": self.read_incarnation(), "started": self.started,
                "ended": self.ended, "end": self.end, "rc": self.rc, "killed_at": self.killed_at,
                "pauses": self.pauses, "cuts": self.cuts, "name": self.log.stem,
                "moves": self.moves()}

    def owned_at(self, t: float) -> set[int]:
        """The partitions it owned (in either role) at time ``t``, from its log."""
        own: set[int] = set()
        for stamp, _, move, parts in self.moves():
            if stamp > t:
                break
            if move == "assigned":
                own |= set(parts)
            else:
                own -= set(parts)
        return own

    def moves(self) -> list[tuple[float, str, str, list[int]]]:
        """(time, role: orchestrator | executor, assigned | gone, partitions) of each
        partition move its log tells, in order."""
        rows: list[tuple[float, str, str, list[int]]] = []
        if not self.log.exists():
            return rows
        for line in self.log.read_text(errors="replace").splitlines():
            found = MOVE.search(line)
            stamp = log_time(line) if found else None
            if found and stamp is not None:
                move = "assigned" if found.group(2) == "assigned partitions" else "gone"
                rows.append((stamp, found.group(1), move, sorted(_numbers(found.group(3)))))
        return rows


def log_time(line: str) -> float | None:
    """The epoch time a worker's log line starts with, if it does."""
    found = LOG_TIME.match(line)
    if found is None:
        return None
    return time.mktime(time.strptime(found.group(1), "%Y-%m-%d %H:%M:%S")) + int(found.group(2)) / 1000


def _numbers(text: str) -> set[int]:
    return {int(x) for x in text.split(",") if x.strip()}


class Fleet:
    """Every worker process of a round, alive or not."""

    def __init__(self, settings: Settings, rundir: Path, effects: Path, concurrency: int,
                 extra_env: dict[str, str] | None = None, relay: Relay | None = None,
                 provider_relay: Relay | None = None) -> None:
        self.settings = settings
        #: With network cuts: each worker in a namespace of its own, its traffic through this.
        self.relay = relay
        #: And its slow provider's traffic (a +slow round) through this one, never cut: a
        #: cut is of the broker (the group and the journal), while its model calls go on.
        self.provider_relay = provider_relay
        self.rundir = rundir
        self.effects = effects
        self.concurrency = concurrency
        self.extra_env = extra_env or {}
        self.procs: list[Proc] = []

    def start(self, slot: str, role: str) -> Proc:
        logf = self.rundir / f"{len(self.procs) + 1:03d}-{slot}-{role}.log"
        env = dict(os.environ, **offline_env(), **self.extra_env, CHAOS_EFFECTS=str(self.effects),
                   **{PROC_ENV: logf.stem}, EDDIES_INSTANCE_ID=slot,
                   EDDIES_EXECUTOR_CONCURRENCY=str(self.concurrency))
        s = self.settings
        command = [sys.executable, "-m", "eddies", "worker", "--app", s.app,
                   "--bootstrap-servers", s.bootstrap_servers, "--partitions", str(s.partitions),
                   "--agent", AGENT, "--role", role]
        netns = None
        if self.relay is not None:
            port = int(s.bootstrap_servers.rpartition(":")[2])
            also = (() if self.provider_relay is None else
                    ((self.provider_relay.broker_port, self.provider_relay.listen(logf.stem)),))
            netns = Namespace.make(port, self.relay.listen(logf.stem), also)
            command = netns.wrap(command)
        with logf.open("ab") as out:
            popen = subprocess.Popen(command, cwd=str(ROOT), env=env, stdout=out,
                                     stderr=subprocess.STDOUT)
        proc = Proc(slot, role, popen, logf, time.time(), netns=netns)
        self.procs.append(proc)
        return proc

    def cut(self, proc: Proc, mode: str, seconds: float) -> None:
        """Cut ``proc`` off the broker for ``seconds`` (see netcut.py)."""
        assert self.relay is not None
        self.relay.cut(proc.log.stem, mode, seconds)
        proc.cuts.append((time.time(), round(seconds, 2), mode))
        proc.cut_until = time.time() + seconds

    def close_namespaces(self) -> None:
        """End the namespaces of processes that ended."""
        for p in self.procs:
            if p.netns is not None and not p.alive():
                p.netns.close()
                p.netns = None

    def serving(self) -> list[Proc]:
        """The processes alive, not paused and not cut off."""
        return [p for p in self.procs if p.serving()]

    def alive(self) -> list[Proc]:
        """The processes alive (paused or cut off or not)."""
        return [p for p in self.procs if p.alive()]

    def pause(self, proc: Proc, seconds: float) -> None:
        """SIGSTOP ``proc`` for ``seconds`` (longer than a session timeout: its group goes on
        without it, and it wakes up believing it still owns its partitions)."""
        proc.popen.send_signal(signal.SIGSTOP)
        proc.pauses.append((time.time(), round(seconds, 2)))
        proc.paused_until = time.time() + seconds

    def resume_due(self, everyone: bool = False) -> list[Proc]:
        """SIGCONT the paused processes whose pause is over (with ``everyone``, all)."""
        woken = []
        for p in self.procs:
            if p.paused_until is not None and (everyone or p.paused_until <= time.time()):
                p.paused_until = None
                if p.alive():
                    p.popen.send_signal(signal.SIGCONT)
                    woken.append(p)
        return woken

    def joined(self) -> bool:
        """Whether every process has joined (logged its incarnation)."""
        return all(p.read_incarnation() for p in self.procs)

    def kill(self, proc: Proc) -> None:
        proc.read_incarnation()
        t = time.time()
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait(10)
        proc.killed_at = proc.ended = t
        proc.end = "killed"
        proc.rc = proc.popen.returncode

    def reap(self) -> list[Proc]:
        """The processes that exited on their own since the last call."""
        crashed = []
        for p in self.procs:
            if p.ended is None and p.popen.poll() is not None:
                p.ended = time.time()
                p.end = "crash"
                p.rc = p.popen.returncode
                crashed.append(p)
        return crashed

    def stop_all(self) -> None:
        """SIGTERM to every live process, then wait for each (a graceful stop)."""
        self.resume_due(everyone=True)
        for p in [p for p in self.procs if p.alive()]:
            p.read_incarnation()
            p.popen.send_signal(signal.SIGTERM)
        for p in self.procs:
            if p.ended is not None:
                continue
            try:
                p.rc = p.popen.wait(90)
                p.end = "term"
            except subprocess.TimeoutExpired:
                p.popen.kill()
                p.rc = p.popen.wait(10)
                p.end = "term-timeout-killed"
            p.ended = time.time()
