"""The demo's ReAct travel helper and reflection tagline writer on the LocalRunner: the
answers ``eddies demo`` prints, the parallel weather calls, the draft sent back once, the
trace lines that show them, and replays that call nothing."""

from __future__ import annotations

import json
import re

import pytest

from eddies import LocalRunner
from eddies.connectors.inspect.replay import replay
from eddies.connectors.inspect.summary import describe
from eddies.demo import (
    TAGLINE_PROMPTS,
    TRAVEL_PROMPTS,
    tagline_agent,
    travel_agent,
    weather,
)
from eddies.engine.reflection import ReflectionCritique, ReflectionDraft
from eddies.events import CallKind, DurableCallRequest, DurableCallResult

TRAVEL_ANSWER = ("Oslo: rain, up to 9 C, so pack a raincoat; "
                 "Lisbon: sun, up to 24 C, so pack sunglasses.")
#: The same with the MCP time server's local times (the clock the demo has by default).
TRAVEL_ANSWER_TIMED = re.compile(r"Oslo \(now \d\d:\d\d\): rain, up to 9 C, so pack a raincoat; "
                                 r"Lisbon \(now \d\d:\d\d\): sun, up to 24 C, so pack sunglasses\.")
TAGLINE = "Opens at 5 am: the bakery worth waking up for."


def _replays(runner: LocalRunner, session: str) -> bool:
    history = [(n, e) for n, e in enumerate(runner.history) if e.session_id == session]
    return replay(runner.plan, history, session).ok


def test_the_travel_helper_asks_for_the_weather_of_each_city_then_answers() -> None:
    runner = LocalRunner(travel_agent(clock=False))
    assert runner.run(TRAVEL_PROMPTS) == [TRAVEL_ANSWER]
    requests = [e.payload for e in runner.history if isinstance(e.payload, DurableCallRequest)]
    tools = [r for r in requests if r.kind is CallKind.TOOL]
    assert [(r.target, json.loads(r.args)["kwargs"]) for r in tools] == [
        ("weather", {"city": "Oslo"}), ("weather", {"city": "Lisbon"})]
    kinds = [r.kind for r in requests if r.kind is not CallKind.TIMER]
    assert kinds == [CallKind.CHAT_MODEL, CallKind.TOOL, CallKind.TOOL, CallKind.CHAT_MODEL]
    # In parallel: both tool calls are issued before either result comes back.
    asked = [n for n, e in enumerate(runner.history)
             if isinstance(e.payload, DurableCallRequest) and e.payload.kind is CallKind.TOOL]
    answered = [n for n, e in enumerate(runner.history)
                if isinstance(e.payload, DurableCallResult) and e.payload.kind is CallKind.TOOL]
    assert max(asked) < min(answered)
    trace = [describe(e) for e in runner.history]
    assert any('TOOL weather(city="Oslo")' in line for line in trace)
    assert any('OK asks for weather(city="Oslo"), weather(city="Lisbon")' in line for line in trace)
    assert _replays(runner, TRAVEL_PROMPTS[0][0])


def test_the_travel_helper_with_no_known_city_answers_without_tools() -> None:
    runner = LocalRunner(travel_agent(clock=False))
    [answer] = runner.run([("s1", "Where should I go?")])
    assert answer.startswith("I know the weather of Oslo, Lisbon")
    assert not any(isinstance(e.payload, DurableCallRequest) and e.payload.kind is CallKind.TOOL
                   for e in runner.history)
    assert weather(" oslo ") == {"city": "Oslo", "sky": "rain", "high_c": 9}


def test_the_tagline_writer_is_approved_on_its_second_draft() -> None:
    runner = LocalRunner(tagline_agent())
    assert runner.run(TAGLINE_PROMPTS) == [{
        "status": "APPROVED", "draft": TAGLINE, "iterations": 2, "confidence": 0.9,
        "feedback": "specific and short.\nconfidence: 0.9"}]
    loop = [e.payload for e in runner.history if isinstance(e.payload, ReflectionDraft | ReflectionCritique)]
    drafts = [p for p in loop if isinstance(p, ReflectionDraft)]
    critiques = [p for p in loop if isinstance(p, ReflectionCritique)]
    assert [d.draft for d in drafts] == ["The bakery you deserve.", TAGLINE]
    assert [(c.iteration, c.passed, c.confidence) for c in critiques] == [(1, False, None), (2, True, 0.9)]
    assert critiques[0].feedback == "REVISE: too generic. Say what sets it apart: 'opens at 5 am'."
    assert drafts[1].feedback == critiques[0].feedback  # the second draft answers it
    trace = [describe(e) for e in runner.history]
    assert any("draft 1: \"The bakery you deserve.\"" in line for line in trace)
    assert any("draft 1 failed (no confidence): \"REVISE: too generic." in line for line in trace)
    assert any("draft 2 passed (confidence 0.9)" in line for line in trace)
    assert _replays(runner, TAGLINE_PROMPTS[0][0])


def test_a_task_without_a_detail_is_approved_at_once() -> None:
    [out] = LocalRunner(tagline_agent()).run([("s1", "Write a tagline for a bookshop.")])
    assert (out["status"], out["iterations"], out["draft"]) == ("APPROVED", 1, "The bookshop you deserve.")


def test_the_travel_helper_asks_the_mcp_time_server_too() -> None:
    pytest.importorskip("mcp_server_time", reason="the MCP time server is not installed")
    runner = LocalRunner(travel_agent(clock=True))
    [answer] = runner.run(TRAVEL_PROMPTS)
    assert TRAVEL_ANSWER_TIMED.fullmatch(answer), answer
    tools = [(p.target, json.loads(p.args)["kwargs"]) for e in runner.history
             if isinstance(p := e.payload, DurableCallRequest) and p.kind is CallKind.TOOL]
    assert ("get_current_time", {"timezone": "Europe/Lisbon"}) in tools
    assert _replays(runner, TRAVEL_PROMPTS[0][0])


def test_the_support_desk_never_records_or_sends_a_customers_email_or_card() -> None:
    from eddies.demo import support_agent

    runner = LocalRunner(support_agent())
    [answer] = runner.run([("ann", "Order o-17: my card 4111 1111 1111 1111 was charged twice. "
                                   "Mail me at ann.lee@example.com")])
    assert answer == ("Sorry about order o-17, Ann Lee: it was charged twice. We refunded the card [card] "
                      "and wrote to [email].")
    for ev in runner.history:  # the input, the model's and the tool's calls and results, the answer
        text = repr(ev.payload)
        assert not any(s in text for s in ("4111 1111", "5555 5555", "ann.lee@")), text
    assert _replays(runner, "ann")
