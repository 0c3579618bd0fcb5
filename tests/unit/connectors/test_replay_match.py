"""Replay's matching of recorded and recomputed events, and its field diffs (no broker:
histories from the LocalRunner)."""

from __future__ import annotations

from typing import Any

from eddies import LocalRunner
from eddies.connectors.inspect.replay import replay
from eddies.demo import PROMPTS, Calculator, calculator_agent
from eddies.engine import AgentPlan, action
from eddies.events import ChatResponseEvent, CustomEvent, InputEvent, OutputEvent


class Answering(Calculator):
    """The calculator, its answer worded differently: only its outputs change."""

    @action(ChatResponseEvent)
    def answer(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=f"Answer: {event.response.content}"))


class Noting(Calculator):
    """The calculator, noting each answer in an event of its own before answering."""

    @action(ChatResponseEvent)
    def answer(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.send_event(CustomEvent(type_name="Noted", attributes={"chars": len(event.response.content)}))
        ctx.send_event(OutputEvent(output=event.response.content))


def _like_calculator(agent: Calculator) -> Calculator:
    agent.resources = list(calculator_agent().resources)
    return agent


def _history() -> list[tuple[int, Any]]:
    runner = LocalRunner(calculator_agent())
    runner.run(PROMPTS)
    return [(i, ev) for i, ev in enumerate(e for e in runner.history if e.session_id == "alice")]


def test_the_same_agent_recomputes_every_event() -> None:
    history = _history()
    report = replay(AgentPlan.compile(calculator_agent()), history, "alice")
    assert report.ok and len(report.steps) == len(history)
    assert [s.status for s in report.steps] == ["same"] * len(history)


def test_a_changed_action_shows_exactly_its_changed_events_field_by_field() -> None:
    history = _history()
    report = replay(AgentPlan.compile(_like_calculator(Answering("calculator"))), history, "alice")
    changed = report.mismatches
    outputs = [(o, e) for o, e in history if isinstance(e.payload, OutputEvent)]
    assert len(outputs) == 2  # alice asked twice
    assert [(s.status, s.recorded) for s in changed] == [("changed", e) for _, e in outputs]
    for step, (_, ev) in zip(changed, outputs, strict=True):
        diff = {path: (was, now) for path, was, now in step.differences()}
        assert diff.pop("payload.output") == (ev.payload.output, f"Answer: {ev.payload.output}")
        assert diff == {}  # same place (so the same id): nothing else differs
        assert step.recomputed is not None and step.recomputed.seq == ev.seq
    assert sum(s.status == "same" for s in report.steps) == len(history) - 2


def test_an_added_event_is_new_and_the_events_after_it_move() -> None:
    history = _history()
    report = replay(AgentPlan.compile(_like_calculator(Noting("calculator"))), history, "alice")
    new = [s for s in report.steps if s.status == "new"]
    assert [s.recomputed.type for s in new if s.recomputed] == ["Noted", "Noted"]
    assert all(s.recorded is None and s.differences() == [] for s in new)
    first_new = new[0].seq
    # Everything after the first note says the same one step later (two after the second):
    # matched by cause and type through the moved ids, not reported as changed.
    assert {s.status for s in report.steps if s.seq < first_new} == {"same"}
    moved = [s for s in report.steps if s.status == "moved"]
    assert [s.seq for s in moved] == [s.seq for s in report.steps if s.recorded and s.seq >= first_new]
    for step in moved:
        assert step.recomputed and step.recorded
        shift = 1 if step.recorded.run == 1 else 2 if step.recorded.type == "OutputEvent" else 1
        assert step.recomputed.seq == step.recorded.seq + shift
        assert {p for p, _, _ in step.differences()} <= {"event_id", "seq", "causation_id",
                                                         "payload.request_id"}  # ids only
    assert not [s for s in report.steps if s.status in ("missing", "changed")]


def test_a_removed_event_is_missing() -> None:
    runner = LocalRunner(_like_calculator(Noting("calculator")))
    runner.run(PROMPTS)
    history = [(i, ev) for i, ev in enumerate(e for e in runner.history if e.session_id == "bob")]
    report = replay(AgentPlan.compile(calculator_agent()), history, "bob")
    missing = [s for s in report.steps if s.status == "missing"]
    assert [s.recorded.type for s in missing if s.recorded] == ["Noted"]


def test_a_session_with_sub_agents_recomputes_every_event() -> None:
    """A sub-agent's InputEvent is the machine's own (in its scope): replay re-applies only
    what came from outside, so the child runs once, as it did."""
    from eddies.demo import PLANNER_PROMPTS, planner_agent

    runner = LocalRunner(planner_agent())
    session, prompt = PLANNER_PROMPTS[0]
    runner.run([(session, prompt)])
    history = list(enumerate(runner.history))
    assert any(ev.scope and isinstance(ev.payload, InputEvent) for _, ev in history)
    report = replay(runner.plan, history, session)
    assert report.ok, [(s.status, s.seq) for s in report.mismatches]
    assert len(report.steps) == len(history)
