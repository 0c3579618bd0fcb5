"""``eddies eval`` on an app's recorded traffic: a case a session, the recording's answers
as expected outputs and as the baseline; a call made just as the recording made it is
answered from it, and a side effect the recording does not answer is not made again."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eddies.connectors.local.evaluation import RECORDED, CallPolicy, evaluate, recorded_traffic
from eddies.connectors.runtime.client import send_input
from eddies.connectors.runtime.settings import Settings, load_settings
from eddies.engine import AgentPlan
from eddies.eval import Equals, Regex
from tests.integration.agents import doubling_calculator, offline_calculator
from tests.integration.workers import ROOT, answers, start_worker, stop_worker, wait_until

pytestmark = pytest.mark.integration

PROMPTS = [("ana", '{"a": 2, "b": 3}'), ("bo", '{"a": 40, "b": 2}'), ("cy", '{"a": 7, "b": 8}')]


@pytest.fixture(scope="module")
def recorded(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, Path]]:
    """Three sessions the offline calculator answered on a worker (each: a model call, the
    counted add tool, a model call); the file of the tool's executions."""
    settings = load_settings(env={}, overrides={
        "bootstrap_servers": bootstrap, "app": f"ev{uuid.uuid4().hex[:10]}", "partitions": 2})
    where = tmp_path_factory.mktemp("eval")
    effects = where / "effects.log"
    worker = start_worker(settings, "tests.integration.agents:offline_calculator", where / "worker.log",
                          TEST_EFFECTS=str(effects))
    try:
        for session, prompt in PROMPTS:
            send_input(settings, session, prompt)
        wait_until("three answers", lambda: len(answers(settings)) >= 3, worker, where / "worker.log")
    finally:
        stop_worker(worker)
    before = os.environ.get("TEST_EFFECTS")
    os.environ["TEST_EFFECTS"] = str(effects)  # the evaluations' tool calls count there too
    yield settings, effects
    if before is None:
        os.environ.pop("TEST_EFFECTS", None)
    else:
        os.environ["TEST_EFFECTS"] = before


