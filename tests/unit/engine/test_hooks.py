"""Hooks on a session's inputs and calls: a changed input is what the session records and
runs, a changed call is what its request carries and the callee gets, a refused call is an
error the action or the model sees and is never made; replays decide the same; a hook
that raises is an error naming it; a sub-agent's calls go through its caller's hooks."""

from __future__ import annotations

import re
from typing import Any

import pytest

from eddies import (
    Agent,
    ChatModelSetup,
    InputEvent,
    LocalRunner,
    OutputEvent,
    ReActAgent,
    ResourceType,
    action,
)
from eddies.connectors.inspect.replay import replay
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.engine import CallView, Hook, PlanError, Refuse
from eddies.engine.hooks import InputInfo
from eddies.events import (
    CallKind,
    ChatMessage,
    DurableCallRequest,
    DurableCallResult,
    MessageRole,
    ToolCall,
    decode_value,
)

CARD = re.compile(r"\b\d{4}(?: ?\d{4}){3}\b")
REFUNDS: list[tuple[str, int]] = []
SEEN: list[list[str]] = []


def refund(order: str, amount: int) -> str:
    """Refund an order."""
    REFUNDS.append((order, amount))
    return f"refunded {amount} on {order}"


def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


class MaskCards(Hook):
    """Masks card numbers in inputs and in what models are sent."""

    def on_input(self, value: Any, info: InputInfo) -> Any:
        return CARD.sub("[card]", value) if isinstance(value, str) else value

    def before_call(self, call: CallView) -> CallView | Refuse | None:
        if call.kind is not CallKind.CHAT_MODEL:
            return None
        messages = [{**m, "content": CARD.sub("[card]", m["content"])} for m in call.kwargs["messages"]]
        return call.with_arguments(messages=messages)


class NoRefundsForTrials(Hook):
    """Trial customers (sessions named trial-...) may not be refunded."""

    name = "trial-limits"

    def before_call(self, call: CallView) -> CallView | Refuse | None:
        if call.kind is CallKind.TOOL and call.target == "refund" and call.session_id.startswith("trial-"):
            return Refuse("trial accounts cannot be refunded")
        return None


#: An instance, as a YAML or SQL definition may name one.
TRIALS = NoRefundsForTrials()


def support_model(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    SEEN.append([m.content for m in messages])
    results = [m.content for m in messages if m.role is MessageRole.TOOL]
    if not results:
        asked = ToolCall("c1", "refund", {"order": "o-1", "amount": 20})
        return ChatMessage(MessageRole.ASSISTANT, "", [asked])
    return ChatMessage(MessageRole.ASSISTANT, f"done: {results[0]}")


def support_agent(*hooks: Hook) -> ReActAgent:
    agent = ReActAgent("support", model="llm", prompt="You help customers.")
    agent.add_resource("refund", ResourceType.TOOL, refund)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(support_model))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["refund"]))
    for hook in hooks:
        agent.add_hook(hook)
    return agent


@pytest.fixture(autouse=True)
def _clear() -> None:
    REFUNDS.clear()
    SEEN.clear()


def _replays(runner: LocalRunner, session: str) -> None:
    history = [(n, e) for n, e in enumerate(runner.history) if e.session_id == session]
    report = replay(runner.plan, history, session)
    assert report.ok and not report.extra, report


def test_a_masked_input_is_what_the_session_records_and_the_model_is_sent() -> None:
    runner = LocalRunner(support_agent(MaskCards()))
    [answer] = runner.run([("s1", "refund o-1, my card is 4111 1111 1111 1111")])
    assert answer == 'done: "refunded 20 on o-1"'
    recorded = [e.payload.input for e in runner.history if isinstance(e.payload, InputEvent)]
    assert recorded == ["refund o-1, my card is [card]"]
    assert all("4111" not in text for texts in SEEN for text in texts) and SEEN
    # The request in the history carries the masked messages: what the provider was sent.
    asked = [decode_value(p.args) for e in runner.history if isinstance(p := e.payload, DurableCallRequest)
             and p.kind is CallKind.CHAT_MODEL]
    assert asked and all("4111" not in str(a) for a in asked)
    _replays(runner, "s1")


