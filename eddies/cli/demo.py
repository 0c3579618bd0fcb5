"""``eddies demo``: the bundled agents end to end on Kafka with offline models, each
part a worker on its own app, its answers and the replay of one session."""

from __future__ import annotations

import functools
import time
from typing import Annotated, Any

import typer
from rich.markup import escape

from eddies.cli.options import BootstrapOpt, ConfigOpt
from eddies.cli.output import console, err_console, print_tree
from eddies.cli.settings import kafka_settings, notice, settings_or_exit

demo_app = typer.Typer()


@demo_app.command(short_help="Run the bundled example agents end to end, with offline models.")
def demo(
    config: ConfigOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the answers.")] = 60.0,
) -> None:
    """Run the bundled agents end to end on Kafka with offline models: a calculator, a
    ReAct travel helper, a reflection (drafter and critic) tagline writer, a trip planner
    that calls the last two as sub-agents, a travel guide that answers from a shipped
    corpus with citations (retrieval from the embedded vector store), and an evaluation of
    the travel helper with a changed prompt on its recorded sessions."""
    import dataclasses

    from eddies import demo as d

    settings = settings_or_exit(config, app="demo", bootstrap_servers=bootstrap_servers)
    with kafka_settings(settings, check=False) as s:  # Worker.start checks the broker
        parts = [
            (s, d.calculator_agent(), d.PROMPTS, "1/6 calculator",
             "An agent of two actions: the model calls the add tool, then answers."),
            (dataclasses.replace(s, app="demo-travel"), d.travel_agent(),
             d.TRAVEL_PROMPTS + d.MORE_TRAVEL_PROMPTS,
             "2/6 travel helper", "A ReActAgent: the model asks for the weather of each city "
             "and its local time (a tool of the MCP time server, over stdio), all in parallel, "
             "then answers from the results."),
            (dataclasses.replace(s, app="demo-tagline"), d.tagline_agent(), d.TAGLINE_PROMPTS,
             "3/6 tagline writer", "A ReflectionAgent: a drafter writes, a critic reviews; "
             "drafts go back with its feedback until it approves one."),
            (dataclasses.replace(s, app="demo-planner"), d.planner_agent(), d.PLANNER_PROMPTS,
             "4/6 trip planner", "A ReActAgent whose model calls two sub-agents as tools, in "
             "parallel: the travel helper and the tagline writer, each in a child scope of the "
             "session (its events shown under its call, marked | name)."),
            (dataclasses.replace(s, app="demo-guide"), d.rag_agent(), d.RAG_PROMPTS,
             "5/6 travel guide", "A RagAgent: the passages of a small travel guide shipped with "
             "Eddies nearest to the question, from the embedded vector store (offline "
             "embeddings), then the model's answer citing them; the query is a durable call "
             "whose documents the replay takes from the history."),
        ]
        ok = [_demo_part(on, agent, prompts, title, about, timeout)
              for on, agent, prompts, title, about in parts]
        ok.append(_demo_eval(parts[1][0]))
        for on, _, prompts, _, _ in (parts[3], parts[4]):
            session = prompts[0][0]
            console.rule(f"[bold]The trace tree of session {escape(session)}[/bold] (app {escape(on.app)})")
            console.print(f"eddies trace --session {session} --app {on.app}: each run, its model, "
                          "tool, retrieval and sub-agent calls with latency and tokens, from "
                          "causation ids.", soft_wrap=False)  # prose: wrapped at words
            ok.append(_demo_tree(on, session))
    console.print("To run them against a broker that outlives one command:\n"
                  "  eddies broker                       # terminal 1; prints the address\n"
                  "  export EDDIES_BOOTSTRAP_SERVERS=...  # then, in terminal 2:\n"
                  "  eddies worker --app demo &\n"
                  "  eddies send alice '{\"a\": 2, \"b\": 3}' --json --app demo\n"
                  "  eddies tail --app demo\n"
                  "  eddies replay --session alice --app demo\n"
                  "  eddies worker --app travel --agent eddies.demo:travel_agent &\n"
                  "  eddies worker --app tagline --agent eddies.demo:tagline_agent &\n"
                  "  eddies worker --app planner --agent eddies.demo:planner_agent &\n"
                  "  eddies worker --app guide --agent eddies.demo:rag_agent &",
                  highlight=False, markup=False)
    if not all(ok):
        err_console.print(f"[red]{ok.count(False)} of {len(ok)} demo parts failed[/red]")
        raise typer.Exit(1)


