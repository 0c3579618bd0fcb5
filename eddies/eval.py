"""Evaluate agents before they ship: run candidates on cases (inputs, with expected
outputs where known), score their answers, compare them with a baseline. The same as
``eddies eval``, from Python::

    from eddies.eval import Contains, Equals, Threshold, evaluate, load_cases

    report = evaluate(load_cases("cases.jsonl"), {"new": new_agent_plan},
                      [Equals(), Contains("Porto"), Threshold("cost_usd", max=0.01)],
                      baseline=("old", old_agent_plan))
    print("\\n".join(report.lines()))
    assert not report.below({"equals": 0.9})

On recorded traffic, ``recorded_traffic(settings, from_time_ms=...)`` gives the cases
(a session each, what the recording answered as expected) and ``evaluate(traffic.cases,
..., baseline="recorded", traffic=traffic)`` answers a call made just as the recording
made it from the recording. Model calls are otherwise live; a call that may be a side
effect (a tool that is not idempotent, a write to a vector store) and that no recording
answers is refused unless ``policy=CallPolicy(allow={"name"})`` allows it, and the report
lists it. ``save_report(settings, report, title=...)`` keeps a report in
``APP.evaluations``, where ``eddies ui`` shows it under Evaluations (as ``eddies eval``
does on recorded traffic); ``saved_reports(settings)`` reads them back.
"""

from eddies.connectors.evaluation.cases import Case, CaseFileError, load_cases
from eddies.connectors.evaluation.model_scorers import Judge, Similar
from eddies.connectors.evaluation.report import ALL, Difference, EvalReport, Summary, paired_bootstrap
from eddies.connectors.evaluation.results import METRICS, CaseResult
from eddies.connectors.evaluation.saved import ReportTooLarge, SavedReport, save_report, saved_reports
from eddies.connectors.evaluation.scorers import (
    EXPECTED,
    Contains,
    Equals,
    Function,
    IsJson,
    JsonSchema,
    Regex,
    Score,
    Scorer,
    Threshold,
)
from eddies.connectors.local.evaluation import (
    RECORDED,
    CallPolicy,
    RecordedTraffic,
    evaluate,
    recorded_traffic,
    run_candidate,
)

__all__ = [
    "ALL",
    "EXPECTED",
    "METRICS",
    "RECORDED",
    "CallPolicy",
    "Case",
    "CaseFileError",
    "CaseResult",
    "Contains",
    "Difference",
    "Equals",
    "EvalReport",
    "Function",
    "IsJson",
    "JsonSchema",
    "Judge",
    "RecordedTraffic",
    "Regex",
    "ReportTooLarge",
    "SavedReport",
    "Score",
    "Scorer",
    "Similar",
    "Summary",
    "Threshold",
    "evaluate",
    "load_cases",
    "paired_bootstrap",
    "recorded_traffic",
    "run_candidate",
    "save_report",
    "saved_reports",
]
