"""``ReActAgent``: a reasoning loop (reason, call tools, observe, repeat) with the
options of Confluent's streaming-agents runtime, written on the public context API.

Each input starts a loop: the model is asked, the tools it asks for run (in parallel,
durably; only the tools its setup offers), their results go back to it, until it answers.
Example::

    agent = ReActAgent("support", model="llm", prompt="You answer billing questions.",
                       options=ReActOptions(max_iterations=8, handle_exception="CONTINUE"))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["refund"]))

- ``prompt``: a text (one system message) or a PROMPT resource whose placeholders are
  filled from the agent's config and, as in Flink Agents, from the input: ``{input}`` is
  the input (JSON unless a text), and an input that is an object fills the placeholders
  named after its fields (``"What is ({a} + {b}) * {c}"`` for ``{"a": 1, "b": 2, "c": 3}``).
  A prompt that places the input so is not followed by it again; a placeholder neither
  the config nor the input holds fails the input's run, naming it.
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
- ``tokens_management_strategy`` over ``max_tokens_threshold`` (the executor counts each
  request's tokens, see :mod:`.tokens`): NONE sends it anyway (an oversized request fails
  as the provider fails it); TRIM drops the oldest turns after the original prompt until
  it fits (the loop drops them too); SUMMARIZE replaces them by a summary from a durable
  model call with ``summarization_prompt``. Neither touches the latest turn.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from eddies.events import ChatMessage, ErrorCategory, ErrorInfo, InputEvent, MessageRole, OutputEvent

from .agent import Agent, PlanError
from .conversation import earlier_turns, remember_turn
from .durable import DurableCallError
from .hooks import OutputRefusedError
from .options import from_mapping
from .plan_view import PlanView
from .prompts import INPUT_PLACEHOLDER, opening_messages, prompt_variables
from .resources import ResourceType
from .reviews import Review, answer_review
from .tokens import BUDGET_ARG, REPORT_KEY, split, summarised, summary_request

if TYPE_CHECKING:
    from .context import RunnerContext
    from .handles import ChatModelHandle

ACTION = "react"
T = TypeVar("T")


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
    #: How many of the session's earlier question/answer turns come before a new question
    #: (0: none, each input on its own, as Flink Agents' ReAct): a chat keeps its context.
    remember_turns: int = 0

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> ReActOptions:
        """The options a declarative definition gives (text values read as their types,
        an unknown key a ValueError naming it). Example:
        ``ReActOptions.from_mapping({"max_iterations": "5"})``."""
        return from_mapping(cls, values)

    def __post_init__(self) -> None:
        _positive("max_iterations", self.max_iterations)
        _positive("request_timeout", self.request_timeout, whole=False)
        _positive("max_consecutive_failures", self.max_consecutive_failures)
        _positive("max_tokens_threshold", self.max_tokens_threshold)
        if isinstance(self.remember_turns, bool) or not isinstance(self.remember_turns, int) \
                or self.remember_turns < 0:
            raise ValueError(f"remember_turns: expected a whole number, 0 or more, got "
                             f"{self.remember_turns!r}")
        for option, kind in (("handle_exception", HandleException),
                             ("tokens_management_strategy", TokensManagement),
                             ("summarization_prompt", SummarizationPrompt)):
            object.__setattr__(self, option, _choice(option, getattr(self, option), kind))


class MaxIterationsError(RuntimeError):
    """The model did not answer within ``max_iterations`` model calls."""


class ModelFailedError(RuntimeError):
    """The model's calls failed ``max_consecutive_failures`` times in a row."""


class OutputParseError(ValueError):
    """The model's answer does not parse as the agent's ``output_schema``."""


class ReActAgent(Agent):
    """A ReAct loop per input on the chat model resource ``model`` (see the module)."""

    subagent_compatible = True  # a prompt in, its answer out

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

    def check_plan(self, plan: PlanView) -> None:
        """Called by ``AgentPlan.compile``: the model must be a CHAT_MODEL resource."""
        config = plan.actions[ACTION].config
        # The prompt's placeholders are not checked here: those the config lacks may be
        # fields of an input (an object), known only when it comes (see _opening).
        check_model(plan, f"ReActAgent {self.name!r}", config["model"], config["options"])


