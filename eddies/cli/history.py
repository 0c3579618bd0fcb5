"""``eddies replay``, ``trace``, ``fork`` and ``reprocess``: what a session did, checked,
shown as a tree, or run again differently."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from eddies.cli.agents import agent_plan, as_recorded
from eddies.cli.options import AppOpt, BootstrapOpt, ConfigOpt, offsets_of, time_ms_of
from eddies.cli.output import console, err_console, print_tree
from eddies.cli.settings import kafka_settings, settings_or_exit

history_app = typer.Typer()

SessionOpt = Annotated[str, typer.Option("--session", help="The session.")]
AgentOpt = Annotated[str | None, typer.Option(
    help="module:attribute (or FILE.yaml#name, FILE.sql#name) of the Agent; default: EDDIES_AGENT.")]


#: How a replay step's status reads where it is not its own word.
STATUS_WORDS = {"missing": "not recomputed"}


@history_app.command(
    "replay", short_help="Replay a session from its history, no live calls; check it.")
def replay_cmd(
    session: SessionOpt,
    from_offset: Annotated[int | None, typer.Option(
        help="Start at the session's event at this offset of APP.events.")] = None,
    from_seq: Annotated[int | None, typer.Option(help="Start at this step (sequence number).")] = None,
    to_seq: Annotated[int | None, typer.Option(help="Stop after this step.")] = None,
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    # Accepted so that older scripts still run; the count is read from APP.events.
    partitions: Annotated[int | None, typer.Option("--partitions", hidden=True)] = None,
    agent: AgentOpt = None,
) -> None:
    """Re-run a session from its history with no live calls and check every event. It
    starts from the latest snapshot before --from-seq/--from-offset (read from APP.journal)
    and reads APP.events from there on; each event that differs is shown beside the
    recorded one, field by field. Exit code 1 if any differs."""
    from eddies.connectors.inspect.replay import replay_session
    from eddies.connectors.inspect.summary import describe
    from eddies.connectors.runtime.topics import TopicNames

    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers,
                                partitions=partitions, agent=agent)
    plan = agent_plan(settings, [])
    with kafka_settings(settings, need=(TopicNames(settings.app).events,)) as s:
        report = as_recorded(s, agent, lambda same: replay_session(
            s, plan, session, from_offset=from_offset, from_seq=from_seq, to_seq=to_seq, same_agent=same))
    if not report.steps:
        err_console.print(f"[red]no history for session {session!r} in {settings.app}.events"
                          f"{' in that range' if from_offset or from_seq or to_seq else ''}[/red]")
        raise typer.Exit(1)
    if report.snapshot_seq:
        console.print(f"from the snapshot at step {report.snapshot_seq} (APP.events read from offset "
                      f"{report.read_from_offset}: {report.records_read} records of the session)")
    table = Table("offset", "trace", "recomputed")
    marks = {status: f"[{colour}]{STATUS_WORDS.get(status, status)}[/{colour}]" for status, colour in
             (("same", "green"), ("moved", "yellow"), ("changed", "red"), ("missing", "red"), ("new", "red"))}
    for step in report.steps:
        offset = "" if step.offset < 0 else str(step.offset)
        table.add_row(offset, escape(describe(step.event).strip()), marks[step.status])
    console.print(table)
    if report.ok:
        console.print(f"replay of {session}: {len(report.steps)} events, every id recomputed identically")
        return
    for step in report.mismatches:
        console.print(_difference(step))
    counts = {k: sum(s.status == k for s in report.steps) for k in ("changed", "moved", "missing", "new")}
    console.print(f"[red]replay of {session}: {counts['changed']} changed, {counts['moved']} moved, "
                  f"{counts['missing']} not recomputed, {counts['new']} new[/red]")
    raise typer.Exit(1)


def _difference(step: Any) -> Table:
    """A differing step: the recorded event and the recomputed one side by side."""
    from eddies.connectors.inspect.diff import shown

    title = f"step {step.seq} ({step.event.type}): {STATUS_WORDS.get(step.status, step.status)}"
    table = Table("field", "recorded", "recomputed", title=escape(title), title_justify="left")
    if step.status in ("changed", "moved"):
        for path, was, now in step.differences():
            table.add_row(escape(path), escape(shown(was)), escape(shown(now)))
    else:
        from eddies.connectors.inspect.summary import describe

        line = escape(describe(step.event).strip())
        table.add_row("event", line if step.recorded is not None else "(none)",
                      line if step.recomputed is not None else "(none)")
    return table


@history_app.command(
    "trace", short_help="Show a session as a tree of runs, calls and outputs.")
def trace_cmd(
    session: SessionOpt,
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    run: Annotated[int | None, typer.Option(help="Only this run.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The tree as JSON.")] = False,
) -> None:
    """Show a session as a tree: each run, its model, tool and sub-agent calls (with their
    latency, tokens and cost) and its output, from the events' causation ids."""
    import json

    from eddies.connectors.inspect.sessions import timed_history, wall_times
    from eddies.connectors.inspect.tree import build_tree
    from eddies.connectors.local.rerun import forked_from
    from eddies.connectors.runtime.topics import TopicNames

    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers)
    with kafka_settings(settings, need=(TopicNames(settings.app).events,)) as s:
        records = timed_history(s, session)
        origin = forked_from(s, session) if records else None
        if not records:
            err_console.print(f"[red]no history for session {session!r} in {settings.app}.events[/red]")
            _why_no_history(s, session)
            raise typer.Exit(1)
    roots = [root for root in build_tree([r.event for r in records], wall_times(records))
             if run is None or root.run == run]
    if not roots:
        err_console.print(f"[red]session {session!r} has no run {run}[/red]")
        raise typer.Exit(1)
    if as_json:
        print(json.dumps({"session_id": session, "forked_from": origin,
                          "runs": [r.to_dict() for r in roots]}, indent=1))
        return
    if origin is not None:
        of, _, step = origin.rpartition("@")
        console.print(f"{session} is a fork of session {of} at step {step} (eddies fork)",
                      highlight=False, markup=False)
    print_tree(console, roots)


