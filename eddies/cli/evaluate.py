"""``eddies eval``: candidate agents run on cases, scored, compared with a baseline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from eddies.cli.agents import plan_of
from eddies.cli.errors import fail
from eddies.cli.options import AppOpt, BootstrapOpt, ConfigOpt, offsets_of, time_ms_of
from eddies.cli.output import console, err_console
from eddies.cli.settings import kafka_settings, need_configured_broker, settings_or_exit

eval_app = typer.Typer()


@eval_app.command("eval", short_help="Evaluate agents on cases or recorded traffic before they ship.")
def eval_cmd(
    config: Annotated[Path | None, typer.Argument(metavar="EVAL.yaml",
        help="An eval config (YAML): inputs, candidates, baseline, scorers, allow_calls, "
        "fail_under.")] = None,
    inputs: Annotated[Path | None, typer.Option(
        help="The cases: a JSONL file ({\"input\", \"expected\", \"id\"} a line) or a CSV file.")] = None,
    candidate: Annotated[list[str] | None, typer.Option(
        "--candidate", help="NAME=AGENT (or AGENT) to evaluate; AGENT as --agent takes it "
        "(repeatable).")] = None,
    baseline: Annotated[str | None, typer.Option(
        help="NAME=AGENT run the same way, or a candidate's NAME; default: the cases' expected "
        "outputs.")] = None,
    scorer: Annotated[list[str] | None, typer.Option(
        "--scorer", help="equals, contains:TEXT, icontains:TEXT, regex:PATTERN, is-json, json-schema:FILE, "
        "python:MODULE:FUNCTION, similar[:THRESHOLD], max:METRIC=N, min:METRIC=N (repeatable; a judge: "
        "in the config).")] = None,
    allow_call: Annotated[list[str] | None, typer.Option(
        "--allow-call", help="A tool (or other call target) the evaluation may run though it may be a "
        "side effect (repeatable).")] = None,
    fail_under: Annotated[list[str] | None, typer.Option(
        "--fail-under", help="SCORER=RATE: exit 1 if a candidate's pass rate is lower ('all': every "
        "scorer passed) (repeatable).")] = None,
    live_models: Annotated[bool, typer.Option(
        "--live-models", help="Recorded traffic: ask the candidate's model every time, even where "
        "the recording made the same model call.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    html: Annotated[Path | None, typer.Option(
        help="Also write the report as one HTML file: the summary, distributions, and every case "
        "side by side with the baseline.")] = None,
    from_offset: Annotated[str | None, typer.Option(
        help="Cases from APP's recorded traffic: PARTITION:OFFSET[,...] of APP.input to start from.")] = None,
    from_time: Annotated[str | None, typer.Option(
        help="Cases from APP's recorded traffic from this time: ISO 8601 or ms.")] = None,
    session: Annotated[list[str] | None, typer.Option(
        "--session", help="Recorded traffic: only these sessions (repeatable).")] = None,
    sample: Annotated[int | None, typer.Option(
        help="Recorded traffic: this many sessions at most, drawn at random (seeded).")] = None,
    to_app: Annotated[str | None, typer.Option(
        help="Recorded traffic: write each candidate's sessions to app TO_APP-NAME (trace, replay or "
        "browse them later).")] = None,
    on_workers: Annotated[bool, typer.Option(
        "--on-workers", help="Run each candidate's cases on the worker fleet, in an app of its own "
        "(TO_APP-NAME; default APP-eval-TIME-NAME) that ordinary workers serve (eddies worker --app "
        "... --agent ...), its calls answered there by the same rules.")] = False,
    wait: Annotated[float, typer.Option(
        help="--on-workers: how long to wait, with no answer coming, for the workers (seconds).")] = 300.0,
    save: Annotated[bool | None, typer.Option(
        "--save/--no-save", help="Keep the report in APP.evaluations, where eddies ui lists it under "
        "Evaluations (default: on recorded traffic; cases from a file: --save with --app).")] = None,
    title: Annotated[str | None, typer.Option(
        help="What the kept report is called (default: its candidates and baseline).")] = None,
    settings_file: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
) -> None:
    """Evaluate agents on cases before they ship: each candidate (and a baseline agent, if
    given) answers every case in this process (--on-workers: on workers of an app of its
    own), with live model calls. Cases come from a
    file (--inputs) or from APP's recorded traffic (--from-offset or --from-time: a case a
    session, the recording's answers as the expected outputs and as the baseline
    'recorded'; a call made just as the recording made it is answered from it). A call
    that may be a side effect (a tool that is not idempotent, a vector store write) and
    that no recording answers is refused unless --allow-call names it, and reported.
    Prints pass rates per scorer, cost, tokens and latency, and each pass rate's
    difference to the baseline with a 95% paired bootstrap interval, and keeps the report
    in APP.evaluations for eddies ui (--no-save: not). Exit 1 when a rate is under its
    --fail-under."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from eddies.connectors.evaluation.cases import CaseFileError, load_cases
    from eddies.connectors.evaluation.config import (
        CandidateSpec,
        EvalConfig,
        EvalConfigError,
        TrafficSpec,
        load_config,
        rate,
        scorer_flag,
    )
    from eddies.connectors.evaluation.config import candidate as candidate_of
    from eddies.connectors.local.evaluation import RECORDED, CallPolicy, evaluate, recorded_traffic
    from eddies.connectors.runtime.topics import TopicNames

    try:
        cfg = load_config(config) if config is not None else EvalConfig()
        if from_offset is not None or from_time is not None:
            if from_offset is not None and from_time is not None:
                raise EvalConfigError("give one of --from-offset and --from-time")
            cfg.inputs = TrafficSpec(app_id, from_offset, from_time, tuple(session or []), sample)
        cfg.inputs = inputs or cfg.inputs
        cfg.candidates += [candidate_of(c, "--candidate") for c in candidate or []]
        if baseline is not None:
            cfg.baseline = candidate_of(baseline, "--baseline") if "=" in baseline else baseline
        cfg.scorers += [scorer_flag(s) for s in scorer or []]
        cfg.allow_calls |= set(allow_call or [])
        cfg.title = title or cfg.title
        for item in fail_under or []:
            name, sep, value = item.partition("=")
            if not sep:
                raise EvalConfigError(f"--fail-under {item}: SCORER=RATE")
            cfg.fail_under[name] = rate(value, f"--fail-under {item}")
        if cfg.inputs is None:
            raise EvalConfigError("give the cases: --inputs FILE (or inputs: in the config)")
        if not cfg.candidates:
            raise EvalConfigError("give a candidate: --candidate NAME=AGENT (or candidates: in the config)")
        if not cfg.scorers:
            raise EvalConfigError("give a scorer: --scorer equals, ... (or scorers: in the config)")
        cases = load_cases(cfg.inputs) if isinstance(cfg.inputs, Path) else []
        specs = [*cfg.candidates, *([cfg.baseline] if isinstance(cfg.baseline, CandidateSpec) else [])]
        if on_workers and any(c.set for c in specs):
            raise EvalConfigError("--on-workers: workers run an agent as --agent takes it, with no set: "
                                  "overrides; write the changed agent to a file of its own")
    except (EvalConfigError, CaseFileError) as err:
        fail(str(err))
    plans = {c.name: plan_of(c.agent, c.set) for c in cfg.candidates}
    base: Any = (cfg.baseline if not isinstance(cfg.baseline, CandidateSpec)
                 else (cfg.baseline.name, plan_of(cfg.baseline.agent, cfg.baseline.set)))
    policy = CallPolicy(frozenset(cfg.allow_calls), live_models=live_models or cfg.live_models)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=err_console, transient=True)
    tasks: dict[str, Any] = {}

    def progress(name: str, done: int, total: int) -> None:
        if name not in tasks:
            tasks[name] = bar.add_task(f"{name}: cases", total=total)
        bar.update(tasks[name], completed=done)

    fleet: _Fleet | None = None
    into: dict[str, Any] | None = None
    try:
        if isinstance(cfg.inputs, TrafficSpec):
            spec = cfg.inputs
            settings = settings_or_exit(settings_file, app=spec.app or app_id,
                                        bootstrap_servers=bootstrap_servers)
            need_configured_broker(settings)
            names = TopicNames(settings.app)
            with kafka_settings(settings, need=(names.input, names.events)) as s:
                only = set(spec.sessions)
                traffic = recorded_traffic(
                    s, from_offsets=None if spec.from_offset is None else offsets_of(spec.from_offset),
                    from_time_ms=None if spec.from_time is None else time_ms_of(spec.from_time),
                    sessions=(lambda sid: sid in only) if only else (lambda _sid: True), sample=spec.sample)
                if not traffic.cases:
                    fail(f"no inputs of {settings.app} in that range")
                fleet = _Fleet(s, to_app, specs, source=True) if on_workers else None
                into = None if to_app is None or fleet is not None else _apps(s, to_app, [*plans, *(
                    [base[0]] if isinstance(base, tuple) else [])])
                with bar:
                    report = evaluate(traffic.cases, plans, cfg.scorers, baseline=base or RECORDED,
                                      policy=policy, traffic=traffic, progress=progress,
                                      into=None if into is None else into.__getitem__,
                                      on_workers=None if fleet is None else fleet.app, wait_s=wait,
                                      started=None if fleet is None else fleet.started)
        elif on_workers:
            settings = settings_or_exit(settings_file, app=app_id, bootstrap_servers=bootstrap_servers)
            need_configured_broker(settings)
            with kafka_settings(settings) as s, bar:
                fleet = _Fleet(s, to_app, specs)
                report = evaluate(cases, plans, cfg.scorers, baseline=base, policy=policy, progress=progress,
                                  on_workers=fleet.app, wait_s=wait, started=fleet.started)
        else:
            if to_app is not None:
                raise EvalConfigError("--to-app: cases from a file run with no broker; it is for "
                                      "recorded traffic (or --on-workers)")
            if save and app_id is None:
                raise EvalConfigError("--save: cases from a file are kept with the app --app names")
            with bar:
                report = evaluate(cases, plans, cfg.scorers, baseline=base, policy=policy, progress=progress)
        below = report.below(cfg.fail_under)
    except (ValueError, KeyError, TimeoutError) as err:
        fail(str(err.args[0] if isinstance(err, KeyError) else err))
    named = cfg.title or " vs ".join([", ".join(report.candidates), *filter(None, [report.baseline])])
    if html is not None:
        from eddies.connectors.evaluation.html import html_report

        html.write_text(html_report(report, named), encoding="utf-8")
    if as_json:
        console.print_json(json.dumps(report.to_dict(), default=str))
    else:
        for line in report.lines():
            console.print(escape(line), highlight=False)
    if save if save is not None else isinstance(cfg.inputs, TrafficSpec):
        # Where each candidate's sessions are (--on-workers, --to-app), to trace them.
        apps = ({n: fleet.app(n).app for n in report.results if n != RECORDED} if fleet is not None
                else {n: t.app for n, t in into.items()} if into is not None else {})
        _save(report, named, cfg, settings_file, app_id, bootstrap_servers, apps)
    for line in below:
        err_console.print(f"[red]under the floor: {escape(line)}[/red]", highlight=False)
    if below:
        raise typer.Exit(1)