def test_a_refused_tool_is_never_called_and_the_model_sees_the_refusal() -> None:
    runner = LocalRunner(support_agent(NoRefundsForTrials()))
    [trial, paid] = runner.run([("trial-7", "refund o-1"), ("acme-1", "refund o-1")])
    assert trial == "done: error: CallRefusedError: refused by hook 'trial-limits': " \
                    "trial accounts cannot be refunded"
    assert paid == 'done: "refunded 20 on o-1"'
    assert REFUNDS == [("o-1", 20)]  # the paying customer's only
    # No request was made for the refused call: nothing for an executor to perform.
    tools = [(e.session_id, p.target) for e in runner.history
             if isinstance(p := e.payload, DurableCallRequest) and p.kind is CallKind.TOOL]
    assert tools == [("acme-1", "refund")]
    _replays(runner, "trial-7")


def test_hooks_run_in_order_each_seeing_what_the_one_before_decided() -> None:
    seen: list[str] = []

    class Upper(Hook):
        def on_input(self, value: Any, info: InputInfo) -> Any:
            return str(value).upper()

    class Note(Hook):
        def on_input(self, value: Any, info: InputInfo) -> Any:
            seen.append(f"{info.session_id}/{info.event_id}/{info.run}: {value}")
            return value

    runner = LocalRunner(support_agent(Upper(), Note()))
    runner.submit("s1", "refund please", event_id="in-1")
    runner.run_until_idle()
    assert seen == ["s1/in-1/1: REFUND PLEASE"]
    assert SEEN[0][-1] == "REFUND PLEASE"


class RefuseSecrets(Hook):
    def on_input(self, value: Any, info: InputInfo) -> Any:
        return Refuse("secrets are not taken") if "secret" in str(value) else value


class Broken(Hook):
    def before_call(self, call: CallView) -> CallView | Refuse | None:
        raise KeyError("tenant")


def test_a_refused_input_is_recorded_without_its_value_and_its_run_fails() -> None:
    runner = LocalRunner(support_agent(RefuseSecrets()))
    runner.submit("s1", "my secret is 42")
    runner.submit("s1", "refund o-1")
    runner.run_until_idle()
    recorded = [e.payload.input for e in runner.history if isinstance(e.payload, InputEvent)]
    assert recorded == [None, "refund o-1"]
    outs = [(e.run, p.output, p.error and p.error.message) for e in runner.outputs
            if isinstance(p := e.payload, OutputEvent)]
    assert outs == [(1, None, "refused by hook 'RefuseSecrets': secrets are not taken"),
                    (2, 'done: "refunded 20 on o-1"', None)]
    assert all("secret is" not in text for texts in SEEN for text in texts)


def test_a_hook_that_raises_fails_the_run_naming_the_hook() -> None:
    runner = LocalRunner(support_agent(Broken()))
    runner.submit("s1", "refund o-1")
    runner.run_until_idle()
    [out] = [p for e in runner.outputs if isinstance(p := e.payload, OutputEvent)]
    assert out.error is not None and "hook 'Broken' raised on CHAT_MODEL 'llm': KeyError: 'tenant'" \
        in out.error.message, out.error
    assert not SEEN  # the model was not asked


class Echoing(Agent):
    subagent_compatible = True

    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=ctx.durable_execute(lookup, str(event.input))))


def test_a_subagents_calls_go_through_its_callers_hooks() -> None:
    class Calls(Hook):
        def __init__(self) -> None:
            self.seen: list[tuple[str, str, tuple[str, ...]]] = []

        def before_call(self, call: CallView) -> CallView | Refuse | None:
            self.seen.append((call.kind.value, call.target, call.scope))
            if call.kind is CallKind.FUNCTION:
                return call.with_arguments("o-9")
            return None

    class Boss(Agent):
        @action(InputEvent)
        def start(event: InputEvent, ctx: Any) -> None:
            result = ctx.get_resource("helper", ResourceType.AGENT).call(ctx, event.input)
            ctx.send_event(OutputEvent(output=result.result))

    hook = Calls()
    boss = Boss()
    boss.add_resource("helper", ResourceType.AGENT, Echoing())
    boss.add_hook(hook)
    runner = LocalRunner(boss)
    assert runner.run([("s1", "o-1")]) == ["order o-9: shipped"]
    kinds = [(k, t.split(":")[-1], len(s)) for k, t, s in hook.seen]
    assert ("SUBAGENT", "helper", 0) in kinds and ("FUNCTION", "lookup", 1) in kinds