def _why_no_history(settings: Any, session: str) -> None:
    """What a session with no history may be waiting for: its input in APP.input, taken by
    no worker (is one up?)."""
    from eddies.connectors.inspect.sessions import unread_inputs
    from eddies.connectors.kafka.liveness import GroupMembers
    from eddies.connectors.runtime.membership import Membership
    from eddies.connectors.runtime.preflight import check_broker
    from eddies.connectors.runtime.topics import TopicNames

    waiting = unread_inputs(settings, session)
    if not waiting:
        err_console.print(f"no input for it in {escape(TopicNames(settings.app).input)} either: "
                          "check the session id and --app", highlight=False)
        return
    members = GroupMembers(settings, Membership.for_broker(settings, check_broker(settings).cluster_id))
    workers = members.claimants()
    up = ("a worker is up and has not written its events yet" if workers else
          "no worker of the app is up: start one (eddies worker)" if workers is not None else
          "whether a worker is up is unknown (the broker did not say)")
    inputs = "an input" if waiting == 1 else f"{waiting} inputs"
    err_console.print(f"{inputs} for it waiting in {escape(TopicNames(settings.app).input)}: {up}",
                      highlight=False)


SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="FIELD=VALUE (or RESOURCE.FIELD=VALUE) on the agent's chat model setups: "
    "model, prompt or connection. Repeatable.")]


def _print_rerun(console: Any, report: Any) -> None:
    from eddies.connectors.inspect.summary import describe

    console.print(f"{report.inputs} inputs, {report.events} events written; calls answered from the "
                  f"recording: {len(report.reused)}, made live: {len(report.live)}", highlight=False)
    table = Table("call", "answered")
    for cid in report.reused:
        table.add_row(escape(cid), "recorded outcome")
    for cid in report.live:
        table.add_row(escape(cid), "[yellow]live[/yellow]")
    if report.reused or report.live:
        console.print(table)
    for ev in report.outputs:
        console.print(escape(describe(ev).strip()), highlight=False)