def _save(report: Any, named: str, cfg: Any, settings_file: Path | None, app_id: str | None,
          bootstrap_servers: str | None, apps: dict[str, str]) -> None:
    """Keep ``report`` in APP.evaluations (the evaluated app's, or --app's), saying where;
    one that cannot be kept (too large, no right to make the topic) is said, and the
    evaluation's outcome stands."""
    from eddies.connectors.evaluation.config import TrafficSpec
    from eddies.connectors.evaluation.saved import save_report

    app = cfg.inputs.app if isinstance(cfg.inputs, TrafficSpec) and cfg.inputs.app else app_id
    settings = settings_or_exit(settings_file, app=app, bootstrap_servers=bootstrap_servers)
    need_configured_broker(settings)
    try:
        saved = save_report(settings, report, title=named,
                            config={**cfg.described(), **({"apps": apps} if apps else {})})
    except Exception as err:  # ReportTooLarge, TimeoutError, a TopicError or KafkaException
        err_console.print(f"[yellow]the report was not kept in {escape(settings.app)}.evaluations: "
                          f"{escape(str(err))}[/yellow]", highlight=False)
        return
    err_console.print(f"kept as evaluation {escape(saved.id)} in {escape(settings.app)}.evaluations "
                      f"(eddies ui --app {escape(settings.app)}: Evaluations)", highlight=False)


