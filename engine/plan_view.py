"""``PlanView``: what a running action (its context, handles and built-in loops) reads of
its compiled plan.

The plan module compiles an agent together with the built-in actions and sub-agents
(chat, ReAct), which are themselves actions run through a context; typing the action side
against this view, not :class:`~eddies.engine.plan.AgentPlan`, keeps the plan above them
in the import graph. ``AgentPlan`` satisfies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from eddies.events import CallKind

from .agent import ActionSpec
from .hooks import Hook
from .remote_tools import RemoteTool
from .resources import ChatModelSetup, FunctionTool, ResourceType


class PlanView(Protocol):
    """The read-only lookups of a compiled plan an action side needs."""

    @property
    def config(self) -> Mapping[str, Any]: ...

    @property
    def actions(self) -> Mapping[str, ActionSpec]: ...

    @property
    def resources(self) -> Mapping[str, tuple[ResourceType, Any]]: ...

    @property
    def agent_name(self) -> str: ...

    @property
    def hooks(self) -> tuple[Hook, ...]: ...

    def tool(self, name: str) -> FunctionTool | RemoteTool: ...

    def chat_model(self, name: str) -> ChatModelSetup: ...

    def offered_tools(self, model: str) -> tuple[str, ...]: ...

    def call_timeout(self, kind: CallKind, target: str,
                     kwargs: dict[str, Any] | None = None) -> int | None: ...


__all__ = ["PlanView"]
