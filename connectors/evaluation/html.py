"""An evaluation's report as one HTML file, self-contained (no script, no font, nothing
fetched): the summary of each candidate against the baseline, the distributions of
latency, tokens and cost, and every case side by side (input, expected output, then each
side's answer with what differs from the baseline's marked, its scores and reasons, the
calls it refused and its trace). It is made from the report's plain data, so a report
kept in ``APP.evaluations`` shows the same in ``eddies ui``. Example::

    Path("eval.html").write_text(html_report(report))
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from html import escape
from typing import Any

from eddies.connectors.evaluation.report import ALL, EvalReport
from eddies.connectors.evaluation.saved import TRACES_LEFT_OUT

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;background:#fafbfc}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #d5dae1;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5}.pass{color:#17803d}.fail{color:#b42318}.sure{font-weight:600}
.sides{display:grid;gap:12px;grid-template-columns:repeat(auto-fit,minmax(320px,1fr))}
.side{background:#fff;border:1px solid #d5dae1;border-radius:6px;padding:8px 10px}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;font:12px/1.4 ui-monospace,monospace}
ins{background:#d3f5dc;text-decoration:none}del{background:#fbd9d6}
details{margin:6px 0;background:#fff;border:1px solid #e3e7ec;border-radius:6px;padding:4px 10px}
summary{cursor:pointer}.bar{fill:#4f6bd8}.axis{font:10px sans-serif;fill:#555}
"""


def html_report(report: EvalReport, title: str = "Evaluation") -> str:
    """The whole page of ``report``."""
    return html_page(report.to_dict(), title)


def html_page(data: Mapping[str, Any], title: str = "Evaluation") -> str:
    """The whole page of a report's plain data (:meth:`EvalReport.to_dict`): what
    ``--html`` writes, and what ``eddies ui`` shows of a kept report."""
    names = _names(data)
    cases = data.get("cases", [])
    parts = [f"<!doctype html><html lang=en><meta charset=utf-8><title>{escape(title)}</title>",
             f"<style>{_STYLE}</style><h1>{escape(title)}</h1>",
             f"<p>{len(cases)} cases; baseline: {escape(data.get('baseline') or 'the expected outputs')}"
             f"{'; traces left out (too large to keep)' if data.get(TRACES_LEFT_OUT) else ''}</p>",
             _summary(data, names), _distributions(data, names), "<h2>Cases</h2>"]
    parts += [_case(data, names, case) for case in cases]
    parts.append("</html>")
    return "\n".join(parts)


def _names(data: Mapping[str, Any]) -> list[str]:
    """The baseline (if it ran) first, then the candidates."""
    ran = list(data.get("candidates", {}))
    base = [data["baseline"]] if data.get("baseline") in ran else []
    return [*base, *[n for n in ran if n not in base]]


def _summary(data: Mapping[str, Any], names: list[str]) -> str:
    summaries = data["candidates"]
    scorers = list(summaries[names[0]]["pass_rates"]) if names else []
    head = "".join(f"<th>{escape(s)}</th>" for s in scorers)
    rows = []
    for name in names:
        s = summaries[name]
        cells = []
        for scorer in scorers:
            diff = s["vs_baseline"].get(scorer)
            vs = "" if diff is None else (
                f"<br><span class='{'sure' if diff['low'] > 0 or diff['high'] < 0 else ''}'>"
                f"{diff['delta']:+.3f} [{diff['low']:+.3f}, {diff['high']:+.3f}]</span>")
            cells.append(f"<td>{s['pass_rates'][scorer]:.1%}{vs}</td>")
        role = " (baseline)" if name == data.get("baseline") else ""
        rows.append(f"<tr><th>{escape(name)}{role}</th>{''.join(cells)}"
                    f"<td>${s['cost_usd_mean']:.6f} / ${s['cost_usd_p95']:.6f}</td>"
                    f"<td>{s['tokens_mean']:.0f} / {s['tokens_p95']:.0f}</td>"
                    f"<td>{s['latency_ms_mean']:.1f} / {s['latency_ms_p95']:.1f} ms</td>"
                    f"<td>{s['iterations_mean']:.2f} / {s['tool_calls_mean']:.2f}</td>"
                    f"<td>{s['refused_calls']}</td><td>{s['errors']}</td></tr>")
    return ("<h2>Summary</h2><table id=summary><tr><th>candidate</th>" + head +
            "<th>cost mean / p95</th><th>tokens mean / p95</th><th>latency mean / p95</th>"
            "<th>model / tool calls a case</th><th>refused calls</th><th>no answer</th></tr>"
            + "".join(rows) + "</table><p>Pass rates; under each, the difference to the baseline "
            "and its 95% paired bootstrap interval (bold: it leaves 0 out). "
            f"<code>{ALL}</code>: every scorer passed.</p>")