def _effects(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_the_same_agent_on_recorded_traffic_is_answered_from_the_recording(
        recorded: tuple[Settings, Path]) -> None:
    settings, effects = recorded
    done = len(_effects(effects))
    assert done == 3
    traffic = recorded_traffic(settings, from_time_ms=0)
    assert [c.id for c in traffic.cases] == ["ana", "bo", "cy"]
    assert [c.expected for c in traffic.cases] == [f"The result is {n}." for n in (5, 42, 15)]
    assert [r.iterations for r in traffic.results] == [2, 2, 2]  # as recorded: two model calls each
    report = evaluate(traffic.cases, {"same": AgentPlan.compile(offline_calculator())},
                      [Equals(), Regex(r"^The result is \d+\.$")], baseline=RECORDED, traffic=traffic)
    same, base = report.summary("same"), report.summary(RECORDED)
    assert same.pass_rates == {"equals": 1.0, "regex": 1.0, "all": 1.0} and base.pass_rates["all"] == 1.0
    assert same.vs_baseline["equals"].delta == 0.0 and same.refused_calls == 0
    assert len(_effects(effects)) == done  # the tool calls were the recording's: none made again
    assert base.latency_ms_mean > 0  # the recorded runs' wall time, from the records' times


def test_a_changed_agent_makes_no_side_effect_the_recording_does_not_answer(
        recorded: tuple[Settings, Path]) -> None:
    settings, effects = recorded
    traffic = recorded_traffic(settings, from_time_ms=0, sessions=lambda s: s != "cy")
    assert [c.id for c in traffic.cases] == ["ana", "bo"]
    done = len(_effects(effects))
    doubling = {"doubling": AgentPlan.compile(doubling_calculator())}
    # Its model calls are the recording's own (same messages, same model): replies reused.
    reused = evaluate(traffic.cases, doubling, [Equals()], baseline=RECORDED, traffic=traffic)
    assert reused.summary("doubling").pass_rates["equals"] == 1.0
    # ... which the report says, lest a 100% read as the change's: its model was not asked.
    assert (reused.summary("doubling").model_calls, reused.summary("doubling").model_calls_recorded) == (4, 4)
    assert ("  every one of its 4 model calls answered from the recording (the same call the recording "
            "made): its model was not asked; --live-models asks it every time") in reused.lines()
    # Asked live, its model asks add for other numbers: not recorded, not idempotent: refused.
    live = evaluate(traffic.cases, doubling, [Equals()], baseline=RECORDED, traffic=traffic,
                    policy=CallPolicy(live_models=True))
    summary = live.summary("doubling")
    assert summary.refused_calls == 2 and summary.pass_rates["equals"] == 0.0
    assert summary.model_calls_recorded == 0 and not any("from the recording" in x for x in live.lines())
    assert summary.vs_baseline["equals"].delta == -1.0
    assert len(_effects(effects)) == done
    [why] = live.results["doubling"][0].refused.values()
    assert "TOOL add is not idempotent and no recording answers it" in why
    allowed = evaluate(traffic.cases, doubling, [Equals()], baseline=RECORDED, traffic=traffic,
                       policy=CallPolicy(frozenset({"add"}), live_models=True))
    assert [r.output for r in allowed.results["doubling"]] == ["The result is 7.", "The result is 82."]
    assert sorted(_effects(effects)[done:]) == sorted([f"tool 4+3 {os.getpid()}", f"tool 80+2 {os.getpid()}"])


def test_eddies_eval_on_recorded_traffic(recorded: tuple[Settings, Path]) -> None:
    settings, effects = recorded
    done = len(_effects(effects))
    ran = subprocess.run(
        [sys.executable, "-m", "eddies", "eval", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers, "--from-time", "0",
         "--candidate", "doubling=tests.integration.agents:doubling_calculator", "--live-models",
         "--scorer", "equals", "--fail-under", "equals=0.5", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="200"))
    assert ran.returncode == 1, ran.stdout + ran.stderr
    data = json.loads(ran.stdout)
    assert data["baseline"] == RECORDED
    assert data["candidates"]["doubling"]["refused_calls"] == 3
    assert data["candidates"][RECORDED]["pass_rates"]["equals"] == 1.0
    assert "under the floor: doubling: equals 0 < 0.5" in ran.stderr
    assert len(_effects(effects)) == done


def _shows_the_doubling_report(page: Any) -> None:
    """The report of the doubling calculator against the recording, as a person reads it:
    the summary, and the first case opened on its diff."""
    from playwright.sync_api import expect

    expect(page.locator("#summary")).to_contain_text("recorded (baseline)")
    expect(page.locator("#summary")).to_contain_text("-1.000")
    case = page.locator("details.case").first
    case.locator("summary").first.click()
    side = case.locator("[data-candidate='doubling'] .answer")
    expect(side).to_be_visible()
    expect(side.locator("del")).to_have_text("5.")  # ana: 2 + 3 recorded, 4 + 3 now
    expect(side.locator("ins")).to_have_text("7.")


def test_the_html_report_in_headless_chromium(recorded: tuple[Settings, Path], tmp_path: Path) -> None:
    from tests.integration.test_ui import _skip_reason, browser_page

    reason = _skip_reason()
    if reason:
        pytest.skip(reason)

    from eddies.connectors.evaluation.html import html_report

    settings, _ = recorded
    traffic = recorded_traffic(settings, from_time_ms=0)
    report = evaluate(traffic.cases, {"doubling": AgentPlan.compile(doubling_calculator())}, [Equals()],
                      baseline=RECORDED, traffic=traffic,
                      policy=CallPolicy(frozenset({"add"}), live_models=True))
    page_file = tmp_path / "eval.html"
    page_file.write_text(html_report(report, "calculator"), encoding="utf-8")
    with browser_page(tmp_path) as page:
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_file.as_uri())
        _shows_the_doubling_report(page)
        assert errors == []