@history_app.command(
    "fork", short_help="Start a new session from a session's step, with changes.")
def fork_cmd(
    session: SessionOpt,
    at_seq: Annotated[int, typer.Option("--at-seq", help="The last step taken over from the session.")],
    to: Annotated[str, typer.Option("--to", help="The new session's id.")],
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    agent: AgentOpt = None,
    assignments: SetOpt = None,
) -> None:
    """A new session whose history is the session's up to step --at-seq (its inputs applied
    again, its calls answered from their recorded outcomes, none made again), going on live
    from there with --agent (another version) and --set changes (another model or prompt).
    It runs in this process and writes to the app's topics: eddies trace/replay/ui show it;
    its records carry the header eddies-fork-of: SESSION@STEP."""
    from eddies.connectors.local.rerun import fork_session
    from eddies.connectors.runtime.topics import TopicNames

    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers, agent=agent)
    plan = agent_plan(settings, assignments or [])
    names = TopicNames(settings.app)
    with kafka_settings(settings, need=(names.events, names.output, names.journal)) as s:
        try:
            report = as_recorded(s, agent, lambda same: fork_session(s, plan, session, at_seq, to,
                                                              same_agent=same))
        except ValueError as err:
            raise typer.BadParameter(str(err)) from None
    console.print(f"forked {session} at step {at_seq} into {to}", highlight=False)
    _print_rerun(console, report)


@history_app.command(
    "reprocess", short_help="Run a range of APP.input again, into another app.")
def reprocess_cmd(
    to_app: Annotated[str, typer.Option("--to-app", help="The application id to run them into.")],
    from_offset: Annotated[str | None, typer.Option(
        help="PARTITION:OFFSET[,PARTITION:OFFSET...] of APP.input to start from.")] = None,
    from_time: Annotated[str | None, typer.Option(
        help="Start at this time on every partition: ISO 8601 (2026-12-01T09:00:00Z) or ms.")] = None,
    session: Annotated[list[str] | None, typer.Option(
        "--session", help="Only these sessions (repeatable).")] = None,
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    agent: AgentOpt = None,
    assignments: SetOpt = None,
) -> None:
    """Run the inputs of a range of APP.input again, into another application id, with
    --agent (e.g. a new version against yesterday's traffic): a call the new agent makes
    just as the recording did (same place, same arguments) is answered from its recorded
    outcome, any other is made live; the report lists which. Sessions start anew there."""
    import dataclasses

    from eddies.connectors.local.rerun import reprocess
    from eddies.connectors.runtime.topics import TopicNames, ensure_topics

    if (from_offset is None) == (from_time is None):
        raise typer.BadParameter("give one of --from-offset and --from-time")
    offsets = offsets_of(from_offset) if from_offset is not None else None
    since = time_ms_of(from_time) if from_time is not None else None
    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers, agent=agent)
    if to_app == settings.app:
        raise typer.BadParameter("reprocess writes into another application id", param_hint="--to-app")
    plan = agent_plan(settings, assignments or [])
    names = TopicNames(settings.app)
    only = set(session or [])
    with kafka_settings(settings, need=(names.input, names.events)) as s:
        from confluent_kafka.admin import AdminClient

        target = dataclasses.replace(s, app=to_app)
        ensure_topics(AdminClient(s.client_config()), TopicNames(to_app), s.partitions, s.replication,
                      max_message_bytes=s.write_limit)
        try:
            report = as_recorded(s, agent, lambda same: reprocess(
                s, target, plan, from_offsets=offsets, from_time_ms=since, same_agent=same,
                sessions=(lambda sid: sid in only) if only else (lambda _sid: True)))
        except ValueError as err:
            raise typer.BadParameter(str(err)) from None
    console.print(f"reprocessed {len(report.sessions)} sessions of {settings.app} into {to_app}",
                  highlight=False)
    _print_rerun(console, report)