def _distributions(data: Mapping[str, Any], names: list[str]) -> str:
    metrics = ("latency_ms", "tokens", "cost_usd")
    out = ["<h2>Distributions</h2><table id=distributions><tr><th></th>"
           + "".join(f"<th>{m}</th>" for m in metrics) + "</tr>"]
    for name in names:
        cells = "".join(f"<td>{_histogram([c['by'][name]['metrics'][m] for c in data['cases']])}</td>"
                        for m in metrics)
        out.append(f"<tr><th>{escape(name)}</th>{cells}</tr>")
    return "".join(out) + "</table>"


def _histogram(values: list[float], bins: int = 12, width: int = 220, height: int = 70) -> str:
    """An inline SVG histogram of ``values``."""
    if not values:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - low) / span * bins))] += 1
    top = max(counts)
    w = width / bins
    bars = "".join(f"<rect class=bar x='{i * w:.1f}' y='{height - 14 - c / top * (height - 18):.1f}' "
                   f"width='{w - 2:.1f}' height='{c / top * (height - 18):.1f}'><title>{c}</title></rect>"
                   for i, c in enumerate(counts) if c)
    return (f"<svg width={width} height={height} role=img>{bars}"
            f"<text class=axis x=0 y={height - 2}>{low:.3g}</text>"
            f"<text class=axis x={width} y={height - 2} text-anchor=end>{high:.3g}</text></svg>")


def _passed(side: Mapping[str, Any]) -> bool:
    """Whether a side of a case passed every scorer (the report's ``all``)."""
    return all(score["passed"] for score in side["scores"].values())


def _case(data: Mapping[str, Any], names: list[str], case: Mapping[str, Any]) -> str:
    verdicts = " ".join(
        f"<span class={'pass' if _passed(case['by'][n]) else 'fail'}>{escape(n)} "
        f"{'✓' if _passed(case['by'][n]) else '✗'}</span>" for n in names)
    base = case["by"].get(data.get("baseline"))
    sides = "".join(_side(n, case["by"][n], None if n == data.get("baseline") else base,
                          n == data.get("baseline")) for n in names)
    expected = (f"<p>expected:</p><pre>{escape(_text(case['expected']))}</pre>"
                if case.get("has_expected") else "")
    text = _text(case["input"])
    return (f"<details class=case id='case-{escape(str(case['id']))}'><summary>{escape(str(case['id']))}: "
            f"{escape(text[:90])} — {verdicts}</summary>"
            f"<p>input:</p><pre>{escape(text)}</pre>{expected}"
            f"<div class=sides>{sides}</div></details>")


def _side(name: str, side: Mapping[str, Any], base: Mapping[str, Any] | None, is_baseline: bool) -> str:
    answer = side["error"] if side["error"] is not None else _text(side["output"])
    if base is not None and base["error"] is None and side["error"] is None:
        shown = _marked(_text(base["output"]), answer)
    else:
        shown = escape(answer)
    scores = "".join(
        f"<li class={'pass' if got['passed'] else 'fail'}>{escape(scorer)}: {got['value']:g}"
        f"{' — ' + escape(got['reason']) if got['reason'] else ''}</li>"
        for scorer, got in side["scores"].items())
    refused = "".join(f"<li class=fail>{escape(why)}</li>" for why in side["refused"].values())
    return (f"<div class=side data-candidate='{escape(name)}'><b>{escape(name)}</b>"
            f"{' (baseline)' if is_baseline else ''}"
            f"<pre class=answer>{shown}</pre><ul>{scores}{refused}</ul>"
            f"<details><summary>trace</summary><pre>{escape(side.get('trace', ''))}</pre></details></div>")


def _marked(before: str, after: str) -> str:
    """``after``, with the words it adds to ``before`` in <ins> and those it drops in <del>."""
    a, b = before.split(" "), after.split(" ")
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(escape(" ".join(b[j1:j2])))
            continue
        if i2 > i1:
            out.append(f"<del>{escape(' '.join(a[i1:i2]))}</del>")
        if j2 > j1:
            out.append(f"<ins>{escape(' '.join(b[j1:j2]))}</ins>")
    return " ".join(out)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=1, default=str)


__all__ = ["html_page", "html_report"]
