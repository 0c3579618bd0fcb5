"""What reviews a ReAct agent's answer before it is given: its hooks' checks
(``check_answer``: deterministic, in the session machine) and the guard models they ask
(``judge_answer``: a durable model call, journaled, whose reply ``answer_verdict`` reads).
A refusal by either sends the answer back to the model once (see
:func:`eddies.engine.react.answer`). Example::

    review = answer_review(ctx)            # None: the agent's hooks review nothing
    refusal = None if review is None else await review(value)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .durable import DurableCallError
from .handles import ChatModelHandle
from .hooks import HOOK_ERROR, OUTPUT_REFUSED, Hook, InputInfo, JudgeRequest, Refusal, Refuse, answer_refusal

if TYPE_CHECKING:
    from .context import RunnerContext

#: What reviews an answer: its first refusal, or None.
Review = Callable[[Any], Awaitable[Refusal | None]]


def answer_review(ctx: RunnerContext) -> Review | None:
    """What reviews the answers of the action running in ``ctx``: its plan's hooks' checks,
    then their guard models (None: no hook reviews answers). A sub-agent's answer, which
    goes to its caller and not out, is checked but not judged (as ``on_output`` does not
    see it): its judges are the agent's whose models they name."""
    hooks = ctx.step.plan.hooks
    if not hooks:
        return None
    run = ctx.step.run
    info = InputInfo(ctx.session_id, run.input_id, run.number, run.identity)
    judges = () if ctx.scope else tuple(h for h in hooks if h.judges())

    async def review(value: Any) -> Refusal | None:
        refusal = answer_refusal(hooks, value, info)
        for hook in judges:
            if refusal is not None:
                break
            refusal = await _judged(ctx, hook, value, info)
        return refusal
    return review


async def _judged(ctx: RunnerContext, hook: Hook, value: Any, info: InputInfo) -> Refusal | None:
    """``hook``'s guard model's verdict on ``value``; a judge that cannot be asked or read
    refuses (fail closed: the answer goes back to the model, and a second time fails the run)."""
    name = hook.hook_name()
    try:
        asked = hook.judge_answer(value, info)
    except Exception as err:
        return Refusal(name, f"raised on the answer of run {info.run}: {type(err).__name__}: {err}",
                       HOOK_ERROR)
    if asked is None:
        return None
    if not isinstance(asked, JudgeRequest):
        return Refusal(name, f"judge_answer returned {type(asked).__name__}; expected a JudgeRequest or "
                       "None", HOOK_ERROR)
    try:
        setup = ctx.step.plan.chat_model(asked.model)
    except Exception as err:  # a plan check names it first; this is what is left
        return Refusal(name, f"its judge {asked.model!r} is not a CHAT_MODEL resource: {err}", HOOK_ERROR)
    try:
        reply = await ChatModelHandle(ctx.step, asked.model, setup).chat_async(asked.messages, tools=[])
    except DurableCallError as err:
        return Refusal(name, f"its judge {asked.model!r} could not be asked: {err}", OUTPUT_REFUSED)
    try:
        verdict = hook.answer_verdict(value, reply, info)
    except Exception as err:
        return Refusal(name, f"raised on its judge's reply: {type(err).__name__}: {err}", HOOK_ERROR)
    if verdict is None:
        return None
    if not isinstance(verdict, Refuse):
        return Refusal(name, f"answer_verdict returned {type(verdict).__name__}; expected None or Refuse",
                       HOOK_ERROR)
    return Refusal(name, str(verdict.reason), OUTPUT_REFUSED)


__all__ = ["Review", "answer_review"]
