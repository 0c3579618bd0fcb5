"""A guard model as judge of a ReAct agent's answer: before the answer goes out, the
agent's CHAT_MODEL resource ``model`` is asked whether it keeps ``rules``; a FAIL sends it
back to the agent's model once with the judge's reason, and a second FAIL fails the run
(``OutputRefusedError``). The judge's call is a durable model call like any other: it is
journaled (a replay, a fork, ``eddies eval`` read its reply and do not ask again), it goes
through the agent's other hooks (a PII mask applies to what the judge reads), and its
tokens count in the run's budget. Example::

    agent.add_resource("judge", ResourceType.CHAT_MODEL, ChatModelSetup("guard-conn", model="small"))
    agent.add_hook(ModelJudge("judge", "Never promise a refund or a delivery date."))
"""

from __future__ import annotations

import json
from typing import Any

from eddies.engine import Hook, InputInfo, JudgeRequest, PlanError, Refuse
from eddies.engine.plan import AgentPlan
from eddies.engine.resources import ResourceType
from eddies.events import ChatMessage, MessageRole

#: What the judge is told to answer with.
INSTRUCTIONS = (
    "You review an assistant's answer before it reaches the user. The rules it must keep:\n{rules}\n\n"
    "Reply with one line: PASS if the answer keeps every rule, or FAIL: followed by the rule it "
    "breaks and how."
)


class ModelJudge(Hook):
    """Asks the agent's CHAT_MODEL resource ``model`` whether each answer keeps ``rules``
    (text; see :data:`INSTRUCTIONS` for what it is told). Its reply must start with PASS
    or FAIL; anything else is a refusal too (a judge that cannot be read does not pass)."""

    name = "judge"

    def __init__(self, model: str, rules: str) -> None:
        if not model or not rules.strip():
            raise ValueError("ModelJudge: give the CHAT_MODEL resource to ask and the rules to check")
        self.model = model
        self.rules = rules.strip()

    def check_plan(self, plan: AgentPlan) -> None:
        """The plan has the judge's model (checked when the plan is compiled)."""
        entry = plan.resources.get(self.model)
        if entry is None or entry[0] is not ResourceType.CHAT_MODEL:
            raise PlanError(f"hook {self.hook_name()!r}: model {self.model!r} is not a CHAT_MODEL resource "
                            "of the agent")

    def judge_answer(self, value: Any, info: InputInfo) -> JudgeRequest | None:
        said = value if isinstance(value, str) else json.dumps(value)
        told = INSTRUCTIONS.format(rules=self.rules)
        messages = [ChatMessage(MessageRole.SYSTEM, told), ChatMessage(MessageRole.USER, said)]
        return JudgeRequest(self.model, messages)

    def answer_verdict(self, value: Any, reply: ChatMessage, info: InputInfo) -> Refuse | None:
        verdict = (reply.content or "").strip()
        head = verdict[:4].upper()
        if head == "PASS":
            return None
        if head == "FAIL":
            reason = verdict[4:].lstrip(" :-").strip()
            return Refuse(reason or "the judge failed it")
        return Refuse(f"the judge's reply is neither PASS nor FAIL: {verdict[:200]!r}")


__all__ = ["INSTRUCTIONS", "ModelJudge"]