def test_a_subagents_own_executor_side_hooks_decide_where_its_caller_has_none() -> None:
    """An executor makes the calls of every scope: a sub-agent's own hooks that admit calls
    and see their results are asked there, though its caller has no hook."""
    class Gatekeeper(Hook):
        def admit(self, call: CallView) -> Refuse | None:
            return Refuse("no lookups of o-2") if call.args == ["o-2"] else None

        def on_result(self, call: CallView, value: Any) -> Any:
            return value.replace("shipped", "[status]") if isinstance(value, str) else value

    class Boss(Agent):
        @action(InputEvent)
        def start(event: InputEvent, ctx: Any) -> None:
            result = ctx.get_resource("helper", ResourceType.AGENT).call(ctx, event.input)
            ctx.send_event(OutputEvent(output=result.result if result.success else str(result.exception)))

    helper = Echoing()
    helper.add_hook(Gatekeeper())
    boss = Boss()
    boss.add_resource("helper", ResourceType.AGENT, helper)
    runner = LocalRunner(boss)
    said = runner.run([("s1", "o-1"), ("s2", "o-2")])
    assert said[0] == "order o-1: [status]"
    assert "refused by hook 'Gatekeeper': no lookups of o-2" in said[1]


def test_a_hook_must_be_a_hook() -> None:
    agent = support_agent()
    agent.add_hook(object())
    with pytest.raises(PlanError, match="not a Hook"):
        LocalRunner(agent)


def test_an_output_goes_out_as_the_hooks_let_it_or_fails_refused() -> None:
    class MaskEmails(Hook):
        def on_output(self, value: Any, info: InputInfo) -> Any:
            return re.sub(r"\S+@\S+", "[email]", value) if isinstance(value, str) else value

    class NoRefundTalk(Hook):
        name = "no-refunds"

        def on_output(self, value: Any, info: InputInfo) -> Any:
            return Refuse("it speaks of refunds") if "refunded" in str(value) and info.run == 2 else value

    def writes(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
        return ChatMessage(MessageRole.ASSISTANT, f"mail ann@example.com - {messages[-1].content}")

    agent = ReActAgent("writer", model="llm", prompt="You write.")
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(writes))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
    agent.add_hook(MaskEmails()).add_hook(NoRefundTalk())
    runner = LocalRunner(agent)
    for text in ("hello", "refunded?"):
        runner.submit("s1", text)
    runner.run_until_idle()
    outs = [(p.output, p.error and p.error.type, p.error and p.error.message)
            for e in runner.outputs if isinstance(p := e.payload, OutputEvent)]
    assert outs == [("mail [email] - hello", None, None),
                    (None, "OutputRefusedError", "refused by hook 'no-refunds': it speaks of refunds")]
    # What the history holds is what went out.
    recorded = [p.output for e in runner.history if isinstance(p := e.payload, OutputEvent)]
    assert recorded == ["mail [email] - hello", None]


def test_a_call_asked_again_after_a_crash_is_sent_as_the_hooks_changed_it() -> None:
    """Recovery executes the waiting action again from its journal: its hooks with it, so
    the request sent again carries the masked messages, never the action's own."""
    runner = LocalRunner(support_agent(MaskCards()))
    runner.submit("s1", "refund o-1, card 4111 1111 1111 1111")
    runner.step()  # the input applied: the model's request is queued, not yet performed
    runner.crash()
    runner.recover()
    runner.run_until_idle()
    assert [p.output for e in runner.outputs if isinstance(p := e.payload, OutputEvent)] == \
        ['done: "refunded 20 on o-1"']
    # The model was asked only after the crash, by the request sent again.
    assert SEEN and SEEN[0][-1] == "refund o-1, card [card]"
    assert all("4111" not in text for texts in SEEN for text in texts)


class Judge(Hook):
    """Stands for a hook that asks a guard model: refuses refunds over 10 after the fact."""

    name = "judge"

    def __init__(self) -> None:
        self.asked = 0

    def on_result(self, call: CallView, value: Any) -> Any:
        if call.kind is not CallKind.TOOL:
            return value
        self.asked += 1
        if call.kwargs["amount"] > 10:
            return Refuse(f"{value} is over the limit")
        return value


