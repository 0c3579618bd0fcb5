"""``Agent`` and ``@action``: an agent is a set of actions triggered by event types.

Example::

    class Greeter(Agent):
        @action(InputEvent)
        def start(event, ctx):
            ctx.send_event(OutputEvent(output=f"hello {event.input}"))

Actions take ``(event, ctx)``; they may be ``async def`` and await
``ctx.durable_execute_async(...)``. Resources are added per instance with
``add_resource(name, ResourceType, obj)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eddies.events import Event

from .resources import ResourceType

Trigger = type[Event] | str
ACTION_ATTR = "__eddies_action__"


class PlanError(ValueError):
    """The agent definition is invalid; the message names the agent (once
    ``AgentPlan.compile`` has seen it: ``agent``) and the action or resource."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        #: The agent whose definition is wrong (None until compile names it).
        self.agent: str | None = None


@dataclass(frozen=True)
class ActionSpec:
    """An action: its name, function, trigger event types and per-action config."""

    name: str
    fn: Callable[..., Any]
    triggers: tuple[Trigger, ...]
    config: dict[str, Any] = field(default_factory=dict)
    is_async: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.fn))


def action(*triggers: Trigger, name: str | None = None, **config: Any) -> Callable[[Any], Any]:
    """Mark a function ``(event, ctx)`` as an action run for each event of ``triggers``.

    Triggers are Event classes or type names (for events known only by name).
    """

    def mark(fn: Any) -> Any:
        raw = fn.__func__ if isinstance(fn, staticmethod) else fn
        setattr(raw, ACTION_ATTR, (tuple(triggers), name, dict(config)))
        return fn

    return mark


@dataclass(frozen=True)
class Resource:
    """A named resource of an agent."""

    name: str
    type: ResourceType
    obj: Any


class Agent:
    """Base class of agents: collects ``@action`` functions of the class and its bases.

    ``name`` and ``version`` are stamped on every event the agent emits.
    """

    name: str = ""
    version: str = "1"
    #: Whether it may run as another agent's sub-agent (an AGENT resource): an agent
    #: written to be called (its input a prompt, its OutputEvent the answer) says so.
    subagent_compatible: bool = False
    #: What it does, as a model calling it as a tool is told.
    description: str = ""

    def __init__(
        self,
        name: str | None = None,
        version: str | None = None,
        config: dict[str, Any] | None = None,
        *,
        builtin_actions: bool = True,
        subagent_compatible: bool | None = None,
        description: str | None = None,
    ) -> None:
        self.name = name or type(self).name or type(self).__name__
        self.version = version or type(self).version
        if subagent_compatible is not None:
            self.subagent_compatible = subagent_compatible
        if description is not None:
            self.description = description
        self.config: dict[str, Any] = dict(config or {})
        self.builtin_actions = builtin_actions
        self.actions: list[ActionSpec] = []
        self.resources: list[Resource] = []
        #: Hooks on its inputs and calls, in the order they run (see :mod:`eddies.engine.hooks`).
        self.hooks: list[Any] = []
        seen: set[str] = set()
        for klass in reversed(type(self).__mro__):
            for attr, value in vars(klass).items():
                raw = value.__func__ if isinstance(value, staticmethod) else value
                marked = getattr(raw, ACTION_ATTR, None)
                if marked is None:
                    continue
                trig, explicit, cfg = marked
                action_name = explicit or attr
                if action_name in seen:  # an override in a subclass replaces the base action
                    self.actions = [a for a in self.actions if a.name != action_name]
                seen.add(action_name)
                self.actions.append(ActionSpec(action_name, raw, trig, cfg))

    def add_action(
        self, name: str, triggers: Trigger | tuple[Trigger, ...], fn: Callable[..., Any], **config: Any
    ) -> Agent:
        """Add an action without decorating it; returns the agent for chaining."""
        trig = triggers if isinstance(triggers, tuple) else (triggers,)
        self.actions.append(ActionSpec(name, fn, trig, dict(config)))
        return self

    def add_hook(self, hook: Any) -> Agent:
        """Add a :class:`~eddies.engine.hooks.Hook` after those added before (a sub-agent's
        calls go through its caller's hooks, then its own); returns the agent for chaining."""
        self.hooks.append(hook)
        return self

    def add_resource(self, name: str, resource_type: ResourceType, obj: Any) -> Agent:
        """Add a resource (see :class:`ResourceType`); returns the agent for chaining."""
        self.resources.append(Resource(name, resource_type, obj))
        return self
