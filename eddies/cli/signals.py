"""``eddies signal``, ``approve``, ``reject`` and ``resume``: a SignalEvent sent to a
session (the answer to a ``ctx.wait_for_signal``, to a tool call waiting for approval, or
to a halted session)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from eddies.cli.errors import fail
from eddies.cli.options import AppOpt, BootstrapOpt, ConfigOpt, SessionArg
from eddies.cli.output import console, err_console
from eddies.cli.settings import kafka_settings, settings_or_exit

signals_app = typer.Typer()

SignalNameArg = Annotated[str, typer.Argument(
    help="The approval request's signal, approval:<call id> (eddies tail shows it).")]
ReasonOpt = Annotated[str | None, typer.Option(help="Why; the model sees it.")]


def _send(session: str, name: str, value: Any, event_id: str, config: Path | None,
          app_id: str | None, bootstrap_servers: str | None) -> None:
    from eddies.connectors.runtime.client import send_signal
    from eddies.connectors.runtime.topics import TopicNames

    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers)
    with kafka_settings(settings, need=(TopicNames(settings.app).input,)) as s:
        send_signal(s, session, name, value, event_id)


@signals_app.command("signal", short_help="Send a signal to a session (its ctx.wait_for_signal gets it).")
def send_signal(
    session: SessionArg,
    name: Annotated[str, typer.Argument(help="The signal's name, e.g. approval:<call id>.")],
    value: Annotated[str, typer.Argument(
        help="Its value: JSON (true, 42, {\"by\": \"ana\"}), else taken as text.")] = "null",
    event_id: Annotated[str, typer.Option(help="Signal id (default: from its offset).")] = "",
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
) -> None:
    """Send a signal to a session: it answers the session's wait for NAME
    (ctx.wait_for_signal), or is kept for its next one."""
    try:
        payload: Any = json.loads(value)
    except ValueError:
        payload = value
    _send(session, name, payload, event_id, config, app_id, bootstrap_servers)
    console.print(f"signalled {escape(name)} = {escape(json.dumps(payload))} to {escape(session)}",
                  highlight=False)


def _approval_command(approved: bool, command_name: str, doc: str,
                      short_help: str | None = None) -> None:
    """Register ``eddies approve`` or ``eddies reject``: one body, the answer differs."""

    def command(
        session: SessionArg,
        name: SignalNameArg,
        reason: ReasonOpt = None,
        config: ConfigOpt = None,
        app_id: AppOpt = None,
        bootstrap_servers: BootstrapOpt = None,
    ) -> None:
        from eddies.engine import approval

        if not name.startswith(approval.PREFIX):
            err_console.print(f"[red]{escape(name)!r} is not an approval signal: it starts "
                              f"with {approval.PREFIX!r} (eddies tail shows it)[/red]")
            raise typer.Exit(2)
        _send(session, name, approval.answer(approved, reason), "", config, app_id,
              bootstrap_servers)
        console.print(f"{'approved' if approved else 'rejected'} {escape(name)} of "
                      f"{escape(session)}", highlight=False)

    command.__doc__ = doc
    signals_app.command(command_name, short_help=short_help)(command)


_approval_command(True, "approve", "Approve a tool call that waits for approval: the tool runs.")
_approval_command(False, "reject", "Reject a tool call that waits for approval: the model "
                                   "gets a tool error instead.",
                  short_help="Reject a waiting tool call: the model gets a tool error.")


@signals_app.command(short_help="Resume a halted session: its run tries its input again.")
def resume(
    session: SessionArg,
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
) -> None:
    """Resume a halted session (a ReActAgent with handle_exception FAIL, or any
    ctx.halt_async): its run tries its input again, then its waiting inputs follow."""
    from eddies.connectors.runtime.client import read_events, send_event, signal_event
    from eddies.connectors.runtime.preflight import require_topics
    from eddies.connectors.runtime.topics import TopicNames
    from eddies.engine import halts
    from eddies.events import OutputEvent, partition_for

    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers)
    names = TopicNames(settings.app)
    with kafka_settings(settings, need=(names.output, names.input)) as s:
        # The session's outputs are on its partition; its last one says whether it halted.
        part = partition_for(session, require_topics(s, [names.output])[names.output])
        last: OutputEvent | None = None
        for ev in read_events(s, names.output, partitions=[part]):
            if ev.session_id == session and isinstance(ev.payload, OutputEvent):
                last = ev.payload
        signal = None if last is None else halts.resume_signal(last)
        if signal is None:
            fail(f"session {session!r} of app {s.app} is not halted (its last output in "
                 f"{names.output} announces no halt)")
        send_event(s, signal_event(session, signal, None), f"resume of session {session!r}")
    console.print(f"resumed {escape(session)} ({escape(signal)})", highlight=False)
