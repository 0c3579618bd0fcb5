"""A session's history as OpenTelemetry spans: every run, model call, tool call, sub-agent
call, user-function call and wait one span, nested as in the session tree (tree.py), with
the GenAI semantic conventions' attributes on model, tool and agent spans. Pure over
recorded events: the same history gives the same spans, ids included, wherever and however
often it is built (a replay, a test, the worker's live export). Example::

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    exporter.export(spans_of(runner.history, plan=runner.plan))
    [s.name for s in exporter.get_finished_spans()]  # ['invoke_agent planner', 'chat llm', ...]

Ids: a run's trace id is a hash of (session id, run number) and its span's id one of the
same; a call's span id is a hash of (session id, call id). So a replay yields the same
ids, and the spans of part of a run (a worker that took a session over in the middle of a
run exports what it saw) still fit the trace.

Times: the wall time of an event's record (``wall_ms``: event id -> ms since the epoch, the
records' timestamps on ``app.events``; the live export stamps events as it routes them)
where known, else the event's logical timestamp (ms: on Kafka, the input records'
timestamps, so near wall time; a LocalRunner's own clock elsewhere). A span starts at its
first event and ends at the latest event beneath it.

Content (prompts, replies, tool arguments and results) is never put on a span: only names,
ids, token counts, cost, finish reasons and error types and messages. Events that are not
calls (outputs, drafts, critiques, signals) are span events of the span they happened in.
Needs the ``otel`` extra (opentelemetry-sdk).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as SpanEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue

from eddies.connectors.inspect.summary import cut
from eddies.connectors.inspect.tree import (
    CALL,
    EVENT,
    MODEL,
    OUTPUT,
    RUN,
    SUBAGENT,
    TIMER,
    TOOL,
    TraceNode,
    build_tree,
)
from eddies.engine import AgentPlan, ChatModelSetup
from eddies.engine.scopes import agent_of
from eddies.events import (
    AgentEvent,
    CallKind,
    DurableCallRequest,
    DurableCallResult,
    ErrorInfo,
    InputEvent,
    OutputEvent,
    SubagentCallEvent,
    SubagentResultEvent,
)

__all__ = ["resource_of", "span_id_of", "spans_of", "trace_id_of"]

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_SPAN_KINDS = (RUN, MODEL, TOOL, SUBAGENT, CALL, TIMER)


@functools.cache
def _scope() -> InstrumentationScope:
    from eddies import __version__

    return InstrumentationScope("eddies", __version__)


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\0".join(("eddies-otel", *parts)).encode()).digest()


def trace_id_of(session_id: str, run: int) -> int:
    """The trace id of run ``run`` of ``session_id`` (128 bits, never 0)."""
    return int.from_bytes(_digest(session_id, str(run))[:16], "big") or 1


def span_id_of(session_id: str, key: str) -> int:
    """The span id of ``key`` (``run:N``, or ``call:CALL_ID``) in ``session_id`` (64 bits,
    never 0)."""
    return int.from_bytes(_digest(session_id, key)[:8], "big") or 1


@functools.cache
def resource_of(app: str | None = None) -> Resource:
    """The SDK's resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``) with
    ``service.name`` ``eddies`` unless those name one, and ``eddies.app``."""
    base = Resource.create({} if app is None else {"eddies.app": app})
    if str(base.attributes.get("service.name", "")).startswith("unknown_service"):
        base = base.merge(Resource({"service.name": "eddies"}))
    return base


def spans_of(history: Sequence[AgentEvent], wall_ms: Mapping[str, int] | None = None, *,
             plan: AgentPlan | None = None, resource: Resource | None = None,
             ) -> list[ReadableSpan]:
    """The spans of every run in ``history`` (a session's events in order), parents before
    their children. ``plan``: the agent's, to name the model each model resource asks for
    (without it a model span names the resource); ``resource``: default
    :func:`resource_of`."""
    out: list[ReadableSpan] = []
    wall = wall_ms or {}
    res = resource if resource is not None else resource_of()
    for root in build_tree(history, wall):
        _RunSpans(root, wall, plan, res, out).build()
    return out


class _RunSpans:
    """The spans of one run's tree, appended to ``out``."""

    def __init__(self, root: TraceNode, wall: Mapping[str, int], plan: AgentPlan | None,
                 resource: Resource, out: list[ReadableSpan]) -> None:
        self.root, self.wall, self.plan, self.resource, self.out = root, wall, plan, resource, out
        self.trace_id = trace_id_of(root.session_id, root.run)
        # The agent's name, from its own (unscoped) events: a partial run's first may be a
        # sub-agent's.
        self.root_agent = next((e.agent for n in root.walk() for e in n.events if not e.scope), "")

    def build(self) -> None:
        self.out.extend(self._visit(self.root, None, [])[1])

    def _when(self, ev: AgentEvent) -> int:
        return self.wall.get(ev.event_id, ev.timestamp)

    def _visit(self, node: TraceNode, parent: SpanContext | None, notes: list[SpanEvent]
               ) -> tuple[int, list[ReadableSpan]]:
        """The latest time (ms) beneath ``node``, and the spans of ``node`` (if it is one)
        and of its descendants, parents first; a node that is not a span is a span event
        of ``parent`` (put in ``notes``)."""
        latest = max((self._when(e) for e in node.events), default=0)
        spans: list[ReadableSpan] = []
        if not _is_span(node):
            if node.kind in (OUTPUT, EVENT) and node.events:
                notes.append(self._note(node))
            for child in node.children:
                when, below = self._visit(child, parent, notes)
                latest = max(latest, when)
                spans += below
            return latest, spans
        key = f"run:{node.run}" if node.kind == RUN else f"call:{node.call_id}"
        context = SpanContext(self.trace_id, span_id_of(node.session_id, key), is_remote=False,
                              trace_flags=_SAMPLED)
        mine: list[SpanEvent] = []
        for child in node.children:
            when, below = self._visit(child, context, mine)
            latest = max(latest, when)
            spans += below
        start = self._when(node.events[0]) if node.events else latest
        name, kind, attributes = self._describe(node)
        status = self._status(node, attributes)
        span = ReadableSpan(
            name, context, parent, self.resource, attributes, mine, kind=kind, status=status,
            start_time=start * 1_000_000, end_time=max(start, latest) * 1_000_000,
            instrumentation_scope=_scope())
        return latest, [span, *spans]

    def _agent(self, scope: Sequence[str]) -> str:
        return agent_of(scope[-1]) if scope else self.root_agent

    def _describe(self, node: TraceNode) -> tuple[str, SpanKind, dict[str, AttributeValue]]:
        attrs: dict[str, AttributeValue] = {
            "eddies.session_id": node.session_id, "gen_ai.conversation.id": node.session_id,
            "eddies.run": node.run, "eddies.scope": "/".join(node.scope),
            "eddies.agent": self._agent(node.scope), "eddies.status": node.status,
        }
        if node.events:
            attrs["eddies.event_id"] = node.events[0].event_id
        first = node.events[0].payload if node.events else None
        who = first.identity if isinstance(first, InputEvent | DurableCallRequest) else None
        if who is not None:  # who asked (verified at admission)
            attrs["enduser.id"] = who.user
            if who.tenant is not None:
                attrs["eddies.tenant"] = who.tenant
        if node.kind == RUN:
            attrs.update({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.root_agent})
            if not isinstance(first, InputEvent):
                attrs["eddies.partial"] = True  # the run's input is not in this history
            p, c, cost = node.totals()
            _usage(attrs, p, c, cost)
            return f"invoke_agent {self.root_agent}".rstrip(), SpanKind.INTERNAL, attrs
        assert node.call_id is not None
        attrs["eddies.call_id"] = node.call_id
        attrs["eddies.call.attempts"] = max(1, node.attempts)
        target = first.target if isinstance(first, DurableCallRequest) else ""
        if isinstance(first, DurableCallRequest):
            attrs["eddies.call.kind"] = first.kind.value
        if node.kind == MODEL:
            model = self._model(node.scope, target)
            attrs.update({"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                          "eddies.model.resource": target})
            _usage(attrs, node.prompt_tokens, node.completion_tokens, node.cost_usd)
            reasons = _finish_reasons(node)
            if reasons:
                attrs["gen_ai.response.finish_reasons"] = reasons
            return f"chat {model}", SpanKind.CLIENT, attrs
        if node.kind == TOOL:
            attrs.update({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": target,
                          "gen_ai.tool.type": "function"})
            return f"execute_tool {target}", SpanKind.INTERNAL, attrs
        if node.kind == SUBAGENT:
            # An internal sub-agent runs in this session; an external one (HTTP, A2A) is a
            # durable call to another service.
            internal = isinstance(first, SubagentCallEvent)
            agent = first.agent if isinstance(first, SubagentCallEvent) else target
            attrs.update({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent})
            p, c, cost = node.totals()
            _usage(attrs, p, c, cost)
            return f"invoke_agent {agent}", SpanKind.INTERNAL if internal else SpanKind.CLIENT, attrs
        if node.kind == TIMER:
            return f"wait {target}", SpanKind.INTERNAL, attrs
        return f"call {target}", SpanKind.INTERNAL, attrs

    def _model(self, scope: Sequence[str], resource: str) -> str:
        """The model the CHAT_MODEL resource ``resource`` of ``scope``'s agent asks for,
        or the resource's name if the plan does not say."""
        plan = self.plan
        if plan is None:
            return resource
        for part in scope:  # a sub-agent's resources are its plan's
            sub = plan.subagents.get(agent_of(part))
            if sub is None:
                break
            plan = sub
        entry = plan.resources.get(resource)
        setup = entry[1] if entry is not None else None
        return setup.model if isinstance(setup, ChatModelSetup) and setup.model else resource

    def _status(self, node: TraceNode, attrs: dict[str, AttributeValue]) -> Status:
        # Success stays UNSET, as the semantic conventions ask of instrumentations.
        if node.status not in ("error", "unknown"):
            return Status(StatusCode.UNSET)
        error = _error_of(node)
        if error is not None:
            attrs["error.type"] = error.type
            return Status(StatusCode.ERROR, cut(f"{error.type}: {error.message}", 500))
        attrs["error.type"] = "OutcomeUnknown"  # lost in a crash, and not asked again
        return Status(StatusCode.ERROR, node.outcome or node.status)

    def _note(self, node: TraceNode) -> SpanEvent:
        ev = node.events[0]
        attrs: dict[str, AttributeValue] = {"eddies.event_id": ev.event_id, "eddies.seq": ev.seq,
                                            "eddies.scope": "/".join(ev.scope)}
        if isinstance(ev.payload, OutputEvent) and ev.payload.error is not None:
            attrs["error.type"] = ev.payload.error.type
        return SpanEvent(ev.type, attrs, self._when(ev) * 1_000_000)


def _is_span(node: TraceNode) -> bool:
    # A timer its run outlived (a run deadline that never fired) is not a step of the run.
    return node.kind in _SPAN_KINDS and not (node.kind == TIMER and node.status == "dropped") and (
        node.kind == RUN or node.call_id is not None)


def _usage(attrs: dict[str, AttributeValue], prompt: int, completion: int, cost: float | None) -> None:
    attrs["gen_ai.usage.input_tokens"] = prompt
    attrs["gen_ai.usage.output_tokens"] = completion
    if cost is not None:
        attrs["eddies.cost_usd"] = cost


def _finish_reasons(node: TraceNode) -> tuple[str, ...]:
    """The finish reason the model connection recorded (``extra_args["finish_reason"]``,
    as the LiteLLM connection does) in the call's last successful result."""
    for ev in reversed(node.events):
        p = ev.payload
        if isinstance(p, DurableCallResult) and p.kind is CallKind.CHAT_MODEL and p.error is None:
            try:
                reply: Any = json.loads(p.value)
                reason = (reply.get("extra_args") or {}).get("finish_reason")
            except (ValueError, AttributeError):
                return ()
            return (reason,) if isinstance(reason, str) and reason else ()
    return ()


def _error_of(node: TraceNode) -> ErrorInfo | None:
    """The error of a failed call (its last answer's) or run (its failed OutputEvent)."""
    events = node.events if node.kind != RUN else [
        e for ch in node.children if ch.kind == OUTPUT and not ch.scope for e in ch.events]
    for ev in reversed(events):
        p = ev.payload
        if isinstance(p, DurableCallResult | SubagentResultEvent | OutputEvent) and p.error is not None:
            return p.error
    return None
