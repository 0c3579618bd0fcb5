"""``ReActAgent``: a reasoning loop (reason, call tools, observe, repeat) with the
options of Confluent's streaming-agents runtime, written on the public context API.

Each input starts a loop: the model is asked, the tools it asks for run (in parallel,
durably; only the tools its setup offers), their results go back to it, until it answers.
Example::

    agent = ReActAgent("support", model="llm", prompt="You answer billing questions.",
                       options=ReActOptions(max_iterations=8, handle_exception="CONTINUE"))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["refund"]))

- ``max_iterations`` (20): model calls per input; past it the run ends with a failed
  OutputEvent (``MaxIterationsError``).
- ``request_timeout`` (600 s): the run's deadline (``request_timeout_ms``).
- ``max_consecutive_failures`` (1) and ``handle_exception`` (FAIL): a failure is a model
  call that failed (after its retries) or an answer that does not parse as
  ``output_schema``; a parse failure is shown to the model, which answers again. After
  that many in a row, CONTINUE ends the run with a failed OutputEvent (the session goes
  on with its next input), FAIL halts the session (:mod:`.halts`): its later inputs wait,
  nothing is lost, and ``eddies resume SESSION`` retries the input once the cause is fixed.
- ``output_schema``: a pydantic model class; the answer (JSON, also in a fenced code
  block) is validated with it and the OutputEvent holds ``model_dump(mode="json")``.
- ``tokens_management_strategy``: NONE (an oversized request fails as the provider fails
  it); TRIM and SUMMARIZE are refused until they are built, naming the option.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eddies.events import ChatMessage, ErrorCategory, ErrorInfo, InputEvent, MessageRole, OutputEvent

from .agent import Agent
from .durable import DurableCallError
from .resources import ResourceType

if TYPE_CHECKING:
    from .context import RunnerContext
    from .handles import ChatModelHandle
    from .plan import AgentPlan

ACTION = "react"


class HandleException(enum.StrEnum):
    """What ``max_consecutive_failures`` failures in a row do."""

    FAIL = "FAIL"  # halt the session until it is resumed
    CONTINUE = "CONTINUE"  # fail this input; the session goes on


class TokensManagement(enum.StrEnum):
    """How a conversation over ``max_tokens_threshold`` is kept in bounds."""

    NONE = "NONE"
    TRIM = "TRIM"
    SUMMARIZE = "SUMMARIZE"


class SummarizationPrompt(enum.StrEnum):
    """The prompt SUMMARIZE asks for a summary with."""

    CONCISE = "CONCISE"
    STRUCTURED = "STRUCTURED"
    VERBOSE = "VERBOSE"


def _choice(option: str, value: Any, kind: type[enum.StrEnum]) -> Any:
    text = value.value if isinstance(value, enum.Enum) else value
    if isinstance(text, str):
        for member in kind:
            if member.value == text.strip().upper():
                return member
    raise ValueError(f"ReActOptions.{option}: {value!r} is not one of "
                     f"{', '.join(m.value for m in kind)}")


def _positive(option: str, value: Any, *, whole: bool = True) -> None:
    kinds: tuple[type[int] | type[float], ...] = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:
        raise ValueError(f"ReActOptions.{option}: expected a positive "
                         f"{'integer' if whole else 'number'}, got {value!r}")


@dataclass(frozen=True)
class ReActOptions:
    """The options of a :class:`ReActAgent` (the Confluent runtime's, with its guide's
    defaults; its SQL reference says 10 and 3 for the first two). Checked when made: a
    wrong one is a ValueError naming it. Example: ``ReActOptions(max_iterations=5)``."""

    max_iterations: int = 20
    request_timeout: float = 600.0  # seconds
    handle_exception: HandleException | str = HandleException.FAIL
    max_consecutive_failures: int = 1
    max_tokens_threshold: int = 100_000
    tokens_management_strategy: TokensManagement | str = TokensManagement.NONE
    summarization_prompt: SummarizationPrompt | str = SummarizationPrompt.CONCISE

    def __post_init__(self) -> None:
        _positive("max_iterations", self.max_iterations)
        _positive("request_timeout", self.request_timeout, whole=False)
        _positive("max_consecutive_failures", self.max_consecutive_failures)
        _positive("max_tokens_threshold", self.max_tokens_threshold)
        for option, kind in (("handle_exception", HandleException),
                             ("tokens_management_strategy", TokensManagement),
                             ("summarization_prompt", SummarizationPrompt)):
            object.__setattr__(self, option, _choice(option, getattr(self, option), kind))
        if self.tokens_management_strategy is not TokensManagement.NONE:
            raise ValueError(f"ReActOptions.tokens_management_strategy: "
                             f"{self.tokens_management_strategy} is not available yet in this "
                             "release; use NONE")


class MaxIterationsError(RuntimeError):
    """The model did not answer within ``max_iterations`` model calls."""


class ModelFailedError(RuntimeError):
    """The model's calls failed ``max_consecutive_failures`` times in a row."""


class OutputParseError(ValueError):
    """The model's answer does not parse as the agent's ``output_schema``."""


