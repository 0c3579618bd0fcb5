"""``eddies check AGENT``: an agent definition (a YAML or SQL file, or a Python agent's
``module:attribute``) checked offline, its plan printed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from eddies.cli.output import console, err_console

check_app = typer.Typer()


@check_app.command(short_help="Check an agent definition offline and print each agent's plan.")
def check(
    definition: Annotated[str, typer.Argument(
        metavar="AGENT", help="A YAML or SQL file declaring agents, or MODULE:ATTR of a Python agent.")],
    agent: Annotated[str | None, typer.Option(
        help="Check only this agent (default: every agent the file can load).")] = None,
) -> None:
    """Check an agent definition offline (it connects to nothing) and print each agent's
    plan: every agent a YAML or SQL file can load (in SQL, each one no other agent uses), or
    the Python agent ``MODULE:ATTR`` names (an Agent, or a function returning one; the
    module is found in the current folder as by ``eddies worker``)."""
    from eddies.connectors.declarative import load_all, load_definition
    from eddies.connectors.declarative.located import DefinitionError
    from eddies.connectors.runtime.settings import ConfigError, load_agent
    from eddies.engine import A2aTool, AgentPlan, McpTool, PlanError

    file = Path(definition)
    try:
        if file.suffix in (".yaml", ".yml", ".sql") or ":" not in definition:
            found = [load_definition(file, agent)] if agent is not None else load_all(file)
        elif agent is not None:
            raise typer.BadParameter("a Python agent is one agent; --agent picks one of a file's",
                                     param_hint="--agent")
        else:
            found = [load_agent(definition)]
        plans = []
        for each in found:
            for res in each.resources:  # remote tools are listed by their servers at start
                if isinstance(res.obj, McpTool):
                    res.obj.discovered.update({t: _unlisted(t) for t in res.obj.allowed_tools})
                elif isinstance(res.obj, A2aTool):
                    name = res.obj.name or f"{res.name}-card-name"  # the card's name, at start
                    res.obj.discovered[name] = _unlisted(name)
            plans.append(AgentPlan.compile(each))
    except (DefinitionError, PlanError, ConfigError) as err:
        err_console.print(f"[red]{escape(str(err))}[/red]")
        raise typer.Exit(2) from None
    for plan in plans:
        console.print(f"agent {plan.agent_name} (version {plan.agent_version}): valid", highlight=False)
        for name, spec in plan.actions.items():
            on = ", ".join(t if isinstance(t, str) else t.event_type for t in spec.triggers)
            console.print(f"  action {name}: on {on}", highlight=False, markup=False)
        for name, (kind, obj) in plan.resources.items():
            console.print(f"  {kind.value} {name}: {type(obj).__name__}", highlight=False, markup=False)
        for n, hook in enumerate(plan.hooks, 1):  # in the order they run
            console.print(f"  hook {n}: {hook.hook_name()} ({type(hook).__name__})", highlight=False,
                          markup=False)
    if len(plans) > 1:  # commands that run one agent need to be told which
        names = ", ".join(plan.agent_name for plan in plans)
        console.print(f"{len(plans)} agents ({names}); to run one: {escape(str(file))}#NAME",
                      highlight=False)


def _unlisted(name: str) -> Any:
    from eddies.engine import ToolSpec

    return ToolSpec(name, "(listed by its server at start)", {"type": "object", "properties": {}})
