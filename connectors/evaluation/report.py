"""An evaluation's report: per candidate, the pass rate of each scorer and of all of them,
what it spent (mean and p95 cost, tokens, latency; iterations, tool calls), the calls
refused and the cases without an answer; against the baseline, the difference of each
pass rate with a paired bootstrap interval (95%, over the cases). Example::

    report = EvalReport(["new"], "old", results, scores)
    print("\\n".join(report.lines()))
    report.below({"equals": 0.9})     # ["new: equals 0.75 < 0.9"]
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from eddies.connectors.evaluation.results import METRICS, CaseResult
from eddies.connectors.evaluation.scorers import Score
from eddies.connectors.inspect.tree import build_tree, render

#: Resamples of the paired bootstrap (seeded: the same report every time).
RESAMPLES = 2000
#: The name of the rate of cases that pass every scorer.
ALL = "all"


@dataclass(frozen=True)
class Difference:
    """A candidate's pass rate minus the baseline's, over the same cases, with the 95%
    paired bootstrap interval of that difference."""

    delta: float
    low: float
    high: float

    @property
    def sure(self) -> bool:
        """Whether the interval leaves 0 out (the difference is not noise, at 95%)."""
        return self.low > 0 or self.high < 0


@dataclass(frozen=True)
class Summary:
    """One candidate's numbers."""

    name: str
    cases: int
    pass_rates: dict[str, float]
    errors: int
    refused_calls: int
    cost_usd_mean: float
    cost_usd_p95: float
    tokens_mean: float
    tokens_p95: float
    latency_ms_mean: float
    latency_ms_p95: float
    iterations_mean: float
    tool_calls_mean: float
    vs_baseline: dict[str, Difference]
    #: Its model calls, and those answered from the recording (recorded traffic).
    model_calls: int = 0
    model_calls_recorded: int = 0


