"""An agent told who asked (issue 57), for a worker: a tool takes the identity by injection,
an A2A sub-agent (at ``TEST_A2A_URL``) gets it as headers, and a policy hook asked where
calls are made refuses the sub-agent to one tenant. Imported by name by the worker the
test starts (``tests.integration.identity_agents:identity_agent``)."""

from __future__ import annotations

import os
from typing import Any

from eddies import Agent, InputEvent, OutputEvent, action
from eddies.engine import CallView, FunctionTool, Hook, Refuse, ResourceType
from eddies.events import CallKind


def whoami(user: str | None, tenant: str | None) -> str:
    """Who asks (a tool that takes it by injection)."""
    return f"{user} of {tenant}"


class WhoAsks(Agent):
    """Tells who asked, as a tool and an A2A sub-agent are told."""

    @action(InputEvent)
    def answer(event: InputEvent, ctx: Any) -> None:
        me = ctx.get_resource("whoami", ResourceType.TOOL).call()
        helped = ctx.get_resource("helper", ResourceType.AGENT).call(ctx, event.input)
        ctx.send_event(OutputEvent(output=f"{me}; {helped.result if helped.success else helped.exception}"))


class NoHelpFor(Hook):
    """A policy asked where calls are made: no sub-agent for the tenant "blocked-co"."""

    name = "policy"

    def admit(self, call: CallView) -> Refuse | None:
        who = call.identity
        if call.kind is CallKind.SUBAGENT and who is not None and who.tenant == "blocked-co":
            return Refuse("no sub-agents for blocked-co")
        return None


def identity_agent() -> WhoAsks:
    """Who asked reaches a tool by injection and the A2A agent at TEST_A2A_URL as headers;
    a policy hook refuses the agent to one tenant."""
    from eddies import A2ASubagentSetup

    agent = WhoAsks("who-asks")
    agent.add_resource("whoami", ResourceType.TOOL, FunctionTool(
        whoami, idempotent=True, inject={"user": "identity:user", "tenant": "identity:tenant"}))
    helper = A2ASubagentSetup(os.environ["TEST_A2A_URL"], timeout_s=20)
    agent.add_resource("helper", ResourceType.AGENT, helper)
    agent.add_hook(NoHelpFor())
    return agent
