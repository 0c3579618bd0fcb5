"""``eddies signal``, ``eddies approve`` and ``eddies reject``: a SignalEvent sent to a
session (the answer to a ``ctx.wait_for_signal``, or to a tool call waiting for approval)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from .cli_options import AppOpt, BootstrapOpt, ConfigOpt, SessionArg

signals_app = typer.Typer()

SignalNameArg = Annotated[str, typer.Argument(
    help="The approval request's signal, approval:<call id> (eddies tail shows it).")]
ReasonOpt = Annotated[str | None, typer.Option(help="Why; the model sees it.")]


def _send(session: str, name: str, value: Any, event_id: str, config: Path | None,
          app_id: str | None, bootstrap_servers: str | None) -> None:
    from eddies.cli import _kafka, _settings
    from eddies.connectors.kafka.client import send_event, signal_event
    from eddies.connectors.kafka.topics import TopicNames

    settings = _settings(config, app=app_id, bootstrap_servers=bootstrap_servers)
    with _kafka(settings, need=(TopicNames(settings.app).input,)) as s:
        send_event(s, signal_event(session, name, value, event_id),
                   f"signal {name!r} for session {session!r}")


@signals_app.command("signal")
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
    from eddies.cli import console

    try:
        payload: Any = json.loads(value)
    except ValueError:
        payload = value
    _send(session, name, payload, event_id, config, app_id, bootstrap_servers)
    console.print(f"signalled {escape(name)} = {escape(json.dumps(payload))} to {escape(session)}",
                  highlight=False)


def _answer(session: str, name: str, approved: bool, reason: str | None, config: Path | None,
            app_id: str | None, bootstrap_servers: str | None) -> None:
    from eddies.cli import console, err_console
    from eddies.engine import approval

    if not name.startswith(approval.PREFIX):
        err_console.print(f"[red]{escape(name)!r} is not an approval signal: it starts with "
                          f"{approval.PREFIX!r} (eddies tail shows it)[/red]")
        raise typer.Exit(2)
    _send(session, name, approval.answer(approved, reason), "", config, app_id, bootstrap_servers)
    console.print(f"{'approved' if approved else 'rejected'} {escape(name)} of {escape(session)}",
                  highlight=False)


@signals_app.command()
def approve(
    session: SessionArg,
    name: SignalNameArg,
    reason: ReasonOpt = None,
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
) -> None:
    """Approve a tool call that waits for approval: the tool runs."""
    _answer(session, name, True, reason, config, app_id, bootstrap_servers)


@signals_app.command()
def reject(
    session: SessionArg,
    name: SignalNameArg,
    reason: ReasonOpt = None,
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
) -> None:
    """Reject a tool call that waits for approval: the model gets a tool error instead."""
    _answer(session, name, False, reason, config, app_id, bootstrap_servers)
