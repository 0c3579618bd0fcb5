"""Commands that check or run a recorded session again (replay, fork, reprocess, the web
view) and were not told which agent to use: a session another agent recorded is refused,
naming that agent, rather than compared with the demo's calculator (the default agent)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from eddies.connectors.inspect.replay import OtherAgentError, load_history, replay_session
from eddies.connectors.inspect.sessions import replay_view
from eddies.connectors.runtime.client import send_input
from eddies.connectors.runtime.settings import Settings, load_settings
from eddies.demo import calculator_agent, tagline_agent
from eddies.engine import AgentPlan
from tests.integration.workers import ROOT, answers, start_worker, stop_worker, wait_until

pytestmark = pytest.mark.integration

TAGLINE = "eddies.demo:tagline_agent"


@pytest.fixture(scope="module")
def recorded(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Session ``s1`` of the demo's tagline writer (agent 'tagline'), answered."""
    settings = load_settings(env={}, overrides={
        "bootstrap_servers": bootstrap, "app": f"r{uuid.uuid4().hex[:10]}", "partitions": 2})
    log = tmp_path_factory.mktemp("recorded-agent") / "worker.log"
    worker = start_worker(settings, TAGLINE, log)
    try:
        send_input(settings, "s1", "a tagline for a bakery")
        wait_until("the tagline", lambda: answers(settings), worker, log)
    finally:
        stop_worker(worker)
    return settings


#: The console script a user runs (``python -m eddies`` would put the current folder on the path).
EDDIES = str(Path(sys.executable).parent / "eddies")


def _eddies(settings: Settings, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EDDIES_AGENT"}
    return subprocess.run(
        [EDDIES, *args, "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers],
        cwd=cwd, capture_output=True, text=True, timeout=120, env=dict(env, COLUMNS="200"))


def test_replay_without_an_agent_names_the_one_that_recorded_the_session(recorded: Settings) -> None:
    done = _eddies(recorded, "replay", "--session", "s1")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "session 's1' was recorded by agent 'tagline'" in done.stderr
    assert "not 'calculator'" in done.stderr and "--agent" in done.stderr
    assert "changed" not in done.stdout  # no comparison with the calculator was printed
    named = _eddies(recorded, "replay", "--session", "s1", "--agent", TAGLINE)
    assert named.returncode == 0, named.stdout + named.stderr
    assert "every id recomputed identically" in named.stdout
    # An agent named on purpose is compared, whatever recorded the session.
    other = _eddies(recorded, "replay", "--session", "s1", "--agent", "eddies.demo:calculator_agent")
    assert other.returncode == 1 and "recorded by" not in other.stderr


def test_fork_and_reprocess_without_an_agent_write_nothing(recorded: Settings) -> None:
    done = _eddies(recorded, "fork", "--session", "s1", "--at-seq", "1", "--to", "s1-fork")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "recorded by agent 'tagline'" in done.stderr
    assert load_history(recorded, "s1-fork") == []
    target = f"{recorded.app}-again"
    done = _eddies(recorded, "reprocess", "--from-offset", "0:0,1:0", "--to-app", target)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "recorded by agent 'tagline'" in done.stderr
    forked = _eddies(recorded, "fork", "--session", "s1", "--at-seq", "1", "--to", "s1-fork",
                     "--agent", TAGLINE)
    assert forked.returncode == 0, forked.stdout + forked.stderr
    assert load_history(recorded, "s1-fork")


def test_a_fork_of_a_session_that_does_not_exist_says_so(recorded: Settings) -> None:
    done = _eddies(recorded, "fork", "--session", "nobody", "--at-seq", "4", "--to", "x",
                   "--agent", TAGLINE)
    assert done.returncode == 2
    assert "there is no session 'nobody'" in done.stderr and "steps 1 to 0" not in done.stderr


def test_the_library_and_the_web_view_check_the_recording_agent_when_asked(recorded: Settings) -> None:
    calculator = AgentPlan.compile(calculator_agent())
    with pytest.raises(OtherAgentError, match="recorded by agent 'tagline'"):
        replay_session(recorded, calculator, "s1", same_agent=True)
    view = replay_view(recorded, calculator, "s1", same_agent=True)
    assert view["ok"] is False and "recorded by agent 'tagline'" in view["error"]
    assert replay_session(recorded, AgentPlan.compile(tagline_agent()), "s1", same_agent=True).ok


def test_a_module_of_the_current_folder_is_an_agent(recorded: Settings, tmp_path: Path) -> None:
    """``--agent my_module:my_agent`` run in the folder holding my_module.py (the tutorial's
    way) finds it; so does ``eddies check``. Through the console script: ``python -m``
    would put the folder on the path itself."""
    (tmp_path / "my_module.py").write_text(
        "from eddies.demo import tagline_agent\n\nmy_agent = tagline_agent\n")
    done = _eddies(recorded, "replay", "--session", "s1", "--agent", "my_module:my_agent", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    check = subprocess.run([EDDIES, "check", "my_module:my_agent"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr
    assert "agent tagline (version" in check.stdout and "valid" in check.stdout
    missing = subprocess.run([EDDIES, "check", "my_module:nope"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "has no attribute 'nope'" in missing.stderr
