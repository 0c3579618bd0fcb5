"""Running an evaluation: each candidate agent (and the baseline agent, if there is one)
answers every case in this process, on a :class:`LocalRunner` of its own, and the scorers
judge the answers. Cases come from a file, or from an app's recorded traffic
(:func:`recorded_traffic`: a case a session, what the recording answered as expected).

Model calls are made live, by the candidate's model; on recorded traffic, a call made just
as the recording made it (same place, same arguments, same model) is answered from it,
models too unless ``CallPolicy(live_models=True)``. Any other call is made only if it
cannot be a side effect: an idempotent call (a read), or one of the targets
``CallPolicy(allow=...)`` names; the rest fail with a CallRefusedError the agent sees, and
the report lists them per case: an evaluation never repeats a production side effect by
default. Example::

    report = evaluate(load_cases("cases.jsonl"), {"new": new_plan}, [Equals(), Contains("Porto")],
                      baseline=("old", old_plan))
    print("\\n".join(report.lines()))
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from eddies.connectors.evaluation.call_rules import CallRules
from eddies.connectors.evaluation.cases import Case
from eddies.connectors.evaluation.fleet import EVAL_HEADER, Progress, run_on_workers
from eddies.connectors.evaluation.policy import CallPolicy
from eddies.connectors.evaluation.report import EvalReport
from eddies.connectors.evaluation.results import CaseResult, case_result, wall_latency
from eddies.connectors.evaluation.scorers import Score, Scorer
from eddies.connectors.inspect.recording import Recording, read_recording
from eddies.connectors.local.rerun import publish
from eddies.connectors.local.runner import LocalRunner
from eddies.connectors.runtime.records import HEADERS
from eddies.connectors.runtime.settings import Settings
from eddies.engine import AgentPlan
from eddies.events import AgentEvent, InputEvent


@dataclass
class RecordedTraffic:
    """Cases taken from an app's recorded traffic: one a session of the range (its inputs
    in order; its answer is its last output), what the recording answered as each case's
    expected output, the recording's own results (the baseline ``recorded``), and the
    recorded outcomes a candidate's same calls are answered from."""

    recording: Recording
    cases: list[Case]
    results: list[CaseResult]
    #: The recorded app and the range (for the workers of an evaluation's app).
    app: str = ""
    from_offsets: dict[int, int] | None = None
    from_time_ms: int | None = None


#: The baseline that is what the recording did.
RECORDED = "recorded"


def recorded_traffic(source: Settings, *, from_offsets: dict[int, int] | None = None,
                     from_time_ms: int | None = None, sessions: Callable[[str], bool] = lambda _s: True,
                     sample: int | None = None, seed: int = 0) -> RecordedTraffic:
    """The sessions of ``source.app``'s inputs from ``from_offsets`` or ``from_time_ms``
    (as ``eddies reprocess`` takes them), ``sample`` of them at most (drawn with ``seed``)."""
    recording = read_recording(source, from_offsets=from_offsets, from_time_ms=from_time_ms,
                               sessions=sessions)
    chosen = recording.sessions
    if sample is not None and sample < len(chosen):
        chosen = sorted(random.Random(seed).sample(chosen, sample))
    histories = {sid: [(t, ev) for t, ev in recording.histories[sid] if ev.run in recording.order[sid]]
                 for sid in chosen}
    cases, results = [], []
    for sid in chosen:
        given = [ev.payload.input for ev in recording.inputs_of(sid) if isinstance(ev.payload, InputEvent)]
        events = [ev for _, ev in histories[sid]]
        answer = case_result(Case(sid, given[0] if len(given) == 1 else given), RECORDED, events,
                             latency_ms=wall_latency(histories[sid]), refused={})
        case = Case(sid, answer.case.input, answer.output, answer.error is None)
        answer.case = case
        cases.append(case)
        results.append(answer)
    return RecordedTraffic(recording, cases, results, source.app, from_offsets, from_time_ms)


def run_candidate(name: str, plan: AgentPlan, cases: Sequence[Case], policy: CallPolicy = CallPolicy(),
                  traffic: RecordedTraffic | None = None, progress: Progress | None = None,
                  into: Settings | None = None) -> list[CaseResult]:
    """What candidate ``name`` (its plan) does with each case, one case at a time; with
    ``traffic``, the recorded inputs of each case's session, its calls answered from the
    recording where they are the same calls; with ``into``, its sessions written to that
    app's topics afterwards (each record marked with the header ``eddies-eval`` = name)."""
    calls = policy.calls(plan, None if traffic is None else traffic.recording)
    runner = LocalRunner(plan, recorded=calls)
    out = []
    try:
        for case in cases:
            seen = len(runner.history)
            start = time.perf_counter()
            if traffic is not None:
                traffic.recording.submit(runner, case.id)
            else:
                runner.submit(case.id, case.input)
            runner.run_until_waiting()
            latency = (time.perf_counter() - start) * 1000
            history = [ev for ev in runner.history[seen:] if ev.session_id == case.id]
            out.append(case_result(case, name, history, latency_ms=latency,  # refusals: from its results
                                   recorded=calls.reused if traffic is not None else ()))
            if progress is not None:
                progress(name, len(out), len(cases))
        if into is not None:
            publish(into, runner, [*HEADERS, (EVAL_HEADER, name.encode())])
    finally:
        runner.executor.close()
    return out


