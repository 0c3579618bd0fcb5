"""A session's history as the tree it is: runs, their model, tool, timer and sub-agent
calls, the events between them, and the output.

Built from causation ids alone, so it works on any recorded history (a topic, a
LocalRunner's, a replay's). A call is one node, request and result together, with its
attempts, status, latency, tokens and cost. Runs and sub-agent calls hold what they
caused; a tool or sub-agent call the model asked for sits under that model call (the
latest model call of the same run or sub-agent that answered before it). Example::

    roots = build_tree(runner.history)
    for node in roots[0].walk():
        print(node.depth, node.kind, node.label)

Latency is wall time when the records' times are given (``wall_ms``: event id -> the
record's timestamp on ``app.events``), else the model connection's own measure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eddies.connectors.inspect.summary import cut, detail_text, request_text, result_text
from eddies.engine.budgets import SPENDING_KINDS, reported_usage
from eddies.engine.scopes import agent_of
from eddies.events import (
    AgentEvent,
    CallKind,
    CallStatus,
    DurableCallRequest,
    DurableCallResult,
    InputEvent,
    OutputEvent,
    SubagentCallEvent,
    SubagentResultEvent,
)

#: Node kinds.
RUN, MODEL, TOOL, SUBAGENT, TIMER, CALL, OUTPUT, EVENT, RETRIEVAL, EMBEDDING = (
    "run", "model", "tool", "subagent", "timer", "call", "output", "event", "retrieval",
    "embedding")
_KINDS = {CallKind.CHAT_MODEL: MODEL, CallKind.TOOL: TOOL, CallKind.SUBAGENT: SUBAGENT,
          CallKind.TIMER: TIMER, CallKind.SIGNAL: TIMER, CallKind.VECTOR_STORE: RETRIEVAL,
          CallKind.EMBEDDING: EMBEDDING}


@dataclass
class TraceNode:
    """One step of a session: a run, a call, an output or another event."""

    kind: str
    label: str
    session_id: str
    run: int
    scope: tuple[str, ...]
    seq: int
    #: The events the node stands for (a call's requests and results), in order.
    events: list[AgentEvent] = field(default_factory=list)
    children: list[TraceNode] = field(default_factory=list)
    call_id: str | None = None
    #: ``ok``, ``error``, ``unknown`` (a call whose outcome was lost in a crash),
    #: ``pending`` (no answer in the history) or ``dropped`` (a timer its run outlived).
    status: str = "ok"
    outcome: str = ""
    #: Wall times (ms) of the first event and of the answer, when the records' are known.
    start_ms: int | None = None
    end_ms: int | None = None
    #: A model connection's own measure, used when the records' times are unknown.
    reported_latency_ms: int | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    #: How long a model call waited for its provider (limits, Retry-After) before it began.
    waited_ms: int = 0
    attempts: int = 0
    depth: int = 0

    @property
    def latency_ms(self) -> int | None:
        """Wall time from the first event to the answer, if known."""
        if self.start_ms is not None and self.end_ms is not None and self.end_ms >= self.start_ms:
            return self.end_ms - self.start_ms
        return self.reported_latency_ms

    def walk(self) -> Iterator[TraceNode]:
        """This node and its descendants, depth first, in order."""
        yield self
        for child in self.children:
            yield from child.walk()

    def totals(self) -> tuple[int, int, float | None]:
        """Prompt tokens, completion tokens and cost of this node and its descendants
        (cost None if no model call reported one)."""
        p = c = 0
        cost: float | None = None
        for node in self.walk():
            p += node.prompt_tokens
            c += node.completion_tokens
            if node.cost_usd is not None:
                cost = (cost or 0.0) + node.cost_usd
        return p, c, cost

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for JSON): the node, its totals and its children."""
        p, c, cost = self.totals()
        return {
            "kind": self.kind, "label": self.label, "session_id": self.session_id,
            "run": self.run, "scope": list(self.scope), "seq": self.seq,
            "call_id": self.call_id, "status": self.status, "outcome": self.outcome,
            "latency_ms": self.latency_ms, "waited_ms": self.waited_ms, "attempts": self.attempts,
            "prompt_tokens": p, "completion_tokens": c, "cost_usd": cost,
            "event_ids": [e.event_id for e in self.events],
            "children": [ch.to_dict() for ch in self.children],
        }