class _Fleet:
    """--on-workers: the app each candidate's cases go to (PREFIX-NAME), and what to tell
    whoever starts its workers."""

    def __init__(self, settings: Any, prefix: str | None, specs: list[Any], source: bool = False) -> None:
        import dataclasses
        import time

        if source:  # partitioned as the app evaluated: its sessions keep their partitions
            from eddies.connectors.runtime.preflight import require_topics
            from eddies.connectors.runtime.topics import TopicNames

            topic = TopicNames(settings.app).input
            settings = dataclasses.replace(settings, partitions=require_topics(settings, [topic])[topic])
        self.settings = settings
        self.prefix = prefix or f"{settings.app}-eval-{time.strftime('%Y%m%d%H%M%S')}"
        self.agents = {f"{self.prefix}-{c.name}": c.agent for c in specs}

    def app(self, name: str) -> Any:
        return _target(self.settings, self.prefix, name)

    def started(self, target: Any) -> None:
        agent = self.agents.get(target.app, "AGENT")
        err_console.print(f"cases sent to app {escape(target.app)}; its workers: eddies worker --app "
                          f"{escape(target.app)} --agent {escape(agent)} --partitions {target.partitions} "
                          f"-b {escape(target.bootstrap_servers)}", highlight=False)


def _target(settings: Any, prefix: str, name: str) -> Any:
    """The settings of app PREFIX-NAME, where candidate ``name``'s sessions go (exit 2 if
    that is the app evaluated)."""
    import dataclasses

    target = dataclasses.replace(settings, app=f"{prefix}-{name}")
    if target.app == settings.app:
        fail(f"--to-app {prefix}: {target.app} is the app evaluated")
    return target


def _apps(settings: Any, prefix: str, names: list[str]) -> dict[str, Any]:
    """The app each of ``names`` is written to (PREFIX-NAME), its topics made."""
    from confluent_kafka.admin import AdminClient

    from eddies.connectors.runtime.topics import TopicNames, ensure_topics

    out = {}
    for name in names:
        target = _target(settings, prefix, name)
        ensure_topics(AdminClient(settings.client_config()), TopicNames(target.app), settings.partitions,
                      settings.replication, max_message_bytes=settings.write_limit)
        out[name] = target
    return out
