"""A trace's lines stay lines: whatever a model, a person or a tool sends, ``eddies tail``,
``eddies replay`` and the web view's timeline show it cut to one short line."""

from __future__ import annotations

from typing import Any

from eddies import LocalRunner
from eddies.connectors.inspect.summary import describe, detail_text
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.demo import calculator_agent
from eddies.events import AgentEvent, ApprovalRequestEvent, ChatResponseEvent, SignalEvent

LONG = "a reply of many words, spread over lines\n" * 40
#: The envelope's columns (seq, run, type, action) and the longest detail: a request's 70.
LINE = 8 + 6 + 20 + 19 + 70


def _long_reply(messages: list[Any], tools: list[Any]) -> str:
    return LONG


def test_a_long_model_reply_is_one_short_line() -> None:
    runner = LocalRunner(calculator_agent(ScriptedChatModel(_long_reply), tools=False))
    assert runner.run([("s1", "hi")]) == [LONG]
    [reply] = [e for e in runner.history if isinstance(e.payload, ChatResponseEvent)]
    assert detail_text(reply).startswith('"a reply of many words, spread over lines')
    for line in map(describe, runner.history):
        assert "\n" not in line and len(line) <= LINE and line == line.rstrip(), line


def test_signals_and_approvals_are_cut_too() -> None:
    big = {"note": "x" * 500, "items": list(range(200))}
    signal = AgentEvent.external("s1", SignalEvent(name="approval:c1", value=big),
                                 event_id="e1", timestamp=0)
    asked = AgentEvent.external("s1", ApprovalRequestEvent(
        signal="approval:c1", tool="pay", tool_call_id="c1", arguments=big), event_id="e2", timestamp=0)
    for ev in (signal, asked):
        text = detail_text(ev)
        assert "approval:c1" in text and text.count("x") < 100, text
        assert len(describe(ev)) <= LINE + len("approval:c1 = ") + len(" awaits approval:c1")
