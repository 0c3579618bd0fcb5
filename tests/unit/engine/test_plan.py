"""AgentPlan validation: every error names the offending action or resource."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import (
    Agent,
    AgentPlan,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    PlanError,
    ResourceType,
    action,
)
from eddies.connectors.models.scripted import ScriptedChatModel
from tests.agents import Echo, add


def test_actions_are_collected_by_trigger_in_order() -> None:
    plan = AgentPlan.compile(Echo())
    assert [a.name for a in plan.actions_for("InputEvent")] == ["start"]
    assert {a.name for a in plan.actions.values()} == {
        "start", "eddies.chat_model", "eddies.tool_call", "eddies.context_retrieval"}
    assert plan.agent_name == "Echo"


def test_duplicate_action_names() -> None:
    agent = Echo().add_action("start", InputEvent, lambda e, c: None)
    with pytest.raises(PlanError, match="'start'.*two actions"):
        AgentPlan.compile(agent)


def test_an_error_names_the_agent_once() -> None:
    """A worker or a file may hold several agents: the error says whose definition is wrong
    (a sub-agent's with its caller; a ReActAgent's own checks name it already)."""
    from eddies import ReActAgent

    twice = (Agent("shop").add_resource("x", ResourceType.PROMPT, "p")
             .add_resource("x", ResourceType.PROMPT, "q"))
    with pytest.raises(PlanError) as err:
        AgentPlan.compile(twice)
    assert (str(err.value), err.value.agent) == ("agent 'shop': resource 'x': defined twice", "shop")
    helper = Agent("helper", subagent_compatible=True).add_resource("y", ResourceType.TOOL, 3)
    with pytest.raises(PlanError) as err:
        AgentPlan.compile(Agent("shop").add_resource("helper", ResourceType.AGENT, helper))
    assert str(err.value).startswith("agent 'helper' (a sub-agent of 'shop'): resource 'y': a TOOL ")
    assert err.value.agent == "helper"
    with pytest.raises(PlanError) as err:
        AgentPlan.compile(ReActAgent("r", model="nope"))
    assert (str(err.value), err.value.agent) == ("ReActAgent 'r': model 'nope' is not a CHAT_MODEL "
                                                 "resource", "r")


def test_bad_signature_and_trigger() -> None:
    with pytest.raises(PlanError, match="'lonely'.*must accept"):
        AgentPlan.compile(Agent("a").add_action("lonely", InputEvent, lambda: None))
    with pytest.raises(PlanError, match="'odd'.*neither an Event class"):
        AgentPlan.compile(Agent("a").add_action("odd", (int,), lambda e, c: None))  # type: ignore[arg-type]
    with pytest.raises(PlanError, match="'none'.*no trigger"):
        AgentPlan.compile(Agent("a").add_action("none", (), lambda e, c: None))


def test_resource_references_are_checked() -> None:
    agent = Agent("a").add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("missing"))
    with pytest.raises(PlanError, match="'llm'.*connection 'missing'"):
        AgentPlan.compile(agent)
    agent = (Agent("a")
             .add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel())
             .add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["nope"])))
    with pytest.raises(PlanError, match="'llm'.*tool 'nope'"):
        AgentPlan.compile(agent)
    with pytest.raises(PlanError, match="'x'.*defined twice"):
        AgentPlan.compile(Agent("a").add_resource("x", ResourceType.PROMPT, "p")
                          .add_resource("x", ResourceType.PROMPT, "q"))
    with pytest.raises(PlanError, match="'conn'.*chat\\(\\) method"):
        AgentPlan.compile(Agent("a").add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, 3))
    with pytest.raises(PlanError, match="'t'.*a function, a FunctionTool, an McpTool or an A2aTool"):
        AgentPlan.compile(Agent("a").add_resource("t", ResourceType.TOOL, 3))


def test_engine_options_are_validated() -> None:
    with pytest.raises(PlanError, match="'max_tool_rounds'"):
        AgentPlan.compile(Agent("a", config={"max_tool_rounds": 0}))


def test_tools_get_a_spec_from_their_signature() -> None:
    plan = AgentPlan.compile(Agent("a").add_resource("add", ResourceType.TOOL, add))
    spec = plan.tool("add").spec
    assert spec.description == "Add two integers."
    assert spec.parameters == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,  # no **kwargs: no other argument
    }


def test_subclass_overrides_an_action() -> None:
    class Loud(Echo):
        @action(InputEvent)
        def start(event: InputEvent, ctx: Any) -> None:
            ctx.send_event(OutputEvent(output=str(event.input).upper()))

    plan = AgentPlan.compile(Loud())
    assert [a.fn.__qualname__ for a in plan.actions_for("InputEvent")] == [
        "test_subclass_overrides_an_action.<locals>.Loud.start"]