#: The name of the built-in sub-agent an agent with a chat model gets (unless it has its own).
GENERAL_PURPOSE = "general-purpose"
GENERAL_PURPOSE_PROMPT = (
    "You are a general-purpose assistant another agent has handed a self-contained task. "
    "Work it out, using the tools you are offered where they help, and answer with the result "
    "only: the agent that asked sees nothing but your answer.")


def general_purpose(model: str) -> ReActAgent:
    """The built-in ``general-purpose`` sub-agent: a ReAct loop on its caller's chat model
    ``model``, offered the same tools (a sub-agent has no sub-agents of its caller's)."""
    agent = ReActAgent(GENERAL_PURPOSE, model=model, prompt=GENERAL_PURPOSE_PROMPT)
    agent.description = ("A general-purpose agent: hand it a self-contained task (in full: it sees "
                         "nothing else of this conversation) and it answers with the result.")
    return agent


def check_model(plan: PlanView, who: str, model: str, options: ReActOptions) -> None:
    """PlanError unless ``model`` is a CHAT_MODEL resource whose connection can keep the
    token budget ``options`` ask for."""
    entry = plan.resources.get(model)
    if entry is None or entry[0] is not ResourceType.CHAT_MODEL:
        raise PlanError(f"{who}: model {model!r} is not a CHAT_MODEL resource")
    if options.tokens_management_strategy is TokensManagement.NONE:
        return
    name = entry[1].connection
    conn = plan.resources.get(name)
    if conn is not None and not callable(getattr(conn[1], "count_tokens", None)):
        raise PlanError(f"{who}: tokens_management_strategy {options.tokens_management_strategy} needs "
                        f"a connection that counts tokens; {name!r} ({type(conn[1]).__name__}) has "
                        "no count_tokens method")


async def react_action(event: InputEvent, ctx: RunnerContext) -> None:
    """One input's loop; after a halt is resumed, the input is tried again from its start."""
    config = ctx.action_config
    opts: ReActOptions = config["options"]
    model: str = config["model"]
    schema = config["output_schema"]
    parse = None if schema is None else (lambda text: parse_output(text, schema))
    llm: ChatModelHandle = ctx.get_resource(model, ResourceType.CHAT_MODEL)
    review = answer_review(ctx)
    value = await under_policy(ctx, opts, lambda: answer(llm, _opening(event, config, llm, ctx), opts, parse,
                                                         review=review))
    if opts.remember_turns:
        asked = event.input if isinstance(event.input, str) else json.dumps(event.input)
        told = value if isinstance(value, str) else json.dumps(value, default=str)
        remember_turn(ctx.short_term_memory, ctx.step.plan.agent_name, opts.remember_turns, asked, told)
    ctx.send_event(OutputEvent(output=value), checked=schema is None)


async def under_policy(ctx: RunnerContext, options: ReActOptions,
                       attempt: Callable[[], Awaitable[T]]) -> T:
    """``attempt()``'s value, under ``handle_exception``: a MaxIterationsError, or under
    CONTINUE any failure, propagates (the run ends with a failed OutputEvent naming it);
    under FAIL a ModelFailedError or OutputParseError halts the session, and once it is
    resumed ``attempt()`` runs again from its start. A sub-agent never halts the session:
    its failure is its caller's failed Result, under the caller's own policy."""
    while True:
        try:
            return await attempt()
        except (ModelFailedError, OutputParseError) as failure:
            if options.handle_exception is HandleException.CONTINUE or ctx.scope:
                raise
            await ctx.halt_async(ErrorInfo(type(failure).__name__, str(failure),
                                           category=ErrorCategory.UNCLASSIFIED))


