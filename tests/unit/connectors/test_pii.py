"""PiiRedaction: what it finds (checksums and valid numbers only), how it masks, hashes
(keyed) or refuses, and an agent whose model never sees a customer's e-mail or card."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import ChatModelSetup, InputEvent, LocalRunner, OutputEvent, ReActAgent, ResourceType
from eddies.connectors.guardrails.pii import PiiRedaction
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.events import CallKind, ChatMessage, DurableCallRequest, MessageRole, ToolCall, decode_value

TEXT = ("Mail ann.lee@example.com or call +44 20 7946 0958; card 4111 1111 1111 1111 (and a wrong "
        "one 4111 1111 1111 1112); IBAN GB82 WEST 1234 5698 7654 32, not GB83 WEST 1234 5698 7654 32; "
        "SSN 536-90-4399; order 1234-5678.")


def test_it_finds_what_checksums_and_numbering_plans_confirm() -> None:
    found = [(TEXT[s:e], kind) for s, e, kind in PiiRedaction().spans(TEXT)]
    assert found == [("ann.lee@example.com", "email"), ("+44 20 7946 0958", "phone"),
                     ("4111 1111 1111 1111", "card"), ("GB82 WEST 1234 5698 7654 32", "iban"),
                     ("536-90-4399", "us_ssn")]
    masked, kinds = PiiRedaction().redact(TEXT)
    assert masked == ("Mail [email] or call [phone]; card [card] (and a wrong one 4111 1111 1111 1112); "
                      "IBAN [iban], not GB83 WEST 1234 5698 7654 32; SSN [us_ssn]; order 1234-5678.")
    assert kinds == ["email", "phone", "card", "iban", "us_ssn"]
    # A number written without its country code counts where its region says how to read it.
    assert PiiRedaction(phone_region="US").redact("call (212) 555-0182")[0] == "call [phone]"
    assert PiiRedaction().redact("call (212) 555-0182")[0] == "call (212) 555-0182"


def test_hashing_is_keyed_and_the_same_for_the_same_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PII_KEY", "k1")
    first = PiiRedaction(action="hash", key_env="PII_KEY").redact("card 4111 1111 1111 1111")[0]
    again = PiiRedaction(action="hash", key_env="PII_KEY").redact("card 4111111111111111 x")[0]
    monkeypatch.setenv("PII_KEY", "k2")
    other = PiiRedaction(action="hash", key_env="PII_KEY").redact("card 4111 1111 1111 1111")[0]
    assert first.startswith("card [card:") and len(first) == len("card [card:]") + 16
    assert first != other and again != first  # the key and the text written decide it
    monkeypatch.delenv("PII_KEY")
    with pytest.raises(ValueError, match="action 'hash' needs a key: .*PII_KEY is not set"):
        PiiRedaction(action="hash", key_env="PII_KEY")
    with pytest.raises(ValueError, match="kinds: \\['passport'\\]"):
        PiiRedaction(kinds=("passport",))


SEEN: list[str] = []
LOOKED_UP: list[dict[str, Any]] = []


def find_customer(email: str) -> str:
    """Find a customer by e-mail."""
    LOOKED_UP.append({"email": email})
    return "customer c-7"


def support_model(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    SEEN.extend(m.content for m in messages)
    if not any(m.role is MessageRole.TOOL for m in messages):
        # A model that copies what it read into a tool call: ann's address, if it read it.
        asked = messages[-1].content.split()[-1]
        return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("c1", "find_customer", {"email": asked})])
    asked = messages[1].content
    return ChatMessage(MessageRole.ASSISTANT, f"Thanks! Write to ann.lee@example.com about {asked}")


def support_agent(hook: PiiRedaction) -> ReActAgent:
    agent = ReActAgent("support", model="llm", prompt="You help customers.")
    agent.add_resource("find_customer", ResourceType.TOOL, find_customer)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(support_model))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["find_customer"]))
    return agent.add_hook(hook)


def test_the_model_and_the_history_never_hold_the_customers_data() -> None:
    SEEN.clear()
    LOOKED_UP.clear()
    runner = LocalRunner(support_agent(PiiRedaction()))
    [answer] = runner.run([("s1", "card 4111 1111 1111 1111 was charged twice, I am ann.lee@example.com")])
    assert answer == "Thanks! Write to [email] about card [card] was charged twice, I am [email]"
    assert SEEN and not any("4111" in t or "ann.lee" in t for t in SEEN)
    assert LOOKED_UP == [{"email": "[email]"}]
    for ev in runner.history:  # the recorded input, every request, the output
        assert "4111 1111" not in str(ev.payload) and "ann.lee" not in str(ev.payload), ev
    requests = [decode_value(p.args) for e in runner.history
                if isinstance(p := e.payload, DurableCallRequest) and p.kind is CallKind.CHAT_MODEL]
    assert requests and [e.payload.input for e in runner.history if isinstance(e.payload, InputEvent)] == \
        ["card [card] was charged twice, I am [email]"]
    # Counted where found: the input's card and address, the address in the model's answer.
    assert {k: n for k, n in runner.metrics.items() if k[0] == "hook"} == {
        ("hook", "pii.card"): 1, ("hook", "pii.email"): 2}


def test_refusing_fails_the_input_and_tells_what_it_held() -> None:
    runner = LocalRunner(support_agent(PiiRedaction(action="refuse", kinds=("card",))))
    runner.submit("s1", "card 4111 1111 1111 1111 please")
    runner.run_until_idle()
    [out] = [p for e in runner.outputs if isinstance(p := e.payload, OutputEvent)]
    assert out.error is not None and out.error.type == "InputRefusedError"
    assert out.error.message == "refused by hook 'pii': it holds personal data (card)"


def test_a_model_whose_results_are_checked_does_not_stream() -> None:
    """Its deltas would show what the hook may still mask: the answer comes whole."""
    from eddies.connectors.execution.calls import CallPerformer
    from eddies.engine import AgentPlan

    req = DurableCallRequest("s1:r1:i1:c0", CallKind.CHAT_MODEL, "llm", '{"args":[],"kwargs":{}}')
    assert not CallPerformer(AgentPlan.compile(support_agent(PiiRedaction()))).streams(req, ())
    assert CallPerformer(AgentPlan.compile(support_agent(PiiRedaction(results=False)))).streams(req, ())