def build_tree(history: Sequence[AgentEvent], wall_ms: Mapping[str, int] | None = None) -> list[TraceNode]:
    """The runs of ``history`` (events in session order), each the root of its tree."""
    return _Builder(wall_ms or {}).build(history)


class _Builder:
    def __init__(self, wall_ms: Mapping[str, int]) -> None:
        self.wall = wall_ms
        self.roots: list[TraceNode] = []
        # event id -> the node that holds what that event caused (a run or a sub-agent call)
        self.holder: dict[str, TraceNode] = {}
        self.calls: dict[str, TraceNode] = {}  # call id -> its node
        self.parent: dict[int, TraceNode] = {}  # id(node) -> where it was put

    def build(self, history: Sequence[AgentEvent]) -> list[TraceNode]:
        for ev in history:
            self._add(ev)
        for root in self.roots:
            _set_depth(root, 0)
            if root.status != "pending":
                for node in root.walk():
                    if node.kind == TIMER and node.status == "pending":
                        node.status = "dropped"
        return self.roots

    def _time(self, ev: AgentEvent) -> int | None:
        return self.wall.get(ev.event_id)

    def _node(self, kind: str, label: str, ev: AgentEvent, **kw: Any) -> TraceNode:
        return TraceNode(kind, label, ev.session_id, ev.run, tuple(ev.scope), ev.seq, [ev],
                         start_ms=self._time(ev), **kw)

    def _put(self, node: TraceNode, where: TraceNode) -> None:
        where.children.append(node)
        self.parent[id(node)] = where

    def _holder_of(self, ev: AgentEvent) -> TraceNode | None:
        if ev.causation_id is not None and (h := self.holder.get(ev.causation_id)) is not None:
            return h
        # No known cause (a history read from the middle): the run's root, if seen.
        for root in reversed(self.roots):
            if root.run == ev.run:
                return root
        return None

    def _add(self, ev: AgentEvent) -> None:
        p = ev.payload
        if isinstance(p, InputEvent) and not ev.scope:
            who = p.identity
            said = cut(json.dumps(p.input))
            if who is not None:  # who asked, as the input's signed identity says
                said += f" (user {who.user}" + (f", tenant {who.tenant})" if who.tenant else ")")
            root = self._node(RUN, said, ev, status="pending")
            self.roots.append(root)
            self.holder[ev.event_id] = root
            return
        if isinstance(p, DurableCallResult | SubagentResultEvent):
            self._answer(ev)
            return
        if isinstance(p, DurableCallRequest) and p.call_id in self.calls:
            node = self.calls[p.call_id]  # a retry: the same call, one more attempt
            node.events.append(ev)
            node.attempts = max(node.attempts, p.attempt)
            node.status = "pending"
            self.holder[ev.event_id] = self.parent.get(id(node), node)
            return
        where = self._holder_of(ev)
        if isinstance(p, InputEvent) and where is not None and where.kind == SUBAGENT:
            where.events.append(ev)  # a sub-agent's prompt: its call holds its events
            self.holder[ev.event_id] = where
            return
        if where is None:
            where = self._node(RUN, f"run {ev.run} (its input is not in this history)", ev)
            self.roots.append(where)
        node = self._new(ev)
        self.holder.setdefault(ev.event_id, where)
        if node.kind in (TOOL, SUBAGENT):
            asker = _latest_answered_model(where)
            if asker is not None:
                where = asker
        self._put(node, where)
        if isinstance(p, SubagentCallEvent):
            self.holder[ev.event_id] = node
        if isinstance(p, OutputEvent) and not ev.scope:
            root = where
            while root.kind != RUN:
                root = self.parent[id(root)]
            root.status = "error" if p.error is not None else "ok"
            root.outcome = node.label
            root.end_ms = self._time(ev)

    def _new(self, ev: AgentEvent) -> TraceNode:
        p = ev.payload
        if isinstance(p, DurableCallRequest):
            kind = _KINDS.get(p.kind, CALL)
            label = (p.target if kind in (MODEL, TIMER)
                     else request_text(p).removeprefix("TOOL ").removeprefix(f"{p.kind.value} "))
            if kind == TIMER and p.not_before is not None:
                label += f" (due in {(p.not_before - ev.timestamp) / 1000:g} s)"
            node = self._node(kind, label, ev, call_id=p.call_id, status="pending", attempts=p.attempt)
            self.calls[p.call_id] = node
            return node
        if isinstance(p, SubagentCallEvent):
            node = self._node(SUBAGENT, f"{p.agent}({cut(json.dumps(p.input), 50)})", ev,
                              call_id=p.call_id, status="pending", attempts=1)
            self.calls[p.call_id] = node
            return node
        if isinstance(p, OutputEvent):
            return self._node(OUTPUT, detail_text(ev), ev, status="error" if p.error else "ok")
        return self._node(EVENT, f"{ev.type}: {detail_text(ev)}".rstrip(": "), ev)

    def _answer(self, ev: AgentEvent) -> None:
        p = ev.payload
        assert isinstance(p, DurableCallResult | SubagentResultEvent)
        node = self.calls.get(p.call_id)
        if node is None:  # an answer to a call made before this history starts
            return
        node.events.append(ev)
        self.holder[ev.event_id] = self.parent.get(id(node), node)
        node.end_ms = self._time(ev)
        if isinstance(p, SubagentResultEvent):
            node.status = "error" if p.error is not None else "ok"
            node.outcome = detail_text(ev)
            return
        node.status = {CallStatus.OK: "ok", CallStatus.UNKNOWN: "unknown"}.get(p.status, "error")
        node.outcome = result_text(p)
        if p.kind in SPENDING_KINDS and p.error is None:
            _read_usage(node, p.value)


