"""What a candidate did with one case: its output (or error), and what it spent, read from
the session's history: tokens and cost of its model calls, how many model calls
(iterations) and tool calls it made, the calls an evaluation refused, and its wall time.
Example::

    result = case_result(case, "new", runner.history, latency_ms=84.0, refused={})
    result.output, result.tokens, result.metric("cost_usd")
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eddies.connectors.evaluation.cases import Case
from eddies.connectors.evaluation.policy import MODEL_KINDS
from eddies.connectors.execution.recorded_calls import REFUSED_ERROR
from eddies.connectors.inspect.tree import build_tree
from eddies.events import AgentEvent, DurableCallRequest, DurableCallResult, InputEvent, OutputEvent

#: The metrics a threshold may name.
METRICS = ("cost_usd", "tokens", "latency_ms", "iterations", "tool_calls", "refused_calls")


@dataclass
class CaseResult:
    """One case, run by one candidate."""

    case: Case
    candidate: str
    output: Any = None
    error: str | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    iterations: int = 0
    tool_calls: int = 0
    #: Calls the evaluation did not make (call id -> why).
    refused: dict[str, str] = field(default_factory=dict)
    #: The session's events (for the report's side-by-side view).
    history: list[AgentEvent] = field(default_factory=list)
    #: Of its model calls (chat and embedding), those answered from the recording: on
    #: recorded traffic, a candidate whose every one was has not asked its model at all.
    model_calls: int = 0
    model_calls_recorded: int = 0

    def metric(self, name: str) -> float:
        """The value of metric ``name`` (one of :data:`METRICS`)."""
        if name == "refused_calls":
            return float(len(self.refused))
        if name not in METRICS:
            raise KeyError(f"no metric {name!r}: one of {', '.join(METRICS)}")
        return float(getattr(self, name))


def case_result(case: Case, candidate: str, history: Sequence[AgentEvent], *, latency_ms: float,
                refused: Mapping[str, str] | None = None,
                recorded: Collection[str] = ()) -> CaseResult:
    """What ``history`` (the case's session, in order) says the candidate did; the calls
    refused (call id -> why) as given, or as its results say (None); ``recorded``: the
    calls answered from a recording."""
    if refused is None:
        refused = {p.call_id: p.error.message for ev in history
                   if isinstance(p := ev.payload, DurableCallResult)
                   and p.error is not None and p.error.type == REFUSED_ERROR}
    out = CaseResult(case, candidate, latency_ms=latency_ms, refused=dict(refused), history=list(history))
    answered = False
    for ev in history:
        p = ev.payload
        if isinstance(p, OutputEvent) and not ev.scope:
            answered = True
            out.output = p.output
            out.error = None if p.error is None else f"{p.error.type}: {p.error.message}"
    if not answered:
        out.error = "no output (the session waits for a signal or an approval)"
    models = {p.call_id for ev in history if isinstance(p := ev.payload, DurableCallRequest)
              and p.kind in MODEL_KINDS}
    out.model_calls = len(models)
    out.model_calls_recorded = len(models.intersection(recorded))
    for root in build_tree(history):
        prompt, completion, cost = root.totals()
        out.tokens += prompt + completion
        out.cost_usd += cost or 0.0
        for node in root.walk():
            out.iterations += node.kind == "model"
            out.tool_calls += node.kind in ("tool", "subagent", "retrieval")
    return out


def wall_latency(timed: Sequence[tuple[int, AgentEvent]]) -> float:
    """Wall time of a session's recorded runs, from its events with their records' times
    (ms): from each input's record to its run's last output's."""
    starts: dict[int, int] = {}
    ends: dict[int, int] = {}
    for time_ms, ev in timed:
        if isinstance(ev.payload, InputEvent) and not ev.scope:
            starts.setdefault(ev.run, time_ms)
        elif isinstance(ev.payload, OutputEvent) and not ev.scope:
            ends[ev.run] = time_ms
    return float(sum(ends[r] - starts[r] for r in ends if r in starts))


__all__ = ["METRICS", "CaseResult", "case_result", "wall_latency"]
