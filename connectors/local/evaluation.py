"""Running an evaluation: each candidate agent (and the baseline agent, if there is one)
answers every case in this process, on a :class:`LocalRunner` of its own, and the scorers
judge the answers. Model calls are made live (the candidate's model); any other call is
made only if it cannot be a side effect: an idempotent call (a read), or one of the
targets ``CallPolicy(allow=...)`` names. Any other call fails with a CallRefusedError the
agent sees, and the report lists it per case: an evaluation never repeats a production
side effect by default. Example::

    report = evaluate(load_cases("cases.jsonl"), {"new": new_plan}, [Equals(), Contains("Porto")],
                      baseline=("old", old_plan))
    print("\\n".join(report.lines()))
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from eddies.connectors.evaluation.cases import Case
from eddies.connectors.evaluation.report import EvalReport
from eddies.connectors.evaluation.results import CaseResult, case_result
from eddies.connectors.evaluation.scorers import Score, Scorer
from eddies.connectors.execution.recorded_calls import RecordedCalls
from eddies.connectors.local.runner import LocalRunner
from eddies.engine import AgentPlan
from eddies.events import CallKind, DurableCallRequest

#: Calls that are always made live: asking a model (or an embedding model) changes nothing.
MODEL_KINDS = (CallKind.CHAT_MODEL, CallKind.EMBEDDING)
#: Vector store operations that write (a memory set's too).
STORE_WRITES = ("add", "update", "delete")


@dataclass(frozen=True)
class CallPolicy:
    """Which calls an evaluation makes live: models, reads, and the targets of ``allow``."""

    allow: frozenset[str] = frozenset()

    def refusal(self, request: DurableCallRequest) -> str | None:
        """Why ``request`` may not be made live (None: it may)."""
        if request.kind in MODEL_KINDS or request.target in self.allow:
            return None
        writes = request.kind is CallKind.VECTOR_STORE and _store_op(request) in STORE_WRITES
        if request.idempotent and not writes:
            return None
        what = "writes to a vector store" if writes else "is not idempotent"
        return (f"{request.kind.value} {request.target} {what} and no recording answers it: an "
                f"evaluation does not repeat a side effect (allow it: --allow-call {request.target})")


def run_candidate(name: str, plan: AgentPlan, cases: Sequence[Case],
                  policy: CallPolicy = CallPolicy()) -> list[CaseResult]:
    """What candidate ``name`` (its plan) does with each case, one case at a time."""
    calls = RecordedCalls({}, plan=plan, refuse=policy.refusal)
    runner = LocalRunner(plan, recorded=calls)
    out = []
    try:
        for case in cases:
            seen, refused_before = len(runner.history), set(calls.refused)
            start = time.perf_counter()
            runner.submit(case.id, case.input)
            runner.run_until_waiting()
            latency = (time.perf_counter() - start) * 1000
            history = [ev for ev in runner.history[seen:] if ev.session_id == case.id]
            refused = {k: v for k, v in calls.refused.items() if k not in refused_before}
            out.append(case_result(case, name, history, latency_ms=latency, refused=refused))
    finally:
        runner.executor.close()
    return out


def evaluate(cases: Sequence[Case], candidates: Mapping[str, AgentPlan], scorers: Sequence[Scorer], *,
             baseline: tuple[str, AgentPlan] | str | None = None,
             policy: CallPolicy = CallPolicy()) -> EvalReport:
    """Run ``candidates`` (name -> plan) on ``cases`` and score them. ``baseline``: another
    agent (name, plan) run the same way, or the name of one of the candidates; None: the
    cases' expected outputs are the only yardstick."""
    names = [s.name for s in scorers]
    if len(set(names)) != len(names):
        raise ValueError(f"scorers need names of their own (name=...): {', '.join(names)}")
    runs = dict(candidates)
    base_name = baseline if isinstance(baseline, str) or baseline is None else baseline[0]
    if isinstance(baseline, tuple):
        if baseline[0] in runs:
            raise ValueError(f"the baseline's name {baseline[0]!r} is a candidate's")
        runs = {baseline[0]: baseline[1], **runs}
    elif baseline is not None and baseline not in runs:
        raise ValueError(f"baseline {baseline!r} is not a candidate (candidates: {', '.join(runs)})")
    results = {name: run_candidate(name, plan, cases, policy) for name, plan in runs.items()}
    base = results.get(base_name) if base_name is not None else None
    scores: dict[str, dict[str, list[Score]]] = {
        name: {s.name: [s(r, None if base is None else base[i]) for i, r in enumerate(got)] for s in scorers}
        for name, got in results.items()}
    return EvalReport(list(candidates), base_name, results, scores)


def _store_op(request: DurableCallRequest) -> str | None:
    try:
        op = json.loads(request.args).get("kwargs", {}).get("op")
    except (ValueError, AttributeError):
        return None
    return op if isinstance(op, str) else None


__all__ = ["CallPolicy", "evaluate", "run_candidate"]