def _read_usage(node: TraceNode, value: str) -> None:
    try:
        usage = reported_usage(json.loads(value))
    except ValueError:
        return
    if usage is None:
        return
    node.prompt_tokens += int(usage.get("prompt_tokens", 0) or 0)
    node.completion_tokens += int(usage.get("completion_tokens", 0) or 0)
    if usage.get("latency_ms"):
        node.reported_latency_ms = int(usage["latency_ms"])
    if usage.get("waited_ms"):
        node.waited_ms += int(usage["waited_ms"])
    if usage.get("cost_usd") is not None:
        node.cost_usd = (node.cost_usd or 0.0) + float(usage["cost_usd"])


def _latest_answered_model(where: TraceNode) -> TraceNode | None:
    """The last model call among ``where``'s children, if it has its answer."""
    for child in reversed(where.children):
        if child.kind == MODEL:
            return child if child.status != "pending" else None
    return None


def _set_depth(node: TraceNode, depth: int) -> None:
    node.depth = depth
    for child in node.children:
        _set_depth(child, depth + 1)


def scope_name(scope: Sequence[str]) -> str:
    """``travel > weather`` for a sub-agent path, ``""`` for the root agent."""
    return " > ".join(agent_of(part) for part in scope)


def render(roots: Sequence[TraceNode]) -> list[str]:
    """The tree as text lines (``├─`` and ``└─``), each with its latency, tokens and cost."""
    lines: list[str] = []

    def visit(node: TraceNode, lead: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        lines.append(f"{lead}{branch}{line_of(node)}")
        inner = lead + ("" if top else ("   " if last else "│  "))
        for i, child in enumerate(node.children):
            visit(child, inner, i == len(node.children) - 1, False)

    for root in roots:
        visit(root, "", True, True)
    return lines


def line_of(node: TraceNode) -> str:
    """``model llm -> OK "hi"  [12 ms, 20+5 tokens, $0.000013]``."""
    if node.kind == RUN:
        head = f"run {node.run} {node.session_id}: {node.label}"
        if node.outcome:
            head += f" -> {node.outcome}"
        elif node.status == "pending":
            head += " (no output yet)"
    elif node.kind == EVENT:
        head = node.label
    elif node.kind == OUTPUT:
        head = f"output {node.label}"
    else:
        head = f"{node.kind} {node.label}"
        head += f" -> {node.outcome}" if node.outcome else f" ({node.status})"
    facts = []
    if node.kind not in (OUTPUT, EVENT) and node.latency_ms is not None:
        facts.append(f"{node.latency_ms} ms")
    if node.waited_ms:
        facts.append(f"waited {node.waited_ms} ms for its provider")
    if node.attempts > 1:
        facts.append(f"{node.attempts} attempts")
    p, c, cost = node.totals()
    if p or c:
        facts.append(f"{p}+{c} tokens")
    if cost is not None:
        facts.append(f"${cost:.6f}")
    return head + (f"  [{', '.join(facts)}]" if facts else "")
