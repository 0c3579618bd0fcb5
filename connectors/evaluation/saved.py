"""Evaluation reports kept beside the app they evaluated, in ``APP.evaluations``, where
``eddies ui`` lists them under its Evaluations tab and shows each as the HTML report does.

A record a report: keyed by the evaluation's id, its value the report's plain data
(:meth:`EvalReport.to_dict`) with what was evaluated and when, as zlib-compressed JSON
(a report of a few thousand cases is mostly repeated words). Nothing else of the app is
written: its sessions' topics stay as they were. Example::

    saved = save_report(settings, report, title="planner v2 on last week",
                        config={"cases": {"app": "travel", "from_time": "2026-11-25T00:00:00Z"}})
    [entry.title for entry in saved_reports(settings)]      # the latest first
"""

from __future__ import annotations

import json
import secrets
import time
import zlib
from dataclasses import dataclass
from typing import Any

from eddies.connectors.evaluation.report import ALL, EvalReport
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames

#: The traces of every case are the bulk of a report: left out when it would not fit in
#: one record (``Settings.write_limit``), and the report says so.
TRACES_LEFT_OUT = "traces_left_out"


class ReportTooLarge(ValueError):
    """A report that does not fit in one record even without its traces."""


@dataclass(frozen=True)
class SavedReport:
    """A kept report: its id, when it was made, its title, how it was set up (the cases'
    source, candidates, scorers: plain data), and the report's plain data."""

    id: str
    time_ms: int
    title: str
    config: dict[str, Any]
    report: dict[str, Any]

    def listing(self) -> dict[str, Any]:
        """What a list of reports shows of this one: each candidate's rate of cases that
        passed every scorer, and the baseline's."""
        summaries = self.report.get("candidates", {})
        return {"id": self.id, "time_ms": self.time_ms, "title": self.title, "config": self.config,
                "baseline": self.report.get("baseline"), "cases": len(self.report.get("cases", [])),
                "pass_rates": {name: s.get("pass_rates", {}).get(ALL) for name, s in summaries.items()},
                TRACES_LEFT_OUT: bool(self.report.get(TRACES_LEFT_OUT))}


def save_report(settings: Settings, report: EvalReport, *, title: str,
                config: dict[str, Any] | None = None) -> SavedReport:
    """Keep ``report`` in ``settings.app``'s evaluations topic (made if missing); the
    kept report. ReportTooLarge if it does not fit in one record without its traces."""
    from confluent_kafka.admin import AdminClient

    from eddies.connectors.runtime.client import producer
    from eddies.connectors.runtime.sink import produce
    from eddies.connectors.runtime.topics import ensure_topic

    now = int(time.time() * 1000)
    saved = SavedReport(f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now / 1000))}-{secrets.token_hex(3)}",
                        now, title, dict(config or {}), report.to_dict())
    value = _encoded(saved)
    if len(value) > settings.write_limit:
        for side in (s for case in saved.report["cases"] for s in case["by"].values()):
            side["trace"] = ""
        saved.report[TRACES_LEFT_OUT] = True
        value = _encoded(saved)
        if len(value) > settings.write_limit:
            raise ReportTooLarge(f"the report is {len(value)} bytes without its traces, over the "
                                 f"{settings.write_limit} a record may hold (max_record_bytes)")
    topic = TopicNames(settings.app).evaluations
    ensure_topic(AdminClient(settings.client_config()), topic, replication=settings.replication,
                 config={"max.message.bytes": str(settings.write_limit)})
    prod = producer(settings)
    produce(prod, topic, value, saved.id.encode())
    if prod.flush(30):
        raise TimeoutError(f"the report was not delivered to {settings.bootstrap_servers}")
    return saved


def saved_reports(settings: Settings) -> list[SavedReport]:
    """The reports kept for ``settings.app``, the latest first (none if no evaluation kept
    one). A record that is not a report is passed over."""
    from eddies.connectors.runtime.client import read_records

    out: dict[str, SavedReport] = {}
    try:
        for msg in read_records(settings, TopicNames(settings.app).evaluations):
            saved = _decoded(msg.value())
            if saved is not None:
                out[saved.id] = saved
    except LookupError:  # no evaluation kept a report yet
        return []
    return sorted(out.values(), key=lambda s: (s.time_ms, s.id), reverse=True)


def _encoded(saved: SavedReport) -> bytes:
    data = {"id": saved.id, "time_ms": saved.time_ms, "title": saved.title, "config": saved.config,
            "report": saved.report}
    return zlib.compress(json.dumps(data, default=str, separators=(",", ":")).encode(), 6)


def _decoded(value: bytes | None) -> SavedReport | None:
    try:
        data = json.loads(zlib.decompress(value or b""))
        return SavedReport(str(data["id"]), int(data["time_ms"]), str(data["title"]), dict(data["config"]),
                           dict(data["report"]))
    except (zlib.error, ValueError, KeyError, TypeError):
        return None


__all__ = ["TRACES_LEFT_OUT", "ReportTooLarge", "SavedReport", "save_report", "saved_reports"]