def test_an_evaluation_written_to_an_app_of_its_own_replays(recorded: tuple[Settings, Path]) -> None:
    from eddies.connectors.inspect.replay import place_of, replay_session, session_messages
    from eddies.connectors.local.evaluation import EVAL_HEADER
    from eddies.connectors.runtime.records import header

    settings, _ = recorded
    prefix = settings.app + "-ev"
    ran = subprocess.run(
        [sys.executable, "-m", "eddies", "eval", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers, "--from-time", "0", "--session", "ana",
         "--candidate", "same=tests.integration.agents:offline_calculator", "--scorer", "equals",
         "--to-app", prefix],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="200"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    target = dataclasses.replace(settings, app=f"{prefix}-same")
    report = replay_session(target, AgentPlan.compile(offline_calculator()), "ana")
    assert report.ok and len(report.steps) > 5
    records = session_messages(target, place_of(target, "ana"), ["ana"])
    assert {header(m.headers(), EVAL_HEADER) for m in records} == {b"same"}


def _eval(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eddies", "eval", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers, "--from-time", "0", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="200"))


def test_eddies_eval_keeps_its_report_in_the_apps_evaluations(recorded: tuple[Settings, Path]) -> None:
    from eddies.connectors.evaluation.saved import saved_reports

    settings, _ = recorded
    title = f"doubling {uuid.uuid4().hex[:6]}"
    ran = _eval(settings, "--candidate", "doubling=tests.integration.agents:doubling_calculator",
                "--live-models", "--allow-call", "add", "--scorer", "equals", "--title", title, "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    printed = json.loads(ran.stdout)
    [kept] = [r for r in saved_reports(settings) if r.title == title]
    assert f"kept as evaluation {kept.id} in {settings.app}.evaluations" in ran.stderr
    assert kept.report["candidates"] == printed["candidates"]  # what --json printed, kept
    assert [c["by"]["doubling"]["output"] for c in kept.report["cases"]] == [
        "The result is 7.", "The result is 82.", "The result is 22."]
    assert "tool add" in kept.report["cases"][0]["by"]["doubling"]["trace"]
    assert kept.config["cases"] == {"app": settings.app, "from_time": "0"}
    assert kept.config["candidates"] == {
        "doubling": {"agent": "tests.integration.agents:doubling_calculator"}}
    assert kept.listing()["pass_rates"] == {"doubling": 0.0, RECORDED: 1.0}
    skipped = _eval(settings, "--candidate", "same=tests.integration.agents:offline_calculator",
                    "--scorer", "equals", "--title", title + " again", "--no-save")
    assert skipped.returncode == 0 and "kept as" not in skipped.stderr, skipped.stdout + skipped.stderr
    assert [r.title for r in saved_reports(settings) if r.title.startswith(title)] == [title]


def test_the_evaluations_tab_of_eddies_ui_in_headless_chromium(recorded: tuple[Settings, Path],
                                                               tmp_path: Path) -> None:
    from tests.integration.test_ui import _skip_reason, browser_page, serve_ui

    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import expect

    settings, _ = recorded
    title = f"tab {uuid.uuid4().hex[:6]}"
    ran = _eval(settings, "--candidate", "doubling=tests.integration.agents:doubling_calculator",
                "--live-models", "--allow-call", "add", "--scorer", "equals", "--title", title)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    ui = serve_ui(settings, "tests.integration.agents:offline_calculator")
    with ui as url, browser_page(tmp_path) as page:
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        page.goto(url)
        page.locator("#evaluations-tab").click()
        row = page.locator("#evaluations tbody tr", has_text=title)
        expect(row).to_contain_text("3 cases")
        expect(row).to_contain_text("doubling: 0.0%")
        expect(row).to_contain_text("recorded (baseline): 100.0%")
        row.click()
        expect(page.locator("#evaluation-title")).to_have_text(title)
        _shows_the_doubling_report(page.frame_locator("#evaluation-frame"))
        page.locator("#tabs a[data-tab='sessions']").click()
        expect(page.locator("#sessions tbody tr")).to_have_count(3)  # ana, bo, cy
        assert errors == []


def _eval_on_workers(settings: Settings, prefix: str, where: Path, agent: str, *args: str,
                     roles: tuple[str, str] = ("all", "all")) -> tuple[dict[str, Any], str]:
    """``eddies eval --on-workers`` of candidate ``doubling=agent`` (the report as JSON, what
    it said), served by two ``eddies worker`` processes of ``roles``, started once it made
    their app."""
    target = dataclasses.replace(settings, app=f"{prefix}-doubling")
    err = where / f"{prefix}.err"
    with err.open("w") as said:
        ran = subprocess.Popen(
            [sys.executable, "-m", "eddies", "eval", "--app", settings.app, "--bootstrap-servers",
             settings.bootstrap_servers, "--from-time", "0",
             "--candidate", f"doubling={agent}", "--scorer", "equals", "--on-workers", "--to-app", prefix,
             "--wait", "90", "--json", *args],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=said, text=True, env=dict(os.environ, COLUMNS="200"))
        workers = []
        try:
            wait_until("the evaluation's app", lambda: f"cases sent to app {target.app}" in err.read_text(),
                       ran, err)
            workers = [start_worker(target, agent, where / f"{prefix}-{i}.log", args=("--role", role))
                       for i, role in enumerate(roles)]
            out, _ = ran.communicate(timeout=120)
        finally:
            for w in workers:
                stop_worker(w)
            if ran.poll() is None:
                ran.kill()
    assert ran.returncode == 0, out + err.read_text()
    return json.loads(out), err.read_text()


def test_eddies_eval_on_workers_answers_from_the_recording_and_makes_no_side_effect_again(
        recorded: tuple[Settings, Path], tmp_path: Path) -> None:
    from eddies.connectors.inspect.replay import replay_session

    settings, effects = recorded
    done = len(_effects(effects))
    prefix = settings.app + "-fleet"
    # The same agent: every call the recording's, on the workers; nothing is made again.
    offline = "tests.integration.agents:offline_calculator"
    doubling = "tests.integration.agents:doubling_calculator"
    same, said = _eval_on_workers(settings, prefix + "a", tmp_path, offline)
    assert f"eddies worker --app {prefix}a-doubling --agent {offline} --partitions 2" in said
    assert same["candidates"]["doubling"]["pass_rates"] == {"equals": 1.0, "all": 1.0}
    assert same["candidates"]["doubling"]["iterations_mean"] == 2.0
    assert "tool add" in same["cases"][0]["by"]["doubling"]["trace"]
    assert len(_effects(effects)) == done
    # Asked live, the doubling model asks add for other numbers: refused on the workers, by
    # an executor of its own as on the Flink runner (whose executors are such workers).
    live, _ = _eval_on_workers(settings, prefix + "b", tmp_path, doubling, "--live-models",
                               roles=("orchestrator", "executor"))
    summary = live["candidates"]["doubling"]
    assert summary["refused_calls"] == 3 and summary["pass_rates"]["equals"] == 0.0
    [why] = live["cases"][0]["by"]["doubling"]["refused"].values()
    assert "TOOL add is not idempotent and no recording answers it" in why
    assert len(_effects(effects)) == done
    # Allowed, the workers make those calls: the effects are theirs, not this process's.
    allowed, _ = _eval_on_workers(settings, prefix + "c", tmp_path, doubling, "--live-models",
                                  "--allow-call", "add")
    assert [c["by"]["doubling"]["output"] for c in allowed["cases"]] == [
        "The result is 7.", "The result is 82.", "The result is 22."]
    made = _effects(effects)[done:]
    assert sorted(line.rsplit(" ", 1)[0] for line in made) == ["tool 14+8", "tool 4+3", "tool 80+2"]
    assert str(os.getpid()) not in {line.rsplit(" ", 1)[1] for line in made}
    # The evaluation's sessions stay in its app (its kept report names it): replayed from
    # there, with no call made.
    from eddies.connectors.evaluation.saved import saved_reports

    assert [r.config["apps"] for r in saved_reports(settings) if r.config.get("apps", {}).get(
        "doubling", "").startswith(prefix + "c")] == [{"doubling": f"{prefix}c-doubling"}]
    target = dataclasses.replace(settings, app=f"{prefix}c-doubling")
    assert replay_session(target, AgentPlan.compile(doubling_calculator()), "ana").ok
    # An app an evaluation wrote to is not written to again.
    again = subprocess.run(
        [sys.executable, "-m", "eddies", "eval", "--app", settings.app, "--bootstrap-servers",
         settings.bootstrap_servers, "--from-time", "0", "--candidate",
         "doubling=tests.integration.agents:doubling_calculator", "--scorer", "equals", "--on-workers",
         "--to-app", prefix + "c"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "is an evaluation's already" in again.stderr, again.stdout + again.stderr


def test_a_worker_of_an_evaluation_killed_midway_its_successor_answers_from_the_recording(
        recorded: tuple[Settings, Path], tmp_path: Path) -> None:
    settings, effects = recorded
    done = len(_effects(effects))
    prefix = settings.app + "-kill"
    target = dataclasses.replace(settings, app=f"{prefix}-same")
    agent = "tests.integration.agents:offline_calculator"
    err = tmp_path / "eval.err"
    with err.open("w") as said:
        ran = subprocess.Popen(
            [sys.executable, "-m", "eddies", "eval", "--app", settings.app, "--bootstrap-servers",
             settings.bootstrap_servers, "--from-time", "0", "--candidate", f"same={agent}", "--scorer",
             "equals", "--on-workers", "--to-app", prefix, "--wait", "90", "--json"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=said, text=True, env=dict(os.environ, COLUMNS="200"))
        first = second = None
        try:
            wait_until("the evaluation's app", lambda: f"cases sent to app {target.app}" in err.read_text(),
                       ran, err)
            first = start_worker(target, agent, tmp_path / "first.log")
            wait_until("a first answer", lambda: answers(target), first, tmp_path / "first.log")
            first.kill()  # kill -9, mid-evaluation: its calls of the other cases in flight
            first.wait()
            second = start_worker(target, agent, tmp_path / "second.log")
            out, _ = ran.communicate(timeout=120)
        finally:
            for w in (first, second):
                if w is not None and w.poll() is None:
                    stop_worker(w)
            if ran.poll() is None:
                ran.kill()
    assert ran.returncode == 0, out + err.read_text()
    report = json.loads(out)
    # Every case answered as recorded, each call answered from the recording (or from the
    # journal, where the killed worker had answered it): none made, none left UNKNOWN.
    assert report["candidates"]["same"]["pass_rates"] == {"equals": 1.0, "all": 1.0}
    assert report["candidates"]["same"]["errors"] == 0
    assert len(_effects(effects)) == done
    # (An output written again after a crash has the same event id: a consumer drops it.)
    assert sorted({e.event_id: e.session_id for e in answers(target)}.values()) == ["ana", "bo", "cy"]


def test_a_report_too_large_for_a_record_is_not_kept_and_says_so(settings: Settings) -> None:
    import secrets

    from eddies.connectors.evaluation.report import EvalReport
    from eddies.connectors.evaluation.results import CaseResult
    from eddies.eval import Case, ReportTooLarge, Score, save_report, saved_reports

    small = dataclasses.replace(settings, max_record_bytes=1000)  # a record of ~65 KB at most
    cases = [Case(f"c{i}", "q") for i in range(60)]
    noise = [CaseResult(c, "new", output=secrets.token_hex(1000)) for c in cases]  # no compressing it
    big = EvalReport(["new"], None, {"new": noise}, {"new": {"equals": [Score(False, 0.0)] * 60}})
    with pytest.raises(ReportTooLarge, match="without its traces, over the 66536 a record may hold"):
        save_report(small, big, title="too big")
    assert saved_reports(small) == []  # nothing half-kept
    fits = EvalReport(["new"], None, {"new": noise[:2]}, {"new": {"equals": [Score(True, 1.0)] * 2}})
    kept = save_report(small, fits, title="fits")
    [back] = saved_reports(small)
    assert back == kept and back.listing()["pass_rates"] == {"new": 1.0} and back.listing()["cases"] == 2
