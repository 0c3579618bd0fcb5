"""ReflectionAgent on the LocalRunner with scripted models: a draft passing on the second
try (the refinement prompt holding the task, the previous draft and the feedback), a
loop stopped at max_iterations (NOT_APPROVED), a confidence below confidence_value, a
JSON verdict (and an unreadable one shown to the critic), a drafter with a tool; every
draft and critique an event of the session; replays that call nothing."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import ChatModelSetup, LocalRunner, ReflectionAgent, ReflectionOptions, ResourceType
from eddies.connectors.inspect.replay import replay
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.engine import PlanError, ReActOptions
from eddies.engine.reflection import PassCondition, ReflectionCritique, ReflectionDraft
from eddies.events import ChatMessage, MessageRole, ToolCall


class Script:
    """Replies in turn from ``answers`` (the last one again when they run out); records
    the conversations it was sent."""

    def __init__(self, *answers: str | ChatMessage) -> None:
        self.answers = list(answers)
        self.seen: list[list[ChatMessage]] = []

    def __call__(self, messages: list[ChatMessage], tools: list[Any]) -> ChatMessage | str:
        self.seen.append(messages)
        return self.answers[min(len(self.seen), len(self.answers)) - 1]


def reflection(drafter: Script, critic: Script, drafter_tools: tuple[str, ...] = (),
               **options: Any) -> ReflectionAgent:
    a = ReflectionAgent("essay", drafter="writer", critic="editor", drafter_prompt="You write haiku.",
                        critic_prompt="You judge haiku.", options=ReflectionOptions(**options))
    a.add_resource("draft_conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(drafter))
    a.add_resource("critic_conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(critic))
    a.add_resource("writer", ResourceType.CHAT_MODEL, ChatModelSetup("draft_conn", tools=list(drafter_tools)))
    a.add_resource("editor", ResourceType.CHAT_MODEL, ChatModelSetup("critic_conn"))
    return a


def _loop_events(runner: LocalRunner) -> list[Any]:
    return [e.payload for e in runner.history
            if isinstance(e.payload, ReflectionDraft | ReflectionCritique)]


def _replays_without_calls(runner: LocalRunner, *scripts: Script) -> None:
    seen = [len(s.seen) for s in scripts]
    history = [(n, e) for n, e in enumerate(runner.history) if e.session_id == "s1"]
    report = replay(runner.plan, history, "s1")
    assert report.ok and not report.extra
    assert [len(s.seen) for s in scripts] == seen


def test_a_draft_passes_on_the_second_try() -> None:
    drafter = Script("old pond / frog", "old pond / a frog jumps in / the sound of water")
    critic = Script("REVISE: it has two lines, a haiku has three.",
                    "**APPROVED** - three lines now. confidence: 0.9")
    runner = LocalRunner(reflection(drafter, critic, confidence_value=0.8))
    [out] = runner.run([("s1", "a haiku on a frog")])
    assert out == {"status": "APPROVED", "draft": "old pond / a frog jumps in / the sound of water",
                   "iterations": 2, "confidence": 0.9, "feedback": "three lines now. confidence: 0.9"}
    first, second = drafter.seen
    assert [m.content for m in first] == ["You write haiku.", "a haiku on a frog"]
    refine = second[-1].content
    for part in ("a haiku on a frog", "old pond / frog", "it has two lines, a haiku has three."):
        assert part in refine  # the task, the previous draft and the feedback
    assert critic.seen[0][0].content.startswith("You judge haiku.\n\nStart your answer with APPROVED")
    assert "old pond / frog" in critic.seen[0][1].content
    events = _loop_events(runner)
    assert [type(e).__name__ for e in events] == ["ReflectionDraft", "ReflectionCritique",
                                                  "ReflectionDraft", "ReflectionCritique"]
    assert [e.iteration for e in events] == [1, 1, 2, 2]
    assert [e.passed for e in events if isinstance(e, ReflectionCritique)] == [False, True]
    assert events[2].feedback == "REVISE: it has two lines, a haiku has three."
    _replays_without_calls(runner, drafter, critic)


def test_the_loop_stops_at_max_iterations_with_the_last_draft_not_approved() -> None:
    drafter = Script("draft one", "draft two", "draft three")
    critic = Script("NOT APPROVED: too short.")  # starts with NOT, so it does not pass
    runner = LocalRunner(reflection(drafter, critic, max_iterations=3))
    [out] = runner.run([("s1", "write")])
    assert out["status"] == "NOT_APPROVED" and out["draft"] == "draft three" and out["iterations"] == 3
    assert out["feedback"] == "NOT APPROVED: too short."
    assert len(drafter.seen) == 3 and len(critic.seen) == 3
    finals = [e.final for e in _loop_events(runner) if isinstance(e, ReflectionCritique)]
    assert finals == [False, False, True]
    _replays_without_calls(runner, drafter, critic)


def test_a_pass_with_too_little_confidence_is_no_pass() -> None:
    drafter = Script("draft one", "draft two")
    critic = Script("APPROVED, I think. Confidence: 55%", "APPROVED confidence: 0.7")
    runner = LocalRunner(reflection(drafter, critic, max_iterations=2, confidence_value=0.8))
    [out] = runner.run([("s1", "write")])
    assert out["status"] == "NOT_APPROVED" and out["iterations"] == 2 and out["confidence"] == 0.7
    critiques = [e for e in _loop_events(runner) if isinstance(e, ReflectionCritique)]
    assert [(c.passed, c.confidence) for c in critiques] == [(False, 0.55), (False, 0.7)]
    assert "confidence: C" in critic.seen[0][0].content  # the critic was asked for one
    _replays_without_calls(runner, drafter, critic)


def test_a_json_verdict_and_an_unreadable_one_shown_to_the_critic() -> None:
    drafter = Script("draft one", "draft two")
    critic = Script("looks fine to me",
                    '```json\n{"verdict": "revise", "feedback": "name the frog", "confidence": 0.9}\n```',
                    '{"verdict": "PASS", "feedback": "", "confidence": 0.95}')
    runner = LocalRunner(reflection(drafter, critic, pass_condition="$.verdict == pass",
                                    loop=ReActOptions(max_consecutive_failures=2)))
    [out] = runner.run([("s1", "write")])
    assert out == {"status": "APPROVED", "draft": "draft two", "iterations": 2, "confidence": 0.95,
                   "feedback": ""}
    retried = critic.seen[1]
    assert retried[-1].role is MessageRole.USER
    assert "cannot be used: not a JSON verdict" in retried[-1].content
    assert "name the frog" in drafter.seen[1][-1].content
    _replays_without_calls(runner, drafter, critic)


def test_a_drafter_with_a_tool_runs_a_tool_loop() -> None:
    looked_up: list[str] = []

    def rhyme(word: str) -> str:
        """A word that rhymes with ``word``."""
        looked_up.append(word)
        return "log"

    drafter = Script(ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("t1", "rhyme", {"word": "frog"})]),
                     "a frog on a log")
    critic = Script("APPROVED")
    agent = reflection(drafter, critic, drafter_tools=("rhyme",))
    agent.add_resource("rhyme", ResourceType.TOOL, rhyme)
    runner = LocalRunner(agent)
    [out] = runner.run([("s1", "write")])
    assert out["status"] == "APPROVED" and out["draft"] == "a frog on a log" and out["confidence"] is None
    assert looked_up == ["frog"]
    _replays_without_calls(runner, drafter, critic)


@pytest.mark.parametrize(("condition", "text", "passed"), [
    ("APPROVED", "approved: fine", True),
    ("APPROVED", "APPROVEDISH", False),
    ("APPROVED", "I have APPROVED it", False),
    ("$.ok", '{"ok": true}', True),
    ("$.ok", '{"ok": "true"}', False),
    ("$.review.ok == yes", '{"review": {"ok": "YES"}}', True),
])
def test_pass_conditions(condition: str, text: str, passed: bool) -> None:
    assert PassCondition.parse(condition).judge(text).passed is passed


@pytest.mark.parametrize(("options", "message"), [
    ({"max_iterations": 0}, "max_iterations: expected a positive integer"),
    ({"confidence_value": 1.5}, "confidence_value: expected a number from 0 to 1"),
    ({"pass_condition": "looks good"}, "pass_condition: 'looks good' is neither a keyword"),
    ({"loop": {"max_iterations": 2}}, "loop: expected ReActOptions"),
])
def test_options_are_checked_naming_the_option(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReflectionOptions(**options)


def test_drafter_and_critic_must_be_chat_models() -> None:
    with pytest.raises(PlanError, match=r"ReflectionAgent 'r' \(critic\): model 'nope' is not a CHAT_MODEL"):
        a = ReflectionAgent("r", drafter="llm", critic="nope")
        a.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel())
        a.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
        LocalRunner(a)


def test_options_from_a_declarative_definition() -> None:
    opts = ReflectionOptions.from_mapping({"max_iterations": "2", "confidence_value": "0.75",
                                           "pass_condition": "$.ok", "loop": {"max_iterations": "4"}})
    assert opts == ReflectionOptions(max_iterations=2, confidence_value=0.75, pass_condition="$.ok",
                                     loop=ReActOptions(max_iterations=4))
    assert ReflectionOptions.from_mapping({"confidence_value": "none"}).confidence_value is None
    with pytest.raises(ValueError, match="ReflectionOptions: unknown option 'condition'"):
        ReflectionOptions.from_mapping({"condition": "x"})
