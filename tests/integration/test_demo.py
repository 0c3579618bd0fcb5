"""``eddies demo`` as a user runs it: on the embedded broker, all six parts answer and
replay (or evaluate), and the command exits 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_demo_agents import TAGLINE, TRAVEL_ANSWER_TIMED

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_runs_its_six_parts() -> None:
    env = {k: v for k, v in os.environ.items()  # no EDDIES_ setting: the embedded broker
           if not k.startswith("EDDIES_") or k == "EDDIES_RESULT_KEY"}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true", COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "eddies", "demo"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    out = proc.stdout
    for part in ("1/6 calculator", "2/6 travel helper", "3/6 tagline writer", "4/6 trip planner",
                 "5/6 travel guide", "6/6 evaluation"):
        assert part in out
    assert "<- alice (run 2): The result is 15." in out
    [travel] = [line for line in out.splitlines() if line.startswith("<- carol (run 1): ")]
    assert TRAVEL_ANSWER_TIMED.fullmatch(travel.removeprefix("<- carol (run 1): ")), travel
    assert 'TOOL get_current_time(timezone="Europe/Oslo")' in out  # the MCP tool
    assert "status: APPROVED" in out and f"draft: {TAGLINE}" in out and "iterations: 2" in out
    assert 'TOOL weather(city="Lisbon")' in out
    assert "ReflectionCritique" in out and "draft 1 failed" in out
    [planned] = [line for line in out.splitlines() if line.startswith("<- erin (run 1): ")]
    assert planned.endswith("Tagline: Starts at dawn: the trip to Tokyo worth waking up for."), planned
    assert "SubagentCallEvent" in out and "SubagentResultEvent" in out
    assert "| travel InputEvent" in out and "| tagline ReflectionCritique" in out  # nested under the call
    # The guide answers citing the passage it used; its trace and tree show the retrieval.
    assert "<- frank (run 1):" in out and "citations: [{'n': 1, 'id': 'lisbon-hostels'" in out
    assert 'VECTOR_STORE guide query "Where can I sleep cheaply in Lisbon?"' in out
    assert "OK 3 documents: lisbon-hostels" in out
    assert 'retrieval guide query "Where can I sleep cheaply in Lisbon?"' in out  # the tree
    for session in ("alice", "carol", "dave", "erin", "frank"):
        assert f"Replay of session {session!r}" in out
    assert out.count("replay: ids match") == 5
    assert "DIFFERS" not in out and "MISMATCH" not in out
    # The evaluation of the brief travel helper on the three recorded travel sessions, as
    # counted by hand: its answers all differ from the recorded ones and give no
    # temperature; the judge passes all six answers (each names every city's gear); each
    # session had 2 model calls and 4, 2 and 4 tool calls (weather and time for each city).
    evaluation = out[out.index("6/6 evaluation"):]
    assert "recorded (baseline): 3 cases, 0 without an answer, 0 calls refused" in evaluation
    assert "brief: 3 cases, 0 without an answer, 0 calls refused" in evaluation
    brief = evaluation[evaluation.index("brief: 3 cases"):]
    assert re.search(r"equals +0\.0% +-1\.000 vs baseline \[-1\.000, -1\.000\] \*", brief)
    assert re.search(r"temperatures +0\.0% +-1\.000", brief)
    assert re.search(r"judge +100\.0% +\+0\.000", brief)
    assert "2.00 model calls, 3.33 tool calls a case" in brief
    [page] = re.findall(r"HTML report \(each session side by side\): (\S+)", evaluation)
    assert Path(page).read_text().count("<details class=case") == 3
    assert re.search(r"Kept as evaluation \d{8}T\d{6}Z-[0-9a-f]{6} in \S+\.evaluations", evaluation)
