"""Human approval of tool calls (``requires_approval``): the request a person sees, the
tool run only once approved, rejections and timeouts as tool errors the model sees,
crashes while waiting, and replay."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import Agent, InputEvent, LocalRunner, OutputEvent, action
from eddies.connectors.inspect.replay import replay
from eddies.engine import FunctionTool, PlanError, ResourceType, approval
from eddies.events import ApprovalRequestEvent, CallKind, DurableCallRequest
from tests.agents import RAN, refund, shop_agent


@pytest.fixture(autouse=True)
def _count() -> None:
    RAN.clear()


def _started(agent: Agent, session: str = "s1") -> tuple[LocalRunner, ApprovalRequestEvent]:
    runner = LocalRunner(agent)
    runner.submit(session, "look up and refund o-1", timestamp=1_000)
    runner.run_until_waiting()
    [ask] = runner.approval_requests(session)
    return runner, ask


def _replays_identically(runner: LocalRunner, session: str) -> None:
    history = [(n, e) for n, e in enumerate(runner.history) if e.session_id == session]
    report = replay(runner.plan, history, session)
    assert report.ok and not report.extra, (report.mismatches, report.extra)


def test_an_approved_call_runs_once_after_the_approval() -> None:
    runner, ask = _started(shop_agent())
    # The request names the tool, its arguments, the signal and the deadline.
    assert ask.tool == "refund" and ask.tool_call_id == "t2"
    assert ask.arguments == {"order": "o-1", "amount": 5}
    assert ask.signal.startswith("approval:s1:r1:") and ask.deadline == 1_000 + 60_000
    # Everything else ran meanwhile; the tool that needs approval did not.
    assert RAN == {"lookup": 1} and runner.outputs == []
    runner.approve("s1", ask.signal)
    runner.run_until_idle()
    assert RAN == {"lookup": 1, "refund": 1}
    assert runner.outputs_for("s1") == ['"o-1: paid" | "refunded 5 on o-1"']
    _replays_identically(runner, "s1")


def test_a_rejected_call_is_a_tool_error_the_model_sees() -> None:
    runner, ask = _started(shop_agent())
    runner.reject("s1", ask.signal, "refunds need a ticket")
    runner.run_until_idle()
    assert RAN == {"lookup": 1}
    [answer] = runner.outputs_for("s1")
    assert answer.startswith('"o-1: paid" | error: ApprovalRejected: a person rejected this call '
                             "of tool 'refund': refunds need a ticket")
    _replays_identically(runner, "s1")


def test_no_answer_by_the_deadline_is_a_timeout_error() -> None:
    runner, ask = _started(shop_agent(5_000))
    runner.run_until_idle()  # logical time jumps to the deadline
    assert RAN == {"lookup": 1}
    [answer] = runner.outputs_for("s1")
    assert "error: ApprovalTimeout: tool 'refund' was not approved within 5 s" in answer
    # A late answer changes nothing.
    runner.approve("s1", ask.signal)
    runner.run_until_idle()
    assert RAN == {"lookup": 1} and len(runner.outputs) == 1
    _replays_identically(runner, "s1")


@pytest.mark.parametrize("value", ["maybe", None, 1, {"approved": "no"}, {"reason": "x"}])
def test_anything_but_an_approval_rejects(value: Any) -> None:
    runner, ask = _started(shop_agent())
    runner.signal("s1", ask.signal, value)
    runner.run_until_idle()
    assert RAN == {"lookup": 1}
    assert "ApprovalRejected" in runner.outputs_for("s1")[0]


@pytest.mark.parametrize("value", [True, "approve", " Yes ", {"approved": True, "by": "ana"}])
def test_approvals_in_every_accepted_form(value: Any) -> None:
    runner, ask = _started(shop_agent())
    runner.signal("s1", ask.signal, value)
    runner.run_until_idle()
    assert RAN["refund"] == 1


def test_a_crash_while_waiting_neither_asks_again_nor_runs_the_tool() -> None:
    runner, ask = _started(shop_agent())
    runner.crash()
    runner.recover()
    runner.run_until_waiting()
    assert runner.approval_requests("s1") == [ask]  # not announced again by the recovery
    runner.approve("s1", ask.signal)
    runner.run_until_idle()
    assert RAN == {"lookup": 1, "refund": 1}
    assert runner.outputs_for("s1") == ['"o-1: paid" | "refunded 5 on o-1"']
    # Unanswered across a crash, the wait still ends at its deadline.
    runner, ask = _started(shop_agent(), "s2")
    runner.crash()
    runner.recover()
    runner.run_until_idle()
    assert RAN == {"lookup": 2, "refund": 1}
    assert "ApprovalTimeout" in runner.outputs_for("s2")[0]


def test_a_wait_is_a_signal_call_with_a_deadline_for_executors() -> None:
    runner, ask = _started(shop_agent())
    waits = [e.payload for e in runner.history if isinstance(e.payload, DurableCallRequest)
             and e.payload.kind is CallKind.SIGNAL]
    assert [(w.target, w.not_before, w.for_executor) for w in waits] == [(ask.signal, ask.deadline, True)]
    assert approval.signal_name(waits[0].call_id) == ask.signal


class DirectRefund(Agent):
    """Calls the tool from its own action (no model): approval applies there too."""

    @action(InputEvent)
    def go(event: InputEvent, ctx: Any) -> None:
        try:
            done = ctx.get_resource("refund").call(order=event.input, amount=1)
        except approval.ToolNotApprovedError as err:
            done = f"not done: {err}"
        ctx.send_event(OutputEvent(output=done))


def _direct() -> DirectRefund:
    agent = DirectRefund("direct")
    agent.add_resource("refund", ResourceType.TOOL, FunctionTool(refund, requires_approval=True))
    return agent


def test_a_tool_called_from_an_action_waits_for_approval_too() -> None:
    runner, ask = _started(_direct())
    assert ask.tool == "refund" and ask.tool_call_id == ""
    assert ask.deadline == 1_000 + 3_600_000  # the agent's default approval_timeout_ms
    runner.approve("s1", ask.signal)
    runner.run_until_idle()
    assert runner.outputs_for("s1") == ["refunded 1 on look up and refund o-1"] and RAN == {"refund": 1}
    runner, ask = _started(_direct(), "s2")
    runner.reject("s2", ask.signal, "no")
    runner.run_until_idle()
    assert runner.outputs_for("s2") == [
        "not done: ApprovalRejected: a person rejected this call of tool 'refund': no; it was not called"]
    assert RAN == {"refund": 1}
    _replays_identically(runner, "s2")


def test_bad_approval_timeouts_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="approval_timeout_ms must be a positive"):
        FunctionTool(refund, requires_approval=True, approval_timeout_ms=0)
    agent = shop_agent()
    agent.config["approval_timeout_ms"] = -5
    with pytest.raises(PlanError, match="approval_timeout_ms"):
        LocalRunner(agent)


def test_decisions() -> None:
    assert approval.decision({"approved": False, "reason": "later"}) == (False, "later")
    assert approval.decision(approval.answer(True, "ok by ana")) == (True, None)
    assert approval.decision(approval.answer(False)) == (False, None)
    assert approval.decision(False) == (False, None)


def test_an_answered_wait_leaves_the_clock_alone() -> None:
    """The deadline of an approved call is no longer waited for: the next input's clock
    is not an hour later."""
    runner, ask = _started(shop_agent(3_600_000))
    runner.approve("s1", ask.signal)
    runner.run_until_idle()
    runner.submit("s1", {"sleep_s": 0})
    runner.run_until_idle()
    assert runner.outputs_for("s1")[-1]["at"] < 1_000 + 3_600_000


def test_an_approval_request_announces_the_deadline_its_wait_has() -> None:
    """The request's deadline is the wait's own even when the session's clock has moved
    past the run's time (a second input arrived while the first waited)."""
    runner = LocalRunner(shop_agent())
    runner.submit("s1", "refund o-1", timestamp=1_000)
    runner.submit("s1", "refund o-1", timestamp=20_000)
    runner.run_until_waiting()
    [ask] = runner.approval_requests("s1")
    [wait] = [e.payload for e in runner.history if isinstance(e.payload, DurableCallRequest)
              and e.payload.kind is CallKind.SIGNAL]
    assert ask.deadline == wait.not_before
