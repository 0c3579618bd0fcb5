"""One-line summaries of events, as traces, the trace tree and the web view show them."""

from __future__ import annotations

import json
from typing import Any

from eddies.engine.content import split_blocks
from eddies.engine.reflection import ReflectionCritique, ReflectionDraft
from eddies.engine.scopes import agent_of
from eddies.events import (
    AgentEvent,
    ApprovalRequestEvent,
    CallKind,
    ChatResponseEvent,
    DurableCallRequest,
    DurableCallResult,
    InputEvent,
    OutputEvent,
    SignalEvent,
    SubagentCallEvent,
    SubagentResultEvent,
)


def cut(text: str, n: int = 60) -> str:
    """``text`` on one line, at most ``n`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= n else line[:n - 3] + "..."


def call_text(name: str, args: list[Any], kwargs: dict[str, Any]) -> str:
    """``name(1, x="y")``."""
    shown = [json.dumps(a) for a in args] + [f"{k}={json.dumps(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(shown)})"


def request_text(p: DurableCallRequest) -> str:
    """``TOOL add(a=1, b=2)``, ``CHAT_MODEL llm``, ``EMBEDDING emb 3 texts: "first"``,
    ``VECTOR_STORE docs query "a cheap bed"``."""
    detail = f"{p.kind.value} {p.target}"
    if p.kind is CallKind.TOOL:
        try:
            decoded = json.loads(p.args)
            detail = f"TOOL {call_text(p.target, decoded.get('args', []), decoded.get('kwargs', {}))}"
        except (ValueError, AttributeError):
            detail += f" {p.args}"
    elif p.kind is CallKind.EMBEDDING:
        try:
            texts = json.loads(p.args)["kwargs"]["texts"]
            detail += f" {len(texts)} text{'s' * (len(texts) != 1)}: {json.dumps(texts[0])}"
        except (ValueError, AttributeError, KeyError, TypeError, IndexError):
            pass
    elif p.kind is CallKind.VECTOR_STORE:
        try:
            asked = json.loads(p.args)["kwargs"]
            detail += f" {asked['op']}"
            if asked["op"] == "query":
                detail += f" {json.dumps(asked['text'])}"
            elif asked.get("documents") is not None:
                detail += f" {len(asked['documents'])} documents"
        except (ValueError, AttributeError, KeyError, TypeError):
            pass
    return cut(detail, 70)


def result_text(p: DurableCallResult, n: int = 60) -> str:
    """``OK 3``, ``OK asks for add(a=1)``, ``OK 3 vectors of 256``, ``OK 2 documents: a, b``,
    ``FAILED ValueError: ...``."""
    if p.error is not None:
        return cut(f"{p.status.value} {p.error.type}: {p.error.message}", n)
    value = p.value
    if p.kind is CallKind.CHAT_MODEL:
        try:
            reply = json.loads(p.value)
            calls = reply.get("tool_calls") or []
            value = ("asks for " + ", ".join(call_text(c["name"], [], c.get("arguments", {})) for c in calls)
                     if calls else json.dumps(cut(str(reply.get("content", "")), n - 8)))
        except (ValueError, AttributeError, KeyError, TypeError):
            pass
    elif p.kind is CallKind.EMBEDDING:  # the vectors' shape, not their thousands of numbers
        try:
            vectors = json.loads(p.value)["embeddings"]
            value = f"{len(vectors)} vector{'s' * (len(vectors) != 1)} of {len(vectors[0])}"
        except (ValueError, AttributeError, KeyError, TypeError, IndexError):
            pass
    elif p.kind is CallKind.TOOL:  # a tool's images and files, as placeholders
        try:
            result, blocks = split_blocks(json.loads(p.value))
            if blocks:
                value = " ".join([json.dumps(result), *(b.describe() for b in blocks)])
        except (ValueError, AttributeError, KeyError, TypeError):
            pass
    elif p.kind is CallKind.VECTOR_STORE:  # the documents' ids
        try:
            found = json.loads(p.value)["result"]
            if isinstance(found, list) and all(isinstance(d, dict) for d in found):
                value = f"{len(found)} documents: " + ", ".join(str(d.get("id")) for d in found)
            else:
                value = json.dumps(found)
        except (ValueError, AttributeError, KeyError, TypeError):
            pass
    return cut(f"{p.status.value} {value}", n)


def detail_text(ev: AgentEvent) -> str:
    """What ``ev`` says, without its envelope: ``"hello"``, ``TOOL add(a=1)``, ``OK 3``."""
    p = ev.payload
    if isinstance(p, InputEvent):
        return cut(json.dumps(p.input))
    if isinstance(p, OutputEvent):
        return cut(json.dumps(p.output) if p.error is None else f"ERROR {p.error.type}: {p.error.message}")
    if isinstance(p, DurableCallRequest):
        detail = request_text(p)
        if p.not_before is not None:  # logical ms, as the event's timestamp
            wait = p.not_before - ev.timestamp
            detail += f" (due in {wait / 1000:g} s)" if wait >= 0 else f" (due {p.not_before})"
        return detail
    if isinstance(p, SignalEvent):
        return f"{p.name} = {cut(json.dumps(p.value))}"
    if isinstance(p, ApprovalRequestEvent):
        return f"{p.tool}({cut(json.dumps(p.arguments))}) awaits {p.signal}"
    if isinstance(p, DurableCallResult):
        return result_text(p)
    if isinstance(p, ChatResponseEvent):
        return " ".join([cut(json.dumps(p.response.content)), *(b.describe() for b in p.response.blocks)])
    if isinstance(p, ReflectionDraft):
        return f"draft {p.iteration}: {json.dumps(cut(p.draft))}"
    if isinstance(p, ReflectionCritique):
        sure = "no confidence" if p.confidence is None else f"confidence {p.confidence:g}"
        verdict = "passed" if p.passed else "failed"
        return f"draft {p.iteration} {verdict} ({sure}): {json.dumps(cut(p.feedback, 64))}"
    if isinstance(p, SubagentCallEvent):
        return f"{p.agent}({cut(json.dumps(p.input))})"
    if isinstance(p, SubagentResultEvent):
        return (cut(json.dumps(p.output)) if p.error is None
                else f"ERROR {p.error.type}: {cut(p.error.message)}")
    return ""


def describe(ev: AgentEvent) -> str:
    """One line of a trace: ``#3   run 1  | travel DurableCallRequest  react  TOOL ...``
    (a sub-agent's events sit under its caller's call, one ``| name`` per level)."""
    nest = "".join(f"| {agent_of(part)} " for part in ev.scope)
    return f"#{ev.seq:<3} run {ev.run}  {nest}{ev.type:<19} {ev.action or '':<18} {detail_text(ev)}".rstrip()
