"""``ReflectionAgent``: a drafter and a critic in a bounded loop (the Confluent runtime's
reflection workflow), written on the public context API.

The drafter answers the task; the critic reviews the draft; until the critic passes a
draft, the drafter writes the next one from the original task, its previous draft and the
critic's feedback. Each draft and each critique is an event of the session
(:class:`ReflectionDraft`, :class:`ReflectionCritique`), so ``eddies tail`` and
``eddies replay`` show the loop; the drafting and the reviewing are separate actions
triggered by them. Example::

    agent = ReflectionAgent("review", drafter="writer", critic="editor",
                            options=ReflectionOptions(max_iterations=3, confidence_value=0.8))
    agent.add_resource("writer", ResourceType.CHAT_MODEL, ChatModelSetup("conn", prompt="..."))
    agent.add_resource("editor", ResourceType.CHAT_MODEL, ChatModelSetup("conn", prompt="..."))

The drafter and the critic are CHAT_MODEL resources (a model setup); one whose setup
offers tools runs a ReAct loop with them, under ``loop`` (:class:`ReActOptions`: its
iterations, failure policy and token budget). The OutputEvent holds ``{"status":
"APPROVED" | "NOT_APPROVED", "draft", "iterations", "confidence", "feedback"}``: the
approved draft, or after ``max_iterations`` critiques the last draft, NOT_APPROVED.

``pass_condition`` says how a critique passes:

- a keyword (default ``APPROVED``): the critic's answer starts with it (case and
  markdown emphasis aside; ``NOT APPROVED`` does not). The feedback is the rest of the
  answer; a confidence is read from a ``confidence: 0.8`` (or ``80%``) in it.
- ``$.field`` or ``$.field == VALUE``: the answer is a JSON object (also in a fenced
  block) whose field (dotted path) is ``true``, or equals VALUE (case aside). Feedback
  comes from its ``feedback`` field and the confidence from its ``confidence`` field. An
  answer that is no such JSON is shown to the critic, which answers again (it counts as
  a failure, as an unparsable ReAct answer does).

``confidence_value`` (0..1, default none): a pass also needs the critic's confidence to
be at least this; no confidence given counts as 0.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from eddies.events import ChatMessage, Event, InputEvent, MessageRole, OutputEvent

from .agent import Agent
from .options import from_mapping
from .plan import AgentPlan, PlanError
from .react import OutputParseError, ReActOptions, answer, check_model, parse_json, under_policy
from .resources import ResourceType

if TYPE_CHECKING:
    from .context import RunnerContext
    from .handles import ChatModelHandle

APPROVED, NOT_APPROVED = "APPROVED", "NOT_APPROVED"


@dataclass(slots=True)
class ReflectionDraft(Event):
    """Draft ``iteration`` (from 1) of the answer to ``task``; ``feedback`` is the critique
    it answers ("" for the first)."""

    event_type: ClassVar[str] = "ReflectionDraft"
    task: str = ""
    iteration: int = 0
    draft: str = ""
    feedback: str = ""


@dataclass(slots=True)
class ReflectionCritique(Event):
    """The critic's review of draft ``iteration``: ``passed`` by the pass condition (and
    the confidence), its ``feedback`` and ``confidence`` (None when it gave none), and its
    whole ``answer``; ``final`` when it ends the loop."""

    event_type: ClassVar[str] = "ReflectionCritique"
    task: str = ""
    iteration: int = 0
    draft: str = ""
    passed: bool = False
    confidence: float | None = None
    feedback: str = ""
    answer: str = ""
    final: bool = False


@dataclass(frozen=True)
class Verdict:
    """How the critic judged a draft."""

    passed: bool
    confidence: float | None
    feedback: str


_PATH = re.compile(r"^\$\.([A-Za-z_][\w.]*)\s*(?:==\s*(.+?))?\s*$")
_KEYWORD = re.compile(r"^[A-Za-z][\w-]*$")
_CONFIDENCE = re.compile(r"confidence\W{0,3}\s*[:=]?\s*(\d+(?:\.\d+)?)\s*(%?)", re.I)
_EMPHASIS = " \t\r\n*_#>`\"'"


@dataclass(frozen=True)
class PassCondition:
    """A parsed ``pass_condition``: a keyword, or a JSON path (and the value it must have).
    Example: ``PassCondition.parse("$.verdict == pass").judge('{"verdict": "PASS"}')``."""

    keyword: str | None = None
    path: tuple[str, ...] = ()
    value: str | None = None

    @classmethod
    def parse(cls, text: str) -> PassCondition:
        """The condition ``text`` says; ValueError naming the option when it is neither form."""
        if not isinstance(text, str):
            raise ValueError(f"ReflectionOptions.pass_condition: expected text, got {text!r}")
        found = _PATH.match(text.strip())
        if found is not None:
            value = found.group(2)
            return cls(None, tuple(found.group(1).split(".")),
                       None if value is None else value.strip().strip("'\""))
        if _KEYWORD.match(text.strip()):
            return cls(keyword=text.strip())
        raise ValueError(f"ReflectionOptions.pass_condition: {text!r} is neither a keyword (such as "
                         "APPROVED) nor a JSON path ($.approved, or $.verdict == PASS)")

    def instructions(self, confidence: bool) -> str:
        """What the critic is told about the shape of its answer."""
        if self.keyword is not None:
            text = (f"Start your answer with {self.keyword} if the draft fully does the task; "
                    f"otherwise start it with REVISE and say exactly what must change.")
            if confidence:
                text += " End with a line 'confidence: C', C from 0 to 1: how sure you are."
            return text
        where = ".".join(self.path)
        want = "true if the draft fully does the task" if self.value is None else \
            f'"{self.value}" if the draft fully does the task'
        text = (f"Answer with only a JSON object: {where!r} is {want}; 'feedback' says exactly "
                "what must change otherwise")
        return text + (", and 'confidence' (0 to 1) how sure you are." if confidence else ".")

    def judge(self, text: str) -> Verdict:
        """The verdict of critic answer ``text``; OutputParseError for a JSON condition
        whose answer is not a JSON object with that field."""
        if self.keyword is not None:
            body = text.lstrip(_EMPHASIS)
            head = body[:len(self.keyword)]
            after = body[len(self.keyword):len(self.keyword) + 1]
            passed = head.upper() == self.keyword.upper() and not (after.isalnum() or after == "_")
            rest = body[len(self.keyword):].lstrip(_EMPHASIS + ":.-,") if passed else text.strip()
            return Verdict(passed, _confidence_in(text), rest)
        value = parse_json(text, "a JSON verdict")
        if not isinstance(value, dict):
            raise OutputParseError(f"not a JSON object: {text[:200]!r}")
        found: Any = value
        for part in self.path:
            if not isinstance(found, dict) or part not in found:
                raise OutputParseError(f"the verdict has no field {'.'.join(self.path)!r}")
            found = found[part]
        want = self.value
        passed = found is True if want is None else str(found).strip().upper() == want.upper()
        raw = value.get("confidence")
        confidence = _unit(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None
        feedback = value.get("feedback")
        return Verdict(passed, confidence, feedback if isinstance(feedback, str) else text.strip())


def _confidence_in(text: str) -> float | None:
    found = _CONFIDENCE.search(text)
    if found is None:
        return None
    number = float(found.group(1))
    return _unit(number / 100 if found.group(2) or number > 1 else number)


def _unit(number: float) -> float | None:
    return min(max(float(number), 0.0), 1.0) if math.isfinite(number) else None


@dataclass(frozen=True)
class ReflectionOptions:
    """The options of a :class:`ReflectionAgent`, checked when made (a ValueError names
    the option). Example: ``ReflectionOptions(max_iterations=2, pass_condition="$.ok")``.

    ``max_iterations``: drafts (each then reviewed) at most; ``loop``: the options of the
    drafter's and the critic's own loops (their tool rounds, failure policy, token budget;
    its ``request_timeout`` is the whole run's deadline)."""

    max_iterations: int = 3
    pass_condition: str = APPROVED
    confidence_value: float | None = None
    loop: ReActOptions = field(default_factory=ReActOptions)
    condition: PassCondition = field(init=False, repr=False, compare=False, default=PassCondition())

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> ReflectionOptions:
        """The options a declarative definition gives (text values read as their types,
        an unknown key a ValueError naming it). Example:
        ``ReflectionOptions.from_mapping({"max_iterations": "5"})``."""
        return from_mapping(cls, values)

    def __post_init__(self) -> None:
        n = self.max_iterations
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"ReflectionOptions.max_iterations: expected a positive integer, got {n!r}")
        c = self.confidence_value
        if c is not None and (isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 <= c <= 1):
            raise ValueError(f"ReflectionOptions.confidence_value: expected a number from 0 to 1, got {c!r}")
        if not isinstance(self.loop, ReActOptions):
            raise ValueError(f"ReflectionOptions.loop: expected ReActOptions, got {self.loop!r}")
        object.__setattr__(self, "condition", PassCondition.parse(self.pass_condition))


