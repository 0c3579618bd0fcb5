"""A candidate's cases run by the worker fleet (``eddies eval --on-workers``), not in the
evaluating process: the evaluation makes the candidate an app of its own, with the call
rules its workers follow (:mod:`.call_rules`), sends each case's inputs there as a user
would, waits for the answers, and reads what each session did from the app's history.
Ordinary workers serve it (``eddies worker --app APP --agent AGENT``, as many as wanted,
or a Flink job with executor workers): it scales with them, and the app's sessions stay
to be traced, replayed and browsed like any other. Example::

    rules = CallRules("brief", source_app="travel", from_time_ms=0, sessions=("ana",))
    results = run_on_workers("brief", plan, cases, target, rules, inputs=lambda case: [...])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from eddies.connectors.evaluation.call_rules import CallRules, create_evaluation_app
from eddies.connectors.evaluation.cases import Case
from eddies.connectors.evaluation.results import CaseResult, case_result, wall_latency
from eddies.connectors.runtime.records import HEADERS
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import AgentPlan
from eddies.events import AgentEvent, InputEvent, OutputEvent

#: On every record an evaluation writes: the candidate whose it is.
EVAL_HEADER = "eddies-eval"
#: Told (candidate, cases done, cases in all) as cases are answered: a progress bar.
Progress = Callable[[str, int, int], None]


def run_on_workers(name: str, plan: AgentPlan, cases: Sequence[Case], target: Settings, rules: CallRules, *,
                   inputs: Callable[[Case], list[AgentEvent]], progress: Progress | None = None,
                   wait_s: float = 300.0, started: Callable[[Settings], None] | None = None
                   ) -> list[CaseResult]:
    """What candidate ``name`` (agent ``plan``) did with each case, on the workers of app
    ``target.app``, made here with ``rules`` (AppInUse if it has topics already):
    ``inputs(case)`` are sent, in order; ``started(target)`` is told once they are; each
    case is waited for until its inputs are answered, or ``wait_s`` pass with no answer
    (its result then says so)."""
    from eddies.connectors.runtime.client import producer, read_records
    from eddies.connectors.runtime.sink import produce
    from eddies.events import DecodeError, decode, encode

    create_evaluation_app(target, rules)
    names = TopicNames(target.app)
    runs = {}
    prod = producer(target)
    headers = [*HEADERS, (EVAL_HEADER, name.encode())]
    for case in cases:
        sent = inputs(case)
        runs[case.id] = sum(isinstance(ev.payload, InputEvent) for ev in sent)
        for ev in sent:
            produce(prod, names.input, encode(ev), ev.session_id.encode(), headers=headers)
    if prod.flush(30):
        raise TimeoutError(f"the cases were not delivered to {target.bootstrap_servers}")
    if started is not None:
        started(target)
    answered: dict[str, int] = dict.fromkeys(runs, 0)
    done = sum(answered[c] >= runs[c] for c in runs)
    if progress is not None:
        progress(name, done, len(runs))
    seen: set[str] = set()  # an output written again after a crash has the same event id
    if done < len(runs):
        for msg in read_records(target, names.output, follow=True, timeout=wait_s):
            try:
                ev = decode(msg.value())
            except DecodeError:
                continue
            if ev.session_id not in answered or ev.scope or not isinstance(ev.payload, OutputEvent) \
                    or ev.event_id in seen:
                continue
            seen.add(ev.event_id)
            answered[ev.session_id] += 1
            if answered[ev.session_id] == runs[ev.session_id]:
                done += 1
                if progress is not None:
                    progress(name, done, len(runs))
                if done == len(runs):
                    break
    histories = _histories(target, answered)
    out = []
    for case in cases:
        timed = histories.get(case.id, [])
        result = case_result(case, name, [ev for _, ev in timed], latency_ms=wall_latency(timed))
        served = {ev.agent for _, ev in timed if ev.agent and not ev.scope}
        if served - {plan.agent_name}:
            result.error = (f"served by agent {', '.join(sorted(served))}, not the candidate's "
                            f"{plan.agent_name}: do the workers of {target.app} run it?")
        elif answered[case.id] < runs[case.id]:
            result.error = (f"{answered[case.id]} of {runs[case.id]} inputs answered within "
                            f"{wait_s:g} s by the workers of {target.app} (are they running?)")
        out.append(result)
    return out


def _histories(target: Settings, answered: dict[str, int]) -> dict[str, list[tuple[int, AgentEvent]]]:
    """Each session's events with their records' times, once every answered run's output
    is among them (the output record may be read before the history's last records are)."""
    from eddies.connectors.inspect.replay import sessions_records

    deadline = time.monotonic() + 10
    while True:
        histories: dict[str, list[tuple[int, AgentEvent]]] = {}
        for _, time_ms, ev in sessions_records(target, list(answered)):
            histories.setdefault(ev.session_id, []).append((time_ms, ev))
        outputs = {sid: sum(isinstance(ev.payload, OutputEvent) and not ev.scope for _, ev in timed)
                   for sid, timed in histories.items()}
        if all(outputs.get(sid, 0) >= n for sid, n in answered.items()) or time.monotonic() > deadline:
            return histories
        time.sleep(0.2)


__all__ = ["EVAL_HEADER", "Progress", "run_on_workers"]
