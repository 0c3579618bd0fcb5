"""Hooks: code an agent declares to stand between it and what it is given and asks for.

A hook sees each input before the session records it, each durable call (model, tool,
sub-agent, retrieval, memory, embedding, user function, timer, signal wait) before it is
made, a ReAct agent's answer before it is given and each run's output before it goes out,
and may pass it, change it or refuse it. Those methods run here, in the engine, where calls
are asked: they must be deterministic (the same call, the same decision), because an
action is executed again from its journal and its hooks with it. What they decide is
therefore what the history holds: a changed input is recorded changed (the input topic
keeps what its producer wrote), a changed call's request carries the changed arguments,
and a refused call is an error the action (or the model, for a tool it asked for) sees,
without any request made. ``admit`` and ``on_result`` run where the call is made (an
executor), once, before and after it, and may use I/O (a policy service, a guard model as
judge): their decision is the call's journaled outcome.

Example (no card numbers reach a model; one tool for one kind of customer)::

    class NoCards(Hook):
        def on_input(self, value, info):
            return CARD.sub("[card]", value) if isinstance(value, str) else value

        def before_call(self, call):
            if call.kind is CallKind.TOOL and call.target == "refund" and call.kwargs.get("amount", 0) > 500:
                return Refuse("refunds over 500 need a person")
            return None

    agent.add_hook(NoCards())
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from eddies.events import CallKind, ChatMessage, ErrorCategory, ErrorInfo, Identity, OutputEvent

#: The error type of a call or an input a hook refused.
REFUSED = "CallRefusedError"
INPUT_REFUSED = "InputRefusedError"
OUTPUT_REFUSED = "OutputRefusedError"
HOOK_ERROR = "HookError"


@dataclass(frozen=True, slots=True)
class Refuse:
    """What a hook returns to refuse: ``reason`` is what the action or the model sees."""

    reason: str


class HookCounts:
    """What hooks counted while deciding on one input, call, result or output (see
    :meth:`CallView.count`): ``"HOOK.NAME" -> n``, the hook being the one deciding."""

    __slots__ = ("counts", "hook")

    def __init__(self) -> None:
        self.hook = ""
        self.counts: dict[str, float] = {}

    def add(self, name: str, n: float) -> None:
        key = f"{self.hook}.{name}"
        self.counts[key] = self.counts.get(key, 0) + n


def _count(counts: HookCounts | None, name: str, n: float) -> None:
    if counts is not None and n:
        counts.add(name, n)


@dataclass(frozen=True, slots=True)
class CallView:
    """A durable call as a hook sees it before it is made: its kind, its target (the
    resource or function it calls) and its arguments as JSON values (``args``, ``kwargs``),
    in the session ``session_id``, run ``run``, and the sub-agent ``scope`` it is made in
    (``()``: the agent's own). A model call's ``kwargs["messages"]`` are its messages
    (``{"role", "content", ...}``); a tool's kwargs are the tool's arguments. ``identity``:
    who asked for the run (its input's verified identity; None: anonymous)."""

    kind: CallKind
    target: str
    args: list[Any]
    kwargs: dict[str, Any]
    session_id: str
    run: int
    scope: tuple[str, ...] = ()
    identity: Identity | None = None
    counts: HookCounts | None = field(default=None, compare=False, repr=False)

    def count(self, name: str, n: float = 1) -> None:
        """Count ``n`` of ``name`` (say, redactions of a kind: counts, never what was
        found) in the worker's metrics, as ``eddies_hook_counter{hook, name}``. A call is
        counted once (when it is first asked, however often its action is replayed) and a
        result once, by the executor that journals it."""
        _count(self.counts, name, n)

    def with_arguments(self, *args: Any, **kwargs: Any) -> CallView:
        """This call with other arguments (each positional or keyword one given replaces
        the call's; the rest are kept). Example: ``call.with_arguments(messages=masked)``."""
        return replace(self, args=list(args) if args else self.args, kwargs={**self.kwargs, **kwargs})


@dataclass(frozen=True, slots=True)
class InputInfo:
    """The input a hook's ``on_input`` is given the value of (or, for ``check_answer`` and
    ``on_output``, the input the run answers): its session, event id, run and who asked
    (``identity``: verified at admission; None: anonymous)."""

    session_id: str
    event_id: str
    run: int
    identity: Identity | None = None
    counts: HookCounts | None = field(default=None, compare=False, repr=False)

    def count(self, name: str, n: float = 1) -> None:
        """Count ``n`` of ``name`` in the worker's metrics (see :meth:`CallView.count`);
        an input and an output are counted when they are admitted and emitted."""
        _count(self.counts, name, n)


class Hook:
    """Base class of hooks: override what the hook looks at. ``name`` (default: the class
    name) is how errors and refusals name it. Hooks run in the order they were added."""

    name: str = ""

    def hook_name(self) -> str:
        return self.name or type(self).__name__

    def on_input(self, value: Any, info: InputInfo) -> Any:
        """The input's value as the session records and runs it (``value``: unchanged), or
        :class:`Refuse`: the input is recorded without its value and its run fails."""
        return value

    def on_output(self, value: Any, info: InputInfo) -> Any:
        """The value of a run's output as it is recorded and sent (``value``: unchanged), or
        :class:`Refuse`: the run's output is a failure instead. ``info`` names the input the
        run answers. Failed outputs and a sub-agent's answers to its caller are not shown."""
        return value

    def on_result(self, call: CallView, value: Any) -> Any:
        """What a call returned (JSON: a model's reply is ``{"role", "content", ...}``) as
        it is journaled and its action sees it (``value``: unchanged), or :class:`Refuse`:
        the call's error is the refusal. It runs in the executor, where the call was made,
        before its outcome is written anywhere: what it decides is journaled, so a replay
        reads it and does not run the hook again. A model call whose hooks look at results
        does not stream its answer as it comes (it would show what the hook may change)."""
        return value

    def check_answer(self, value: Any, info: InputInfo) -> Refuse | None:
        """The answer a ReAct agent is about to give (as its output schema read it): None
        lets it go on to :meth:`on_output`; :class:`Refuse` sends it back to the model once,
        with the reason, and a second refusal fails the run (``OutputRefusedError``). It
        runs in the session machine: deterministic, as ``before_call`` is."""
        return None

    def admit(self, call: CallView) -> Refuse | None:
        """Whether the call may be made: None, or :class:`Refuse` (the call is not made;
        its error is the refusal). It runs in the executor, once, right before the call is
        made, and may use I/O (a policy service, a guard model as judge): what it decides
        is the call's journaled outcome, so a replay, a fork or ``eddies eval`` reads it
        and does not ask again. A rule that needs no I/O belongs in :meth:`before_call`."""
        return None

    def admits(self) -> bool:
        """Whether executors run :meth:`admit` (by default: when the class overrides it)."""
        return type(self).admit is not Hook.admit

    def judge_answer(self, value: Any, info: InputInfo) -> JudgeRequest | None:
        """A question for a guard model about the answer a ReAct agent is about to give
        (after every ``check_answer`` let it through): a :class:`JudgeRequest` naming a
        CHAT_MODEL resource and the messages to send it, asked as a durable call (journaled:
        a replay reads the judge's reply and does not ask again); None: no question. The
        reply goes to :meth:`answer_verdict`."""
        return None

    def answer_verdict(self, value: Any, reply: ChatMessage, info: InputInfo) -> Refuse | None:
        """What the guard model's ``reply`` to :meth:`judge_answer` says of the answer:
        None lets it go, :class:`Refuse` sends it back to the model once with the reason (a
        second refusal fails the run). Deterministic: it reads the journaled reply."""
        return None

    def judges(self) -> bool:
        """Whether a ReAct agent asks this hook's guard model (it overrides judge_answer)."""
        return type(self).judge_answer is not Hook.judge_answer

    def sees_results(self) -> bool:
        """Whether executors run :meth:`on_result` (by default: when the class overrides
        it). A model call none of whose hooks sees results may stream."""
        return type(self).on_result is not Hook.on_result

    def before_call(self, call: CallView) -> CallView | Refuse | None:
        """``None``: the call is made as it is; a :class:`CallView` (``call.with_arguments``):
        made with those arguments; :class:`Refuse`: not made, its error is the refusal."""
        return None


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    """What a hook asks a guard model of an answer: the CHAT_MODEL resource ``model`` of
    the agent, and the ``messages`` to send it (offered no tools)."""

    model: str
    messages: list[ChatMessage]


class HookError(RuntimeError):
    """A hook raised or returned what a hook may not: the message names the hook."""


class OutputRefusedError(RuntimeError):
    """An agent's answer was refused by a hook after it had been sent back to the model."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refusal, with the hook that made it."""

    hook: str
    reason: str
    kind: str = field(default=REFUSED)

    def error(self) -> ErrorInfo:
        """The error a refused call or input ends with (not retried: it would be refused again)."""
        said = (f"hook {self.hook!r} {self.reason}" if self.kind == HOOK_ERROR
                else f"refused by hook {self.hook!r}: {self.reason}")
        return ErrorInfo(self.kind, said, category=ErrorCategory.PERMANENT)


def before_call(hooks: Sequence[Hook], call: CallView) -> CallView | Refusal:
    """``call`` through ``hooks`` in order: the call to make, or the first refusal."""
    counts = call.counts
    for hook in hooks:
        if counts is not None:
            counts.hook = hook.hook_name()
        try:
            decided = hook.before_call(call)
        except Exception as err:
            raise HookError(f"hook {hook.hook_name()!r} raised on {call.kind} {call.target!r}: "
                            f"{type(err).__name__}: {err}") from err
        if decided is None:
            continue
        if isinstance(decided, Refuse):
            return Refusal(hook.hook_name(), str(decided.reason))
        if not isinstance(decided, CallView):
            raise HookError(f"hook {hook.hook_name()!r}: before_call returned {type(decided).__name__}; "
                            "expected None, a CallView or Refuse")
        if decided.kind is not call.kind or decided.target != call.target:
            raise HookError(f"hook {hook.hook_name()!r}: before_call may change a call's arguments, "
                            f"not what it calls ({call.kind} {call.target!r})")
        if decided.counts is not counts:  # a view built anew: the next hooks count too
            decided = replace(decided, counts=counts)
        call = decided
    return call


def _passed(hooks: Sequence[Hook], value: Any, decide: Callable[[Hook, Any], Any], on: str,
            refused: str, counts: HookCounts | None) -> Any:
    """``value`` through ``decide`` of each of ``hooks`` in order: what they let through, or
    the first refusal (of kind ``refused``); a hook that raises (on ``on``) is a refusal of
    kind ``HookError``, so that nothing it was to hide goes through."""
    for hook in hooks:
        if counts is not None:
            counts.hook = hook.hook_name()
        try:
            decided = decide(hook, value)
        except Exception as err:
            return Refusal(hook.hook_name(), f"raised on {on}: {type(err).__name__}: {err}", HOOK_ERROR)
        if isinstance(decided, Refuse):
            return Refusal(hook.hook_name(), str(decided.reason), refused)
        value = decided
    return value


def on_input(hooks: Sequence[Hook], value: Any, info: InputInfo) -> Any:
    """``value`` through ``hooks`` in order: the value to record, or the first :class:`Refusal`."""
    return _passed(hooks, value, lambda hook, v: hook.on_input(v, info), f"the input {info.event_id!r}",
                   INPUT_REFUSED, info.counts)


def answer_refusal(hooks: Sequence[Hook], value: Any, info: InputInfo) -> Refusal | None:
    """The first refusal of the answer ``value`` by ``hooks`` (see :meth:`Hook.check_answer`)."""
    for hook in hooks:
        try:
            decided = hook.check_answer(value, info)
        except Exception as err:
            raise HookError(f"hook {hook.hook_name()!r} raised on the answer of run {info.run}: "
                            f"{type(err).__name__}: {err}") from err
        if isinstance(decided, Refuse):
            return Refusal(hook.hook_name(), str(decided.reason), OUTPUT_REFUSED)
        if decided is not None:
            raise HookError(f"hook {hook.hook_name()!r}: check_answer returned {type(decided).__name__}; "
                            "expected None or Refuse")
    return None


def admitting_hooks(hooks: Sequence[Hook]) -> tuple[Hook, ...]:
    """Those of ``hooks`` that decide whether calls may be made (see :meth:`Hook.admits`)."""
    return tuple(h for h in hooks if h.admits())


def admission(hooks: Sequence[Hook], call: CallView) -> Refusal | None:
    """The first refusal of ``call`` by ``hooks`` (see :meth:`Hook.admit`); a hook that
    raises or returns what it may not refuses it (``HookError``): fail closed."""
    counts = call.counts
    for hook in hooks:
        if counts is not None:
            counts.hook = hook.hook_name()
        try:
            decided = hook.admit(call)
        except Exception as err:
            return Refusal(hook.hook_name(), f"raised on {call.kind} {call.target!r}: "
                           f"{type(err).__name__}: {err}", HOOK_ERROR)
        if isinstance(decided, Refuse):
            return Refusal(hook.hook_name(), str(decided.reason))
        if decided is not None:
            return Refusal(hook.hook_name(), f"returned {type(decided).__name__} from admit; expected "
                           "None or Refuse", HOOK_ERROR)
    return None


def result_hooks(hooks: Sequence[Hook]) -> tuple[Hook, ...]:
    """Those of ``hooks`` that look at calls' results (see :meth:`Hook.sees_results`)."""
    return tuple(h for h in hooks if h.sees_results())


def on_result(hooks: Sequence[Hook], call: CallView, value: Any) -> Any:
    """What ``call`` returned through ``hooks`` in order: the value to journal, or the first
    :class:`Refusal`; a hook that raises is a refusal of its own (``HookError``): nothing
    it was to hide is journaled."""
    return _passed(hooks, value, lambda hook, v: hook.on_result(call, v),
                   f"the result of {call.kind} {call.target!r}", REFUSED, call.counts)


def on_output(hooks: Sequence[Hook], output: OutputEvent, info: InputInfo) -> OutputEvent:
    """A run's ``output`` through ``hooks`` in order: as they let it out, or failed with the
    first refusal (or the error of a hook that raised: nothing it was to hide goes out)."""
    value = _passed(hooks, output.output, lambda hook, v: hook.on_output(v, info),
                    f"the output of run {info.run}", OUTPUT_REFUSED, info.counts)
    if isinstance(value, Refusal):
        return OutputEvent(None, value.error(), output.input_id)
    return output if value is output.output else OutputEvent(value, None, output.input_id)


__all__ = ["HOOK_ERROR", "INPUT_REFUSED", "OUTPUT_REFUSED", "REFUSED", "CallView", "Hook", "HookCounts",
           "HookError", "InputInfo", "JudgeRequest", "OutputRefusedError", "Refusal", "Refuse", "admission",
           "admitting_hooks", "answer_refusal", "before_call", "on_input", "on_output", "on_result",
           "result_hooks"]