class ReflectionAgent(Agent):
    """A drafter-critic loop per input (see the module)."""

    subagent_compatible = True  # a prompt in, its answer out

    def __init__(self, name: str, *, drafter: str, critic: str, drafter_prompt: str | None = None,
                 critic_prompt: str | None = None, options: ReflectionOptions | None = None,
                 version: str | None = None, config: dict[str, Any] | None = None) -> None:
        opts = options if options is not None else ReflectionOptions()
        if not isinstance(opts, ReflectionOptions):
            raise TypeError(f"ReflectionAgent {name!r}: options must be ReflectionOptions, got {opts!r}")
        merged = {"request_timeout_ms": round(opts.loop.request_timeout * 1000), **(config or {})}
        super().__init__(name, version, merged)
        roles = {"drafter": drafter, "critic": critic, "drafter_prompt": drafter_prompt,
                 "critic_prompt": critic_prompt, "options": opts}
        self.add_action("draft", (InputEvent, ReflectionCritique), draft_action, **roles)
        self.add_action("critique", ReflectionDraft, critique_action, **roles)

    def check_plan(self, plan: AgentPlan) -> None:
        """Called by ``AgentPlan.compile``: drafter and critic must be CHAT_MODEL resources."""
        config = plan.actions["draft"].config
        opts: ReflectionOptions = config["options"]
        for role in ("drafter", "critic"):
            if not isinstance(config[role], str):
                raise PlanError(f"ReflectionAgent {self.name!r}: {role} must be the name of a CHAT_MODEL "
                                f"resource, got {config[role]!r}")
            check_model(plan, f"ReflectionAgent {self.name!r} ({role})", config[role], opts.loop)


