"""Agents shared by tests (module-level, so durable functions are importable by name)."""

from __future__ import annotations

from typing import Any

from eddies import Agent, InputEvent, OutputEvent, action
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.demo import Calculator, add, calculator_agent


class Echo(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.input))


Chat = Calculator


def calculator(model: ScriptedChatModel | None = None, tool: Any = add) -> Calculator:
    """The demo's calculator agent, optionally on another model or tool function."""
    return calculator_agent(model, tool=tool)