async def answer(llm: ChatModelHandle, messages: list[ChatMessage], options: ReActOptions,
                 parse: Callable[[str], Any] | None = None, *, review: Review | None = None) -> Any:
    """Ask ``llm``, run the tools it asks for, repeat: its final answer (``parse``d: an
    OutputParseError is shown to the model, which answers again; then ``review``ed, see
    :mod:`.reviews`: a first refusal is shown to the model, which answers again, a second
    raises OutputRefusedError).
    ``messages`` is the conversation so far, kept within the token budget of ``options``.
    Raises MaxIterationsError, ModelFailedError, the last OutputParseError, or
    OutputRefusedError."""
    failures, iterations, refused = 0, 0, False
    budget = _budget(options)
    while iterations < options.max_iterations:
        try:
            reply = await llm.chat_async(messages, **budget)
        except DurableCallError as err:
            iterations += 1
            failures += 1
            if failures >= options.max_consecutive_failures:
                raise ModelFailedError(f"model {llm.name!r} failed {failures} time(s) in a row: "
                                       f"{err}") from None
            continue
        kept = reply.extra_args.pop(REPORT_KEY, None) if budget else None
        if kept is not None:
            if kept.get("summarize"):  # over the budget, nothing was sent: summarise first
                try:
                    messages = await _summarise(llm, messages, options)
                except DurableCallError as err:
                    failures += 1
                    if failures >= options.max_consecutive_failures:
                        raise ModelFailedError(f"model {llm.name!r} failed {failures} time(s) in a "
                                               f"row (a summary): {err}") from None
                continue
            if kept["trimmed"]:  # what the executor dropped is gone for good
                head, _ = split(messages)
                del messages[head:head + kept["trimmed"]]
        iterations += 1
        if reply.tool_calls:
            failures = 0
            messages.append(reply)
            for r in await llm.call_tools_async(reply.tool_calls):
                content = (json.dumps(r.result) if r.error is None
                           else f"error: {r.error.type}: {r.error.message}")
                messages.append(ChatMessage(MessageRole.TOOL, content, [], r.tool_call_id,
                                            blocks=r.blocks))
            continue
        if parse is None:
            value: Any = reply.content
        else:
            try:
                value = parse(reply.content)
            except OutputParseError as err:
                failures += 1
                if failures >= options.max_consecutive_failures:
                    raise
                messages += [reply, ChatMessage(MessageRole.USER, f"That answer cannot be used: {err}. "
                                                "Answer again with only a JSON object that matches "
                                                "the schema.")]
                continue
        refusal = None if review is None else await review(value)
        if refusal is None:
            return value
        if refused:  # it was sent back once already
            raise OutputRefusedError(refusal.error().message)
        refused = True
        messages += [reply, ChatMessage(MessageRole.USER, f"That answer cannot be given: {refusal.reason}. "
                                        "Answer again.")]
    raise MaxIterationsError(f"no final answer from model {llm.name!r} within max_iterations="
                             f"{options.max_iterations} model calls")


def _budget(options: ReActOptions) -> dict[str, Any]:
    if options.tokens_management_strategy is TokensManagement.NONE:
        return {}
    return {BUDGET_ARG: {"strategy": str(options.tokens_management_strategy),
                         "threshold": options.max_tokens_threshold}}


async def _summarise(llm: ChatModelHandle, messages: list[ChatMessage],
                     options: ReActOptions) -> list[ChatMessage]:
    """``messages`` with the turns before the latest context replaced by a summary, from
    a durable model call offered no tools."""
    reply = await llm.chat_async(summary_request(messages, str(options.summarization_prompt)), tools=[])
    return summarised(messages, reply.content)