def evaluate(cases: Sequence[Case], candidates: Mapping[str, AgentPlan], scorers: Sequence[Scorer], *,
             baseline: tuple[str, AgentPlan] | str | None = None,
             policy: CallPolicy = CallPolicy(), traffic: RecordedTraffic | None = None,
             progress: Progress | None = None,
             into: Callable[[str], Settings] | None = None,
             on_workers: Callable[[str], Settings] | None = None, wait_s: float = 300.0,
             started: Callable[[Settings], None] | None = None) -> EvalReport:
    """Run ``candidates`` (name -> plan) on ``cases`` and score them. ``baseline``: another
    agent (name, plan) run the same way, the name of one of the candidates, or
    ``"recorded"`` (with ``traffic``: what the recording did); None: the cases' expected
    outputs are the only yardstick. With ``traffic`` (its cases), calls the recording made
    the same way are answered from it. ``into(name)``: the app each candidate's (and a
    baseline agent's) sessions are written to, to trace, replay or browse them later.
    ``on_workers(name)``: instead, the app (new) whose workers run that candidate's cases
    (:func:`~eddies.connectors.evaluation.fleet.run_on_workers`, ``wait_s`` and
    ``started`` as it takes them)."""
    names = [s.name for s in scorers]
    if len(set(names)) != len(names):
        raise ValueError(f"scorers need names of their own (name=...): {', '.join(names)}")
    runs = dict(candidates)
    base_name = baseline if isinstance(baseline, str) or baseline is None else baseline[0]
    if RECORDED in runs or (isinstance(baseline, tuple) and baseline[0] in (*runs, RECORDED)):
        raise ValueError(f"a candidate or baseline named {RECORDED!r} or twice: name it otherwise")
    if isinstance(baseline, tuple):
        runs = {baseline[0]: baseline[1], **runs}
    elif baseline == RECORDED and traffic is None:
        raise ValueError("the baseline 'recorded' needs cases from recorded traffic")
    elif baseline is not None and baseline != RECORDED and baseline not in runs:
        raise ValueError(f"baseline {baseline!r} is not a candidate (candidates: {', '.join(runs)})")
    if on_workers is None:
        results = {name: run_candidate(name, plan, cases, policy, traffic, progress,
                                       None if into is None else into(name))
                   for name, plan in runs.items()}
    else:
        results = {name: _on_workers(name, plan, cases, on_workers(name), policy, traffic, progress,
                                     wait_s, started)
                   for name, plan in runs.items()}
    if baseline == RECORDED and traffic is not None:
        by_id = {r.case.id: r for r in traffic.results}
        results = {RECORDED: [by_id[c.id] for c in cases], **results}
    base = results.get(base_name) if base_name is not None else None
    scores: dict[str, dict[str, list[Score]]] = {
        name: {s.name: [s(r, None if base is None else base[i]) for i, r in enumerate(got)] for s in scorers}
        for name, got in results.items()}
    return EvalReport(list(candidates), base_name, results, scores)


def _on_workers(name: str, plan: AgentPlan, cases: Sequence[Case], target: Settings, policy: CallPolicy,
                traffic: RecordedTraffic | None, progress: Progress | None, wait_s: float,
                started: Callable[[Settings], None] | None) -> list[CaseResult]:
    """Candidate ``name``'s cases on the workers of app ``target.app``: with ``traffic``,
    each case's recorded inputs, its calls answered there from the same recording."""
    from eddies.connectors.runtime.client import input_event

    rules = CallRules(name, allow=tuple(sorted(policy.allow)), live_models=policy.live_models)
    if traffic is not None:
        rules = dataclasses.replace(rules, source_app=traffic.app, from_offsets=traffic.from_offsets,
                                    from_time_ms=traffic.from_time_ms, sessions=tuple(c.id for c in cases))

    def inputs(case: Case) -> list[AgentEvent]:
        if traffic is not None:
            return traffic.recording.inputs_of(case.id)
        return [input_event(case.id, case.input)]

    return run_on_workers(name, plan, cases, target, rules, inputs=inputs, progress=progress,
                          wait_s=wait_s, started=started)


__all__ = ["EVAL_HEADER", "RECORDED", "CallPolicy", "RecordedTraffic", "evaluate", "recorded_traffic",
           "run_candidate"]
