"""Prompts as resources: a text or a list of messages with ``{name}`` placeholders
(``{{`` and ``}}`` for braces), formatted with the values given.

A PROMPT resource may stand wherever a prompt's text goes: a chat model setup's
``prompt``, a ReActAgent's or a RagAgent's ``prompt`` name it, and its messages open the
conversation, formatted with the agent's config (a placeholder the config does not hold
fails the agent's compilation, naming it; a ReActAgent's may also be filled from the
input's fields, so it fails that input's run instead). An action formats one itself.
Example::

    agent = ReActAgent("support", model="llm", prompt="support_prompt",
                       config={"company": "Acme"})
    agent.add_resource("support_prompt", ResourceType.PROMPT,
                       Prompt.from_text("You answer billing questions for {company}."))

    ctx.get_resource("support_prompt", ResourceType.PROMPT).format(company="Acme")
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eddies.events import ChatMessage, MessageRole

from .agent import PlanError
from .plan_view import PlanView
from .resources import ResourceType

#: The placeholder a ReActAgent fills with its input (Flink Agents' name for it).
INPUT_PLACEHOLDER = "input"


@dataclass(frozen=True)
class Prompt:
    """A prompt of one or more messages, each content a template."""

    messages: tuple[ChatMessage, ...]

    @classmethod
    def from_text(cls, text: str, role: MessageRole = MessageRole.SYSTEM) -> Prompt:
        """A prompt of one message (a system prompt by default)."""
        return cls((ChatMessage(role, text),))

    @classmethod
    def from_messages(cls, messages: Iterable[ChatMessage | Mapping[str, Any]]) -> Prompt:
        """A prompt of ``messages`` (ChatMessages, or ``{"role", "content"}`` mappings)."""
        out = []
        for m in messages:
            if isinstance(m, ChatMessage):
                out.append(m)
            elif isinstance(m, Mapping) and isinstance(m.get("content"), str):
                out.append(ChatMessage(MessageRole(m.get("role", "system")), m["content"]))
            else:
                raise TypeError(f"a prompt message is a ChatMessage or a {{'role', 'content'}} "
                                f"mapping, got {m!r:.60}")
        if not out:
            raise ValueError("a prompt has at least one message")
        return cls(tuple(out))

    def __post_init__(self) -> None:
        self.variables  # noqa: B018  (a malformed template fails here, where it was made)

    @property
    def variables(self) -> frozenset[str]:
        """The names of its placeholders."""
        names = set()
        for m in self.messages:
            try:
                parsed = list(string.Formatter().parse(m.content))
            except ValueError as err:
                raise ValueError(f"prompt template {m.content[:60]!r}: {err}") from None
            for _, name, _, _ in parsed:
                if name is not None:
                    if not name.isidentifier():
                        raise ValueError(f"prompt template {m.content[:60]!r}: placeholder "
                                         f"{{{name}}} is not a name")
                    names.add(name)
        return frozenset(names)

    def format_messages(self, **values: Any) -> list[ChatMessage]:
        """The messages with their placeholders filled from ``values``; a KeyError names a
        placeholder without a value."""
        missing = sorted(self.variables - set(values))
        if missing:
            raise KeyError(f"prompt placeholders without a value: {', '.join(missing)}")
        return [ChatMessage(m.role, m.content.format(**values)) for m in self.messages]

    def format(self, **values: Any) -> str:
        """The messages' contents, formatted, one paragraph each."""
        return "\n\n".join(m.content for m in self.format_messages(**values))

    @property
    def system_text(self) -> str:
        """Its system messages' templates, one paragraph each: the prompt where one text is
        wanted (a reflection agent's drafter or critic).

            Prompt.from_text("You draft.").system_text == "You draft."
        """
        return "\n\n".join(m.content for m in self.messages if m.role is MessageRole.SYSTEM)


@dataclass(frozen=True)
class McpPrompt:
    """A PROMPT served by an MCP server: prompt ``name`` of MCP_SERVER resource ``server``,
    got with ``arguments`` when a runner starts (``prompts/get``). An argument's value may
    be a ``{placeholder}``: it stays one in the messages, filled like any prompt's (from
    the agent's config, a ReActAgent's ``{input}``); braces the server wrote are text.
    Example::

        agent.add_resource("plan_prompt", ResourceType.PROMPT,
                           McpPrompt("guides", "trip_plan", arguments={"city": "{city}"}))
    """

    server: str
    name: str
    arguments: Mapping[str, str] = field(default_factory=dict)
    #: Its messages, as templates: filled when a runner starts (never by the engine).
    discovered: list[ChatMessage] = field(default_factory=list, compare=False, repr=False)

    @property
    def prompt(self) -> Prompt:
        """The prompt it was found to be (a PlanError if the server was not asked yet)."""
        if not self.discovered:
            raise PlanError(f"prompt {self.name!r} of MCP server {self.server!r} was not fetched: "
                            "runners fetch it when they start (eddies.connectors.remote.discovery)")
        return Prompt(tuple(self.discovered))

    @property
    def variables(self) -> frozenset[str]:
        """The names of its placeholders."""
        return self.prompt.variables

    def format_messages(self, **values: Any) -> list[ChatMessage]:
        """:meth:`Prompt.format_messages` of the prompt the server gave."""
        return self.prompt.format_messages(**values)

    def format(self, **values: Any) -> str:
        """:meth:`Prompt.format` of the prompt the server gave."""
        return self.prompt.format(**values)


def opening_messages(resources: Mapping[str, tuple[ResourceType, Any]], config: Mapping[str, Any],
                     prompt: str | None, **values: Any) -> list[ChatMessage]:
    """The messages that open a conversation for ``prompt``: a PROMPT resource's, formatted
    with ``config`` and ``values`` (one given as plain text: that text), or the text as one
    system message (none for no prompt)."""
    if not prompt:
        return []
    entry = resources.get(prompt)
    if entry is not None and entry[0] is ResourceType.PROMPT:
        found: Prompt | McpPrompt | str = entry[1]
        if isinstance(found, Prompt | McpPrompt):
            return found.format_messages(**{**config, **values})
        prompt = found  # a PROMPT resource given as plain text: no placeholders
    return [ChatMessage(MessageRole.SYSTEM, prompt)]


def prompt_variables(resources: Mapping[str, tuple[ResourceType, Any]], prompt: str | None) -> frozenset[str]:
    """The placeholders of the PROMPT resource ``prompt`` names (none for a text)."""
    entry = resources.get(prompt) if prompt else None
    if entry is not None and entry[0] is ResourceType.PROMPT and isinstance(entry[1], Prompt | McpPrompt):
        return entry[1].variables
    return frozenset()


def check_prompt(plan: PlanView, who: str, prompt: str | None, given: Iterable[str] = ()) -> None:
    """PlanError when ``prompt`` names a PROMPT resource with a placeholder neither the
    agent's config nor ``given`` (what the agent fills in itself, e.g. ``input``) holds."""
    missing = sorted(prompt_variables(plan.resources, prompt) - set(plan.config) - set(given))
    if missing:
        raise PlanError(f"{who}: prompt {prompt!r} has placeholders the agent's config does not "
                        f"hold: {', '.join(missing)}")


__all__ = ["INPUT_PLACEHOLDER", "McpPrompt", "Prompt", "check_prompt", "opening_messages", "prompt_variables"]
