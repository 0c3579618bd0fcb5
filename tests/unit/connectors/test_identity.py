"""Who asked (issue 57): an input's identity travels with its run to every call. A tool
takes it by injection (the model never sees or sets it), an action reads ``ctx.identity``,
a hook decides on it (CallAccess: this tenant may not call that tool, which never runs and
whose refusal the model sees), a replay decides the same from the history alone, and a
crash loses none of it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from eddies import (
    Agent,
    ChatModelSetup,
    FunctionTool,
    Identity,
    InputEvent,
    LocalRunner,
    OutputEvent,
    ReActAgent,
    ResourceType,
    action,
)
from eddies.connectors.guardrails.access import CallAccess
from eddies.connectors.inspect.replay import replay
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.events import ChatMessage, DurableCallRequest, MessageRole, ToolCall, decode_value

RAN: list[dict[str, Any]] = []
TOOLS_SEEN: list[list[str]] = []


def refund(order: str, user: str | None, tenant: str | None) -> str:
    """Refund an order."""
    RAN.append({"order": order, "user": user, "tenant": tenant})
    return f"refunded {order} for {user} of {tenant}"


def model(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    TOOLS_SEEN.append([json.dumps(t.parameters) for t in tools])
    results = [m.content for m in messages if m.role is MessageRole.TOOL]
    if not results:  # a model that tries to set who asks: injection overrides it
        asked = {"order": "o-1", "user": "mallory", "tenant": "evil"}
        return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("c1", "refund", asked)])
    return ChatMessage(MessageRole.ASSISTANT, f"done: {results[0]}")


def support(*hooks: Any) -> ReActAgent:
    agent = ReActAgent("support", model="llm", prompt="You help customers.")
    agent.add_resource("refund", ResourceType.TOOL, FunctionTool(
        refund, inject={"user": "identity:user", "tenant": "identity:tenant"}))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(model))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["refund"]))
    for hook in hooks:
        agent.add_hook(hook)
    return agent


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()
    TOOLS_SEEN.clear()


def _outputs(runner: LocalRunner) -> list[Any]:
    return [p.output if p.error is None else f"{p.error.type}: {p.error.message}"
            for e in runner.outputs if isinstance(p := e.payload, OutputEvent)]


def test_a_tool_takes_who_asked_by_injection_and_the_model_cannot_set_it() -> None:
    runner = LocalRunner(support())
    runner.submit("s1", "refund o-1", identity=Identity("ann", tenant="acme"))
    runner.submit("s2", "refund o-1")  # anonymous
    runner.run_until_idle()
    assert RAN == [{"order": "o-1", "user": "ann", "tenant": "acme"},
                   {"order": "o-1", "user": None, "tenant": None}]
    assert _outputs(runner) == ['done: "refunded o-1 for ann of acme"',
                                'done: "refunded o-1 for None of None"']
    # The model is offered the tool without them.
    assert TOOLS_SEEN and not any("tenant" in p or '"user"' in p for ps in TOOLS_SEEN for p in ps)
    # The request journaled carries them: a replay sends what was sent.
    [asked] = [decode_value(p.args)["kwargs"] for e in runner.history if e.session_id == "s1"
               and isinstance(p := e.payload, DurableCallRequest) and p.target == "refund"]
    assert asked == {"order": "o-1", "user": "ann", "tenant": "acme"}


def test_a_tenant_refused_a_tool_never_runs_it_the_model_sees_why_and_replay_agrees() -> None:
    access = CallAccess({"acme": ["refund"], "trial-co": []}, anonymous=[])
    runner = LocalRunner(support(access))
    runner.submit("ok", "refund o-1", identity=Identity("ann", tenant="acme"))
    runner.submit("trial", "refund o-1", identity=Identity("bob", tenant="trial-co"))
    runner.submit("anon", "refund o-1")
    runner.submit("stranger", "refund o-1", identity=Identity("eve", tenant="other-co"))
    runner.run_until_idle()
    assert RAN == [{"order": "o-1", "user": "ann", "tenant": "acme"}]
    refused = "done: error: CallRefusedError: refused by hook 'access': {} may not use the tool 'refund'"
    assert {e.session_id: e.payload.output for e in runner.outputs} == {
        "ok": 'done: "refunded o-1 for ann of acme"',
        "trial": refused.format("tenant 'trial-co'"),
        "anon": refused.format("an anonymous caller"),
        "stranger": refused.format("tenant 'other-co'")}
    # No request was made for a refused call; a replay of the history decides the same.
    assert [e.session_id for e in runner.history
            if isinstance(p := e.payload, DurableCallRequest) and p.target == "refund"] == ["ok"]
    for session in ("ok", "trial", "anon", "stranger"):
        mine = [(n, e) for n, e in enumerate(runner.history) if e.session_id == session]
        report = replay(runner.plan, mine, session)
        assert report.ok and not report.extra, report


class Greeter(Agent):
    @action(InputEvent)
    def greet(event: InputEvent, ctx: Any) -> None:  # executed again at each result
        who = ctx.identity
        name = ctx.durable_execute(str.upper, who.user if who else "stranger")
        ctx.send_event(OutputEvent(output=f"hello {name} of {who.tenant if who else None}"))


def test_an_action_reads_who_asked_and_a_crash_keeps_it() -> None:
    runner = LocalRunner(Greeter(), snapshot_every=1)
    runner.submit("s1", "hi", identity=Identity("ann", tenant="acme"))
    runner.step()  # the input applied, its call asked, the state snapshotted
    runner.crash()
    runner.recover()
    runner.run_until_idle()
    assert _outputs(runner) == ["hello ANN of acme"]
    recorded = [p.identity for e in runner.history if isinstance(p := e.payload, InputEvent)]
    assert recorded == [Identity("ann", "acme")]
    # The trace shows who asked beside the run's input.
    from eddies.connectors.inspect.tree import build_tree

    [run] = build_tree(runner.history)
    assert run.label == '"hi" (user ann, tenant acme)'


def test_an_allow_list_by_user_and_for_everyone() -> None:
    by_user = CallAccess({"ann": ["refund"]}, by="user")
    assert by_user.before_call(_call(Identity("ann", "x"))) is None
    refused = by_user.before_call(_call(Identity("bob", "x")))
    assert refused is not None and "user 'bob' may not use the tool 'refund'" in str(refused)
    everyone = CallAccess({}, others=["*"], anonymous=["refund"])
    assert everyone.before_call(_call(Identity("zed"))) is None and everyone.before_call(_call(None)) is None
    with pytest.raises(ValueError, match="by='group'"):
        CallAccess({}, by="group")


def _call(who: Identity | None) -> Any:
    from eddies.engine import CallView
    from eddies.events import CallKind

    return CallView(CallKind.TOOL, "refund", [], {"order": "o-1"}, "s1", 1, identity=who)


class PolicyJudge(CallAccess):
    """Stands for a policy service asked before a call (I/O: an executor's to do, once)."""

    name = "policy"

    def __init__(self) -> None:
        super().__init__({})
        self.asked: list[tuple[str, str | None]] = []

    def before_call(self, call: Any) -> Any:  # the allow-list is the judge's, not the machine's
        return None

    def admit(self, call: Any) -> Any:
        from eddies.engine import Refuse
        from eddies.events import CallKind

        if call.kind is not CallKind.TOOL:
            return None
        who = call.identity
        self.asked.append((call.target, who and who.tenant))
        call.count("asked")
        return Refuse(f"the policy service refuses {call.target} to trial tenants") \
            if who is not None and who.tenant == "trial-co" else None


def test_a_judge_asked_where_the_call_is_made_refuses_it_once_and_replay_reads_its_decision() -> None:
    judge = PolicyJudge()
    runner = LocalRunner(support(judge))
    runner.submit("ok", "refund o-1", identity=Identity("ann", tenant="acme"))
    runner.submit("trial", "refund o-1", identity=Identity("bob", tenant="trial-co"))
    runner.run_until_idle()
    assert RAN == [{"order": "o-1", "user": "ann", "tenant": "acme"}]  # the refused tool never ran
    assert {e.session_id: e.payload.output for e in runner.outputs} == {
        "ok": 'done: "refunded o-1 for ann of acme"',
        "trial": "done: error: CallRefusedError: refused by hook 'policy': the policy service refuses "
                 "refund to trial tenants"}
    assert sorted(judge.asked, key=str) == [("refund", "acme"), ("refund", "trial-co")]
    assert runner.metrics[("hook", "policy.asked")] == 2
    # The refusal is the call's journaled outcome: a replay reads it, the judge is not asked.
    for session in ("ok", "trial"):
        mine = [(n, e) for n, e in enumerate(runner.history) if e.session_id == session]
        report = replay(runner.plan, mine, session)
        assert report.ok and not report.extra, report
    assert len(judge.asked) == 2 and len(RAN) == 1