def _opening(event: InputEvent, config: Any, llm: ChatModelHandle, ctx: RunnerContext
             ) -> list[ChatMessage]:
    prompt = config["prompt"] if config["prompt"] is not None else llm.setup.prompt
    asked = event.input
    question = asked if isinstance(asked, str) else json.dumps(asked)
    resources = ctx.step.plan.resources
    wanted = prompt_variables(resources, prompt)
    fields = input_fields(asked, wanted, ctx.config)
    missing = sorted(wanted - set(ctx.config) - set(fields) - {INPUT_PLACEHOLDER})
    if missing:
        raise ValueError(f"ReActAgent {ctx.step.plan.agent_name!r}: prompt {prompt!r} has placeholders "
                         f"neither the agent's config nor the input's fields hold: {', '.join(missing)}")
    # As in Flink Agents: a prompt that places {input} or the input's fields carries the
    # input where it says; otherwise the question follows the prompt's messages.
    placed = INPUT_PLACEHOLDER in wanted or bool(fields)
    opening = opening_messages(resources, ctx.config, prompt, **{INPUT_PLACEHOLDER: question, **fields})
    schema = config["output_schema"]
    if schema is not None:
        shape = json.dumps(schema.model_json_schema(), sort_keys=True)
        ask = f"Answer with a JSON object that matches this JSON schema: {shape}"
        if opening and opening[0].role is MessageRole.SYSTEM:
            opening[0] = ChatMessage(MessageRole.SYSTEM, f"{opening[0].content}\n\n{ask}")
        else:
            opening.insert(0, ChatMessage(MessageRole.SYSTEM, ask))
    past = earlier_turns(ctx.short_term_memory, ctx.step.plan.agent_name, config["options"].remember_turns)
    if past:  # after the system messages, before what this input asks
        lead = next((i for i, m in enumerate(opening) if m.role is not MessageRole.SYSTEM), len(opening))
        opening[lead:lead] = past
    return opening if placed else [*opening, ChatMessage(MessageRole.USER, question)]


def input_fields(asked: Any, wanted: frozenset[str], config: Mapping[str, Any]) -> dict[str, str]:
    """The fields of input ``asked`` (an object) that fill the placeholders ``wanted`` of a
    ReAct prompt, as Flink Agents' ReActAgent fills them: a text as it is, another value
    as JSON. The agent's config wins over a field of the same name (what the agent's author
    fixed, an input cannot change); a field ``input`` wins over the whole input. Example:
    ``input_fields({"a": 2, "b": "x"}, frozenset({"a"}), {}) == {"a": "2"}``."""
    if not isinstance(asked, Mapping):
        return {}
    return {name: value if isinstance(value, str) else json.dumps(value)
            for name, value in asked.items()
            if name in wanted and name not in config}


_FENCED = re.compile(r"```[a-zA-Z]*\s*\n(.*?)```", re.S)


def parse_output(text: str, schema: Any) -> Any:
    """``text`` (JSON, or JSON in a fenced code block) validated by pydantic model class
    ``schema``, as JSON values; OutputParseError saying why not. Example:
    ``parse_output('```json\\n{"city": "Oslo"}\\n```', City)`` -> ``{"city": "Oslo"}``."""
    try:
        return schema.model_validate_json(_json_body(text)).model_dump(mode="json")
    except Exception as err:  # pydantic's ValidationError, and JSON errors
        first = str(err).strip().splitlines()
        raise OutputParseError(f"not a valid {schema.__name__}: {' '.join(first[:3])[:500]}") from None


def parse_json(text: str, what: str = "JSON") -> Any:
    """The JSON value ``text`` holds (also in a fenced code block); OutputParseError
    naming ``what`` was expected otherwise. Example: ``parse_json('{"ok": true}')``."""
    try:
        return json.loads(_json_body(text))
    except ValueError as err:
        raise OutputParseError(f"not {what}: {err}") from None


def _json_body(text: str) -> str:
    fenced = _FENCED.search(text)
    return (fenced.group(1) if fenced else text).strip()


__all__ = ["HandleException", "MaxIterationsError", "ModelFailedError", "OutputParseError", "ReActAgent",
           "ReActOptions", "SummarizationPrompt", "TokensManagement", "answer", "check_model", "input_fields",
           "parse_json", "parse_output", "under_policy"]
