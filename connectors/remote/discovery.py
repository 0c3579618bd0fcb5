"""What a runner learns from other processes when it starts: the specs of an agent's MCP
tools (listed by their servers), its MCP prompts' messages, and A2A tools (from their
agents' cards); the cards of its A2A sub-agents are fetched too, so a wrong one fails at
start. Every runner
(LocalRunner, the Kafka worker, the Flink job, ``eddies replay``) calls
:func:`discover_tools` before it compiles the agent. Example::

    discover_tools(agent)
    plan = AgentPlan.compile(agent)

Nothing is imported, and nothing is asked, for an agent without such tools or prompts.
"""

from __future__ import annotations

from typing import Any

from eddies.engine import Agent, ResourceType


def discover_tools(agent: Agent, timeout: float = 30.0) -> None:
    """Fill the ``discovered`` specs of ``agent``'s MCP and A2A tool resources (each
    server asked once per process); a ConfigurationError names what cannot be used."""
    from eddies.connectors.remote import a2a, mcp

    seen: set[int] = set()  # a cycle of sub-agents is the plan's error to name, not a hang here

    def walk(agent: Agent, servers: dict[str, Any]) -> None:
        if id(agent) in seen:
            return
        seen.add(id(agent))
        mcp.discover_tools(agent, timeout, servers)
        mcp.discover_prompts(agent, timeout, servers)
        a2a.discover_tools(agent, timeout, servers)
        a2a.check_subagent_cards(agent, timeout)
        here = {**servers, **{r.name: r.obj for r in agent.resources
                              if r.type in (ResourceType.MCP_SERVER, ResourceType.A2A_SERVER)}}
        for res in agent.resources:  # internal sub-agents use their callers' servers too
            if res.type is ResourceType.AGENT and isinstance(res.obj, Agent):
                walk(res.obj, here)

    walk(agent, {})


__all__ = ["discover_tools"]