def test_a_result_hook_decides_once_where_the_call_is_made_and_replay_reads_its_decision() -> None:
    judge = Judge()
    runner = LocalRunner(support_agent(judge))
    [answer] = runner.run([("s1", "refund o-1")])
    assert answer == ("done: error: CallRefusedError: refused by hook 'judge': refunded 20 on o-1 is "
                      "over the limit")
    assert judge.asked == 1
    # The refusal is the call's journaled outcome: the history holds it, a replay reads it.
    [result] = [p for e in runner.history if isinstance(p := e.payload, DurableCallResult)
                and p.kind is CallKind.TOOL]
    assert result.error is not None and result.error.type == "CallRefusedError"
    _replays(runner, "s1")
    assert judge.asked == 1


def test_a_result_hook_that_raises_is_the_calls_error_naming_it() -> None:
    class Raises(Hook):
        def on_result(self, call: CallView, value: Any) -> Any:
            raise ValueError("no verdict")

    runner = LocalRunner(support_agent(Raises()))
    runner.submit("s1", "refund o-1")
    runner.run_until_idle()
    [out] = [p for e in runner.outputs if isinstance(p := e.payload, OutputEvent)]
    # The model call failed with it (and the ReAct agent halts the session on a model that fails).
    assert out.error is not None and \
        "HookError: hook 'Raises' raised on the result of CHAT_MODEL 'llm': ValueError: no verdict" \
        in out.error.message, out.error


def test_an_input_or_output_hook_that_raises_fails_the_run_naming_it_and_lets_nothing_through() -> None:
    class RaisesOnInput(Hook):
        def on_input(self, value: Any, info: InputInfo) -> Any:
            raise ValueError("no scanner")

    class RaisesOnOutput(Hook):
        def on_output(self, value: Any, info: InputInfo) -> Any:
            raise ValueError("no scanner")

    runner = LocalRunner(support_agent(RaisesOnInput()))
    runner.submit("s1", "card 4111 1111 1111 1111", event_id="in-1")
    runner.run_until_idle()
    assert [e.payload.input for e in runner.history if isinstance(e.payload, InputEvent)] == [None]
    [out] = [p for e in runner.outputs if isinstance(p := e.payload, OutputEvent)]
    assert out.error is not None and (out.error.type, out.error.message) == (
        "HookError", "hook 'RaisesOnInput' raised on the input 'in-1': ValueError: no scanner")
    runner = LocalRunner(support_agent(RaisesOnOutput()))
    runner.submit("s1", "refund o-1")
    runner.run_until_idle()
    [out] = [p for e in runner.outputs if isinstance(p := e.payload, OutputEvent)]
    assert out.output is None and out.error is not None and (out.error.type, out.error.message) == (
        "HookError", "hook 'RaisesOnOutput' raised on the output of run 1: ValueError: no scanner")


def shout(text: str) -> str:
    return text.upper()


class Counting(Hook):
    """Counts what it sees, as a redacting hook counts what it redacts."""

    name = "counting"

    def on_input(self, value: Any, info: InputInfo) -> Any:
        info.count("inputs")
        return value

    def before_call(self, call: CallView) -> CallView | Refuse | None:
        call.count("asked")
        call.count("words", len(call.args[0].split()))
        return None

    def on_result(self, call: CallView, value: Any) -> Any:
        call.count("results")
        return value

    def on_output(self, value: Any, info: InputInfo) -> Any:
        info.count("outputs")
        return value


class ThreeCalls(Agent):
    @action(InputEvent)
    def shout_thrice(event: InputEvent, ctx: Any) -> None:  # executed again at every result
        texts = [ctx.durable_execute(shout, f"{event.input} {n}") for n in range(3)]
        ctx.send_event(OutputEvent(output=" / ".join(texts)))


def test_what_hooks_count_is_counted_once_however_often_the_action_is_replayed() -> None:
    """A synchronous action runs again from its journal at each result: its calls go
    through before_call every time, and are counted only when first asked."""
    agent = ThreeCalls()
    agent.add_hook(Counting())
    runner = LocalRunner(agent)
    for text in ("a b", "c d e"):
        runner.submit("s1", text)
    runner.run_until_idle()
    assert [p.output for e in runner.outputs if isinstance(p := e.payload, OutputEvent)] == \
        ["A B 0 / A B 1 / A B 2", "C D E 0 / C D E 1 / C D E 2"]
    assert {name: n for (kind, name), n in runner.metrics.items() if kind == "hook"} == {
        "counting.inputs": 2, "counting.asked": 6, "counting.words": 3 * 3 + 3 * 4,
        "counting.results": 6, "counting.outputs": 2}