async def draft_action(event: InputEvent | ReflectionCritique, ctx: RunnerContext) -> None:
    """Write the first draft for an input, or the next one after a critique that did not
    end the loop."""
    if isinstance(event, ReflectionCritique):
        if event.final:
            return
        task, iteration, feedback = event.task, event.iteration + 1, event.feedback
        ask = (f"The task:\n{task}\n\nYour previous draft:\n{event.draft}\n\nA reviewer's feedback "
               f"on it:\n{feedback}\n\nWrite an improved draft that addresses the feedback. "
               "Answer with the draft only.")
    else:
        task = event.input if isinstance(event.input, str) else json.dumps(event.input)
        iteration, ask, feedback = 1, task, ""
    config = ctx.action_config
    opts: ReflectionOptions = config["options"]
    llm: ChatModelHandle = ctx.get_resource(config["drafter"], ResourceType.CHAT_MODEL)
    prompt = config["drafter_prompt"] if config["drafter_prompt"] is not None else llm.setup.prompt
    text = await under_policy(ctx, opts.loop, lambda: answer(llm, _conversation(prompt, ask), opts.loop))
    ctx.send_event(ReflectionDraft(task, iteration, text, feedback))


async def critique_action(event: ReflectionDraft, ctx: RunnerContext) -> None:
    """Review a draft; emit the critique, and the output once the loop ends."""
    config = ctx.action_config
    opts: ReflectionOptions = config["options"]
    condition = opts.condition
    llm: ChatModelHandle = ctx.get_resource(config["critic"], ResourceType.CHAT_MODEL)
    base = config["critic_prompt"] if config["critic_prompt"] is not None else llm.setup.prompt
    prompt = f"{base or 'You review drafts.'}\n\n{condition.instructions(opts.confidence_value is not None)}"
    ask = f"The task:\n{event.task}\n\nThe draft to review:\n{event.draft}"
    verdicts: list[Verdict] = []

    def judged(text: str) -> str:
        verdicts.append(condition.judge(text))
        return text

    parse: Callable[[str], Any] | None = None if condition.keyword is not None else judged
    text = await under_policy(ctx, opts.loop,
                              lambda: answer(llm, _conversation(prompt, ask), opts.loop, parse))
    verdict = verdicts[-1] if parse is not None else condition.judge(text)
    sure = verdict.confidence if verdict.confidence is not None else 0.0
    passed = verdict.passed and (opts.confidence_value is None or sure >= opts.confidence_value)
    final = passed or event.iteration >= opts.max_iterations
    ctx.send_event(ReflectionCritique(event.task, event.iteration, event.draft, passed,
                                      verdict.confidence, verdict.feedback, text, final))
    if final:
        ctx.send_event(OutputEvent(output={
            "status": APPROVED if passed else NOT_APPROVED, "draft": event.draft,
            "iterations": event.iteration, "confidence": verdict.confidence,
            "feedback": verdict.feedback}))


def _conversation(prompt: str | None, ask: str) -> list[ChatMessage]:
    opening = [ChatMessage(MessageRole.SYSTEM, prompt)] if prompt else []
    return [*opening, ChatMessage(MessageRole.USER, ask)]


__all__ = ["APPROVED", "NOT_APPROVED", "PassCondition", "ReflectionAgent", "ReflectionCritique",
           "ReflectionDraft", "ReflectionOptions", "Verdict"]
