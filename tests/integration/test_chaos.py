"""Short rounds of the kill -9 campaign (``python -m chaos``, ``make chaos``): its workers
SIGKILLed and restarted, SIGSTOPped past their session timeout and cut off the broker under
traffic, or the broker itself SIGSTOPped, every invariant holds.

The campaign's checks themselves are tested on crafted evidence in
tests/unit/tools/test_chaos_checks.py; this runs the real thing, briefly: one round of
the split layout (orchestrators and executors apart), about a minute; one with the slow
provider (hundreds of model calls in flight when workers die), about a minute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Rates and fault schedules in seconds: run alone (make pytest runs the serial ones last).
pytestmark = [pytest.mark.integration, pytest.mark.serial]
ROOT = Path(__file__).resolve().parents[2]


def test_a_short_chaos_round_keeps_every_invariant(bootstrap: str, tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    from chaos import netcut

    env = dict(os.environ, PYTHONPATH=str(ROOT / "tools"))
    cuts = netcut.available(bootstrap) is None
    proc = subprocess.run(
        [sys.executable, "-m", "chaos", "--rounds", "1", "--layouts", "split", "--round-seconds", "40",
         "--kill-min", "8", "--kill-max", "12", "--double-kill", "0", "--sessions", "8",
         "--mean-gap", "0.3", "--outcome-wait-ms", "15000", "--drain-seconds", "150", "--seed", "5",
         "--pause-every", "8", "--partition-every", "8" if cuts else "0",
         "--bootstrap-servers", bootstrap, "--out", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    reports = list(tmp_path.glob("*/round-1-split/report.json"))
    assert len(reports) == 1, (proc.stdout[-3000:], proc.stderr[-3000:])
    report_file = reports[0]
    report = json.loads(report_file.read_text())
    failed = {name: report[name] for name in ("exactly_one_answer", "side_effects_once",
                                              "no_stuck_session", "no_crash_no_dead_letter",
                                              "model_calls_not_asked_after_outcome")
              if not report[name]["ok"]}
    assert proc.returncode == 0 and not failed, (proc.stdout[-3000:], proc.stderr[-3000:], failed)
    # It did what it is for: workers killed mid-traffic, side effects run, every input answered.
    # Seed 5's plan (the kills follow from the seed alone): one orchestrator and two
    # executors; executors killed at about 5, 15 and 37 s, the orchestrator at 26 s.
    assert {k["role"] for k in report["kills"]} == {"executor", "orchestrator"}, report["kills"]
    assert report["inputs"] >= 60 and report["exactly_one_answer"]["answered"] == report["inputs"]
    assert report["side_effects_once"]["effect_executions"] >= report["inputs"]
    # And it stood workers still, and (where it can: root, a broker on loopback) cut them off.
    assert report["pauses"] >= 1 and (report["cuts"] >= 1 or not cuts), report


def test_a_slow_provider_round_keeps_every_invariant_with_hundreds_of_calls_in_flight(
        bootstrap: str, tmp_path: Path) -> None:
    # Waves of 300 one-call inputs every 6 s to a provider answering after 0.5-3 s: the
    # workers' model calls are tasks on their executors' event loops, hundreds at once,
    # while workers are killed, paused and cut off the broker.
    sys.path.insert(0, str(ROOT / "tools"))
    from chaos import netcut

    env = dict(os.environ, PYTHONPATH=str(ROOT / "tools"))
    cuts = netcut.available(bootstrap) is None
    proc = subprocess.run(
        [sys.executable, "-m", "chaos", "--rounds", "1", "--layouts", "all+slow", "--round-seconds", "30",
         "--kill-min", "8", "--kill-max", "12", "--double-kill", "0", "--sessions", "8",
         "--mean-gap", "0.3", "--outcome-wait-ms", "15000", "--drain-seconds", "150", "--seed", "5",
         "--pause-every", "8", "--partition-every", "8" if cuts else "0",
         "--bootstrap-servers", bootstrap, "--out", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    reports = list(tmp_path.glob("*/round-1-all+slow/report.json"))
    assert len(reports) == 1, (proc.stdout[-3000:], proc.stderr[-3000:])
    report = json.loads(reports[0].read_text())
    failed = {name: report[name] for name in ("exactly_one_answer", "side_effects_once",
                                              "no_stuck_session", "no_crash_no_dead_letter",
                                              "model_calls_not_asked_after_outcome")
              if not report[name]["ok"]}
    assert proc.returncode == 0 and not failed, (proc.stdout[-3000:], proc.stderr[-3000:], failed)
    asked = report["model_calls_not_asked_after_outcome"]
    # Five waves of 300 (at 0, 6, ..., 24 s), each answered, each call's outcome journaled.
    assert asked["slow_inputs"] >= 1200 and report["exactly_one_answer"]["answered"] == report["inputs"]
    assert asked["calls_asked"] == asked["slow_inputs"] == asked["asked_with_ok_outcome"], asked
    # Hundreds in flight at once (about 450 when measured), and many held when a worker died
    # (seed 5 kills three times; about 300 and 150 were held at the first two).
    held = [k["provider_in_flight"] or 0 for k in report["kills"]]
    assert report["provider"]["peak"] >= 200 and max(held) >= 100, (report["provider"], held)
    assert report["pauses"] >= 1 and (report["cuts"] >= 1 or not cuts), report


def test_the_broker_stood_still_under_traffic_keeps_every_invariant(tmp_path: Path) -> None:
    # The round's own embedded broker, SIGSTOPped for 2-5 s about every 6 s: every worker's
    # requests wait, and the coordinator, when it goes on, finds every member's session
    # expired at once (all partitions move, every worker drops what it held unwritten).
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tools"))
    proc = subprocess.run(
        [sys.executable, "-m", "chaos", "--rounds", "1", "--layouts", "all", "--round-seconds", "30",
         "--sessions", "8", "--mean-gap", "0.3", "--drain-seconds", "150", "--seed", "7",
         "--kill-min", "1000", "--kill-max", "1000", "--pause-every", "0", "--partition-every", "0",
         "--broker-pause-every", "6", "--broker-pause-for", "5", "--out", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    reports = list(tmp_path.glob("*/round-1-all/report.json"))
    assert len(reports) == 1, (proc.stdout[-3000:], proc.stderr[-3000:])
    report = json.loads(reports[0].read_text())
    failed = {name: report[name] for name in ("exactly_one_answer", "side_effects_once",
                                              "no_stuck_session", "no_crash_no_dead_letter",
                                              "model_calls_not_asked_after_outcome")
              if not report[name]["ok"]}
    assert proc.returncode == 0 and not failed, (proc.stdout[-3000:], failed)
    assert report["broker_pauses"] >= 2 and not report["kills"], report
    assert report["inputs"] >= 40 and not report["feeder_errors"], report
    assert report["exactly_one_answer"]["answered"] == report["inputs"]