class ReActAgent(Agent):
    """A ReAct loop per input on the chat model resource ``model`` (see the module)."""

    def __init__(self, name: str, *, model: str, prompt: str | None = None,
                 output_schema: type | None = None, options: ReActOptions | None = None,
                 version: str | None = None, config: dict[str, Any] | None = None) -> None:
        opts = options if options is not None else ReActOptions()
        if not isinstance(opts, ReActOptions):
            raise TypeError(f"ReActAgent {name!r}: options must be ReActOptions, got {opts!r}")
        if output_schema is not None and not callable(getattr(output_schema, "model_validate_json", None)):
            raise TypeError(f"ReActAgent {name!r}: output_schema must be a pydantic model class, "
                            f"got {output_schema!r}")
        merged = {"request_timeout_ms": round(opts.request_timeout * 1000), **(config or {})}
        super().__init__(name, version, merged)
        self.add_action(ACTION, InputEvent, react_action, model=model, prompt=prompt,
                        output_schema=output_schema, options=opts)

    def check_plan(self, plan: AgentPlan) -> None:
        """Called by ``AgentPlan.compile``: the model must be a CHAT_MODEL resource."""
        from .plan import PlanError

        model = plan.actions[ACTION].config["model"]
        entry = plan.resources.get(model)
        if entry is None or entry[0] is not ResourceType.CHAT_MODEL:
            raise PlanError(f"ReActAgent {self.name!r}: model {model!r} is not a CHAT_MODEL resource")


async def react_action(event: InputEvent, ctx: RunnerContext) -> None:
    """One input's loop; after a halt is resumed, the input is tried again from its start."""
    config = ctx.action_config
    opts: ReActOptions = config["options"]
    while True:
        failure = await _loop(event, ctx, config)
        if failure is None:
            return
        if opts.handle_exception is HandleException.CONTINUE or isinstance(failure, MaxIterationsError):
            raise failure  # the run ends with a failed OutputEvent naming it
        await ctx.halt_async(ErrorInfo(type(failure).__name__, str(failure),
                                       category=ErrorCategory.UNCLASSIFIED))


async def _loop(event: InputEvent, ctx: RunnerContext, config: Any) -> Exception | None:
    """Ask, run tools, repeat: None once answered, else the failure that stopped it."""
    opts: ReActOptions = config["options"]
    model: str = config["model"]
    schema = config["output_schema"]
    llm: ChatModelHandle = ctx.get_resource(model, ResourceType.CHAT_MODEL)
    messages = _opening(event, config, llm)
    failures = 0
    for _ in range(opts.max_iterations):
        try:
            reply = await llm.chat_async(messages)
        except DurableCallError as err:
            failures += 1
            if failures >= opts.max_consecutive_failures:
                return ModelFailedError(f"model {model!r} failed {failures} time(s) in a row: {err}")
            continue
        if reply.tool_calls:
            failures = 0
            messages.append(reply)
            for r in await ctx.call_tools_async(model, reply.tool_calls):
                content = (json.dumps(r.result) if r.error is None
                           else f"error: {r.error.type}: {r.error.message}")
                messages.append(ChatMessage(MessageRole.TOOL, content, [], r.tool_call_id))
            continue
        if schema is None:
            ctx.send_event(OutputEvent(output=reply.content))
            return None
        try:
            value = parse_output(reply.content, schema)
        except OutputParseError as err:
            failures += 1
            if failures >= opts.max_consecutive_failures:
                return err
            messages += [reply, ChatMessage(MessageRole.USER, f"That answer cannot be used: {err}. "
                                            "Answer again with only a JSON object that matches "
                                            "the schema.")]
            continue
        ctx.send_event(OutputEvent(output=value))
        return None
    return MaxIterationsError(f"no final answer from model {model!r} within max_iterations="
                              f"{opts.max_iterations} model calls")


def _opening(event: InputEvent, config: Any, llm: ChatModelHandle) -> list[ChatMessage]:
    prompt = config["prompt"] if config["prompt"] is not None else llm.setup.prompt
    schema = config["output_schema"]
    if schema is not None:
        shape = json.dumps(schema.model_json_schema(), sort_keys=True)
        prompt = f"{prompt or ''}\n\nAnswer with a JSON object that matches this JSON schema: {shape}".strip()
    question = event.input if isinstance(event.input, str) else json.dumps(event.input)
    opening = [ChatMessage(MessageRole.SYSTEM, prompt)] if prompt else []
    return [*opening, ChatMessage(MessageRole.USER, question)]


_FENCED = re.compile(r"```[a-zA-Z]*\s*\n(.*?)```", re.S)


def parse_output(text: str, schema: Any) -> Any:
    """``text`` (JSON, or JSON in a fenced code block) validated by pydantic model class
    ``schema``, as JSON values; OutputParseError saying why not. Example:
    ``parse_output('```json\\n{"city": "Oslo"}\\n```', City)`` -> ``{"city": "Oslo"}``."""
    fenced = _FENCED.search(text)
    body = (fenced.group(1) if fenced else text).strip()
    try:
        return schema.model_validate_json(body).model_dump(mode="json")
    except Exception as err:  # pydantic's ValidationError, and JSON errors
        first = str(err).strip().splitlines()
        raise OutputParseError(f"not a valid {schema.__name__}: {' '.join(first[:3])[:500]}") from None


__all__ = ["HandleException", "MaxIterationsError", "ModelFailedError", "OutputParseError", "ReActAgent",
           "ReActOptions", "SummarizationPrompt", "TokensManagement", "parse_output"]
