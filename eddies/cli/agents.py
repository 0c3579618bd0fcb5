"""The agent a command replays, forks or serves: loaded from the settings, changed by
``--set``, compiled to its plan."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import typer

from eddies.cli.errors import fail

T = TypeVar("T")


def agent_plan(settings: Any, assignments: list[str]) -> Any:
    """The agent of ``settings`` with ``--set`` applied, compiled, its MCP and A2A tools'
    specs read from their servers (ConfigError: main says so, exit 2)."""
    return plan_of(settings.agent, assignments)


def plan_of(spec: str, assignments: list[str] | tuple[str, ...] = ()) -> Any:
    """The agent ``spec`` names (as ``--agent`` does) with ``--set`` ``assignments``
    applied, compiled, its MCP and A2A tools' specs read from their servers."""
    from eddies.connectors.remote.discovery import discover_tools
    from eddies.connectors.runtime.settings import load_agent
    from eddies.engine import AgentPlan

    agent = _with_settings(load_agent(spec), list(assignments))
    discover_tools(agent)
    return AgentPlan.compile(agent)


def _with_settings(plan_agent: Any, assignments: list[str]) -> Any:
    """The agent with ``--set`` applied: ``FIELD=VALUE`` on every chat model setup, or
    ``NAME.FIELD=VALUE`` on one (fields: model, prompt, connection)."""
    import dataclasses

    from eddies.engine import ChatModelSetup, ResourceType

    setups = {r.name: r.obj for r in plan_agent.resources if r.type is ResourceType.CHAT_MODEL
              and isinstance(r.obj, ChatModelSetup)}
    for item in assignments:
        target, sep, value = item.partition("=")
        name, _, fname = target.rpartition(".")
        if not sep or fname not in ("model", "prompt", "connection"):
            raise typer.BadParameter(f"{item!r}: use FIELD=VALUE or RESOURCE.FIELD=VALUE, FIELD one "
                                     "of model, prompt, connection", param_hint="--set")
        if name and name not in setups:
            raise typer.BadParameter(f"{item!r}: the agent has no chat model {name!r} (it has "
                                     f"{', '.join(sorted(setups)) or 'none'})", param_hint="--set")
        for key in [name] if name else list(setups):
            changes: dict[str, Any] = {fname: value}
            setups[key] = dataclasses.replace(setups[key], **changes)
    plan_agent.resources = [dataclasses.replace(r, obj=setups[r.name])
                            if r.type is ResourceType.CHAT_MODEL and r.name in setups else r
                            for r in plan_agent.resources]
    return plan_agent


def chosen(settings: Any, option: str | None) -> bool:
    """Whether the agent was named (``--agent``; ``EDDIES_AGENT`` or the config file naming
    another than the default): a session recorded by another agent is then compared with it
    on purpose."""
    from eddies.connectors.runtime.settings import DEFAULT_AGENT

    return option is not None or bool(settings.agent != DEFAULT_AGENT)


def as_recorded(settings: Any, option: str | None, work: Callable[[bool], T]) -> T:
    """``work(same_agent)``: with the default agent, a session another agent recorded is
    refused (exit 2: which agent recorded it, and how to name it) rather than checked or run
    again against the demo's calculator; with a named agent (``option``: ``--agent``), it is
    what the user asked."""
    from eddies.connectors.inspect.replay import OtherAgentError

    try:
        return work(not chosen(settings, option))
    except OtherAgentError as err:
        fail(f"{err}, the default agent ({settings.agent})",
             f"pass --agent MODULE:ATTR (or FILE.yaml#NAME, FILE.sql#NAME, or set EDDIES_AGENT) "
             f"naming agent {err.recorded!r}")