class EvalReport:
    """The results and scores of each candidate (and of the baseline, if one ran), case
    by case in the same order."""

    def __init__(self, candidates: Sequence[str], baseline: str | None,
                 results: Mapping[str, Sequence[CaseResult]],
                 scores: Mapping[str, Mapping[str, Sequence[Score]]]) -> None:
        self.candidates = list(candidates)
        self.baseline = baseline
        self.results = {k: list(v) for k, v in results.items()}
        self.scores = {k: {s: list(v) for s, v in by.items()} for k, by in scores.items()}
        # Made once each: the report, the HTML page and the floors all read them, and a
        # summary's bootstrap resamples every case.
        self._passes: dict[str, dict[str, list[bool]]] = {}
        self._summaries: dict[str, Summary] = {}

    def passes(self, name: str) -> dict[str, list[bool]]:
        """Per scorer (and :data:`ALL`), whether each case passed."""
        if name not in self._passes:
            by = {scorer: [s.passed for s in got] for scorer, got in self.scores[name].items()}
            count = len(self.results[name])
            by[ALL] = [all(v[i] for v in by.values()) for i in range(count)]
            self._passes[name] = by
        return self._passes[name]

    def summary(self, name: str) -> Summary:
        """The numbers of candidate (or baseline) ``name``."""
        if name not in self._summaries:
            self._summaries[name] = self._summary(name)
        return self._summaries[name]

    def _summary(self, name: str) -> Summary:
        results = self.results[name]
        passes = self.passes(name)
        rates = {scorer: _mean([float(p) for p in got]) for scorer, got in passes.items()}
        vs: dict[str, Difference] = {}
        if self.baseline is not None and name != self.baseline and self.baseline in self.results:
            base = self.passes(self.baseline)
            vs = {scorer: paired_bootstrap(got, base[scorer]) for scorer, got in passes.items()
                  if scorer in base}

        def col(metric: str) -> list[float]:
            return [r.metric(metric) for r in results]

        return Summary(
            name, len(results), rates, sum(r.error is not None for r in results),
            sum(len(r.refused) for r in results),
            _mean(col("cost_usd")), _p95(col("cost_usd")), _mean(col("tokens")), _p95(col("tokens")),
            _mean(col("latency_ms")), _p95(col("latency_ms")), _mean(col("iterations")),
            _mean(col("tool_calls")), vs, sum(r.model_calls for r in results),
            sum(r.model_calls_recorded for r in results))

    def below(self, fail_under: Mapping[str, float]) -> list[str]:
        """``CANDIDATE: SCORER RATE < MIN`` for each pass rate under its floor (``all``
        names the rate of cases that pass every scorer); an unknown scorer is a KeyError."""
        out = []
        for name in self.candidates:
            rates = self.summary(name).pass_rates
            for scorer, floor in fail_under.items():
                if scorer not in rates:
                    raise KeyError(f"--fail-under {scorer}: no such scorer (scorers: {', '.join(rates)})")
                if rates[scorer] < floor:
                    out.append(f"{name}: {scorer} {rates[scorer]:.3g} < {floor:g}")
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``--json``, the HTML page, the report kept for ``eddies ui``): each
        summary, and each case's outputs, scores, refused calls, metrics and trace."""
        names = [*self.candidates, *([self.baseline] if self.baseline in self.results
                                     and self.baseline not in self.candidates else [])]
        return {
            "baseline": self.baseline,
            "candidates": {n: asdict(self.summary(n)) for n in names},
            "cases": [
                {"id": self.results[names[0]][i].case.id, "input": self.results[names[0]][i].case.input,
                 "expected": self.results[names[0]][i].case.expected,
                 "has_expected": self.results[names[0]][i].case.has_expected,
                 "by": {n: _case_data(self.results[n][i], {s: v[i] for s, v in self.scores[n].items()})
                        for n in names}}
                for i in range(len(self.results[names[0]]))] if names else [],
        }

    def lines(self) -> list[str]:
        """The terminal summary."""
        out = []
        names = [*([self.baseline] if self.baseline in self.results else []),
                 *[n for n in self.candidates if n != self.baseline]]
        for name in names:
            s = self.summary(name)
            role = " (baseline)" if name == self.baseline else ""
            out.append(f"{name}{role}: {s.cases} cases, {s.errors} without an answer, "
                       f"{s.refused_calls} calls refused")
            for scorer, rate in s.pass_rates.items():
                diff = s.vs_baseline.get(scorer)
                vs = "" if diff is None else (
                    f"   {diff.delta:+.3f} vs baseline [{diff.low:+.3f}, {diff.high:+.3f}]"
                    + (" *" if diff.sure else ""))
                out.append(f"  {scorer:<22} {rate:7.1%}{vs}")
            out.append(f"  cost ${s.cost_usd_mean:.6f} mean, ${s.cost_usd_p95:.6f} p95; "
                       f"tokens {s.tokens_mean:.0f} mean, {s.tokens_p95:.0f} p95; "
                       f"latency {s.latency_ms_mean:.1f} ms mean, {s.latency_ms_p95:.1f} ms p95; "
                       f"{s.iterations_mean:.2f} model calls, {s.tool_calls_mean:.2f} tool calls a case")
            if s.model_calls_recorded:
                every = s.model_calls_recorded == s.model_calls
                out.append(f"  {'every one' if every else s.model_calls_recorded} of its {s.model_calls} "
                           "model calls answered from the recording (the same call the recording "
                           "made)" + (": its model was not asked; --live-models asks it every time"
                                      if every else "; --live-models asks its model every time"))
        if any(d.sure for n in names for d in self.summary(n).vs_baseline.values()):
            out.append("(* the 95% interval of the difference leaves 0 out)")
        return out


def _case_data(result: CaseResult, scores: Mapping[str, Score]) -> dict[str, Any]:
    return {"output": result.output, "error": result.error, "refused": result.refused,
            "scores": {s: asdict(v) for s, v in scores.items()},
            "metrics": {m: result.metric(m) for m in METRICS if m != "refused_calls"},
            "trace": "\n".join(render(build_tree(result.history))) if result.history else ""}


def paired_bootstrap(candidate: Sequence[bool], baseline: Sequence[bool],
                     resamples: int = RESAMPLES, seed: int = 0) -> Difference:
    """The candidate's pass rate minus the baseline's over the same cases, and the 95%
    interval of that difference when the cases are drawn again with replacement (pairs
    kept together)."""
    if len(candidate) != len(baseline):
        raise ValueError("a paired comparison needs the same cases on both sides")
    n = len(candidate)
    if n == 0:
        return Difference(0.0, 0.0, 0.0)
    diffs = [float(c) - float(b) for c, b in zip(candidate, baseline, strict=True)]
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    low, high = means[int(0.025 * resamples)], means[min(resamples - 1, int(0.975 * resamples))]
    return Difference(sum(diffs) / n, low, high)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _p95(values: Sequence[float]) -> float:
    """The nearest-rank 95th percentile."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


__all__ = ["ALL", "Difference", "EvalReport", "Summary", "paired_bootstrap"]