def _demo_part(s: Any, agent: Any, prompts: list[tuple[str, str]], title: str, about: str,
               timeout: float) -> bool:
    """One part of ``eddies demo``: a worker of ``agent`` on app ``s.app`` answers
    ``prompts`` (session, text); print the answers, then the replay of the first prompt's
    session from its history. Whether every answer came and the replay matched."""
    from eddies.connectors.inspect.replay import replay_session
    from eddies.connectors.inspect.summary import describe
    from eddies.connectors.kafka.worker import Worker
    from eddies.connectors.runtime.client import producer, read_events, send_input

    console.rule(f"[bold]{escape(title)}[/bold] (app {escape(s.app)})")
    console.print(escape(about), soft_wrap=False)  # prose: wrapped at words
    worker = Worker(s, agent).start(waiting=functools.partial(notice, s))
    try:
        with console.status("worker joining its consumer groups ..."):
            if not worker.wait_assigned(60):
                err_console.print("[red]the worker did not get its partitions[/red]")
                raise typer.Exit(1)
        feed = None
        if worker.plan.streams():  # the first answer shown as it is written
            from eddies.connectors.inspect.session_feed import SessionFeed

            feed = SessionFeed(s, prompts[0][0])
        prod = producer(s)
        for session, prompt in prompts:
            send_input(s, session, prompt, prod=prod)
            console.print(f"-> [bold]{escape(session)}[/bold]: {escape(prompt)}")
        prod.flush(30)
        if feed is not None:
            from eddies.cli.follow import follow

            console.print(f"\n{prompts[0][0]}'s answer as the model writes it (APP.stream; "
                          f"eddies send --follow does this):", highlight=False, markup=False)
            try:
                follow(feed, s.app, timeout)
            finally:
                feed.close()
            console.print()
        got = 0
        start = time.monotonic()
        with console.status("waiting for answers ..."):
            for ev in read_events(s, worker.names.output, follow=True, timeout=timeout):
                text = _demo_answer(ev.payload)
                sep = "" if text.startswith("\n") else " "  # a dict: one field a line
                console.print(f"<- [bold]{escape(ev.session_id)}[/bold] (run {ev.run}):{sep}{escape(text)}")
                got += 1
                if got == len(prompts):
                    break
        counters = " ".join(f"{k}={v}" for k, v in worker.counters.snapshot().items() if v)
        console.print(f"{got} answer{'' if got == 1 else 's'} in {time.monotonic() - start:.2f}s; "
                      f"worker counters: {counters}", highlight=False)
        session = prompts[0][0]
        report = replay_session(s, worker.plan, session)
        console.print(f"\nReplay of session {session!r} from its history (no model or tool call):")
        for step in report.steps:
            mark = "[green]ok[/green]" if step.matches else f"[red]{step.status.upper()}[/red]"
            console.print(f"{escape(describe(step.event))}  {mark}")
        console.print(f"replay: {'ids match' if report.ok else 'MISMATCH'}\n")
        return got == len(prompts) and report.ok
    finally:
        worker.stop()


def _demo_eval(s: Any) -> bool:
    """``eddies eval`` of the travel helper with a changed prompt on the travel app's
    recorded sessions; print the comparison, write the HTML report. Whether it ran."""
    import tempfile
    from pathlib import Path

    from eddies import demo as d
    from eddies.connectors.evaluation.html import html_report
    from eddies.connectors.models.scripted import ScriptedChatModel
    from eddies.connectors.remote.discovery import discover_tools
    from eddies.engine import AgentPlan
    from eddies.eval import RECORDED, Equals, Judge, Regex, evaluate, recorded_traffic, save_report

    console.rule(f"[bold]6/6 evaluation[/bold] (app {escape(s.app)})")
    console.print(f"eddies eval: the travel helper with a changed prompt ({d.BRIEFLY!r}) on the "
                  "travel helper's recorded sessions, against what it answered then. Its model "
                  "is asked again; its tool calls are the recording's (none is made again). "
                  "Scorers: the same answer, temperatures given, and a scripted judge.",
                  soft_wrap=False)  # prose: wrapped at words
    candidate = d.brief_travel_agent()
    discover_tools(candidate)
    traffic = recorded_traffic(s, from_time_ms=0)
    report = evaluate(traffic.cases, {"brief": AgentPlan.compile(candidate)},
                      [Equals(), Regex(r"up to -?\d+ C", name="temperatures"),
                       Judge(ScriptedChatModel(d.travel_judge), "Every city named gets packing advice.")],
                      baseline=RECORDED, traffic=traffic)
    for line in report.lines():
        console.print(escape(line), highlight=False)
    title = "The travel helper, briefly"
    page = Path(tempfile.mkdtemp(prefix="eddies-demo-")) / "eval.html"
    page.write_text(html_report(report, title), encoding="utf-8")
    console.print(f"HTML report (each session side by side): {page}", highlight=False)
    saved = save_report(s, report, title=title, config={"cases": {"app": s.app, "from_time": "0"}})
    console.print(f"Kept as evaluation {saved.id} in {escape(s.app)}.evaluations: eddies ui lists it "
                  "under Evaluations.\n", highlight=False)
    return len(traffic.cases) == len(d.TRAVEL_PROMPTS + d.MORE_TRAVEL_PROMPTS)


def _demo_tree(s: Any, session: str) -> bool:
    """Print the trace tree of ``session``; whether it has one."""
    from eddies.connectors.inspect.sessions import timed_history, wall_times
    from eddies.connectors.inspect.tree import build_tree

    records = timed_history(s, session)
    roots = build_tree([r.event for r in records], wall_times(records))
    print_tree(console, roots)
    return bool(roots) and all(r.status == "ok" for r in roots)


def _demo_answer(out: Any) -> str:
    """An answer of ``eddies demo``: a text, a dict one field a line, or the error."""
    error = getattr(out, "error", None)
    if error is not None:
        return f"ERROR {error.message}"
    value = getattr(out, "output", None)
    if isinstance(value, dict):
        return "".join(f"\n     {k}: {' '.join(str(v).split())}" for k, v in value.items())
    return str(value)
