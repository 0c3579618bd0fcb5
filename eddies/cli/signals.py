"""``eddies signal``, ``approve``, ``reject`` and ``resume``: a SignalEvent sent to a
session (the answer to a ``ctx.wait_for_signal``, to a tool call waiting for approval, or
to a halted session).

``approve`` and ``reject`` answer only an approval the session waits on (as its history
in ``APP.events`` shows), else list those it does and exit with 2: a mistyped or already
answered id would otherwise be kept, unseen, for a wait that never comes. ``--keep`` sends
it anyway, for an approval not asked yet."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from eddies.cli.errors import fail
from eddies.cli.options import AppOpt, BootstrapOpt, ConfigOpt, SessionArg
from eddies.cli.output import approval_line, console, err_console
from eddies.cli.settings import kafka_settings, settings_or_exit

signals_app = typer.Typer()

SignalNameArg = Annotated[str, typer.Argument(
    help="The approval request's signal, approval:<call id> (eddies tail shows it).")]
ReasonOpt = Annotated[str | None, typer.Option(help="Why; the model sees it.")]
KeepOpt = Annotated[bool, typer.Option(
    "--keep", help="Send it even if no approval with that id is pending: the session keeps it "
                   "for a wait of that name to come.")]


def _send(session: str, name: str, value: Any, event_id: str, config: Path | None,
          app_id: str | None, bootstrap_servers: str | None,
          check: Callable[[Any], None] | None = None) -> None:
    """Send the signal; ``check`` (given the settings, which reach the broker) may refuse
    first, reading ``APP.events``."""
    from eddies.connectors.runtime.client import send_signal
    from eddies.connectors.runtime.topics import TopicNames

    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers)
    names = TopicNames(settings.app)
    need = (names.input,) if check is None else (names.input, names.events)
    with kafka_settings(settings, need=need) as s:
        if check is not None:
            check(s)
        send_signal(s, session, name, value, event_id)


def _pending_or_exit(settings: Any, session: str, name: str) -> None:
    """Return if ``session`` waits on the approval ``name``; else say so, list the
    approvals it does wait on with the commands that answer them, and exit with 2."""
    from eddies.connectors.inspect.sessions import summarize, timed_history
    from eddies.connectors.runtime.topics import TopicNames
    from eddies.engine import approval
    from eddies.events import ApprovalRequestEvent

    summary = summarize(session, timed_history(settings, session))
    pending = summary.approvals
    if any(isinstance(ev.payload, ApprovalRequestEvent) and ev.payload.signal == name
           for ev in pending):
        return
    call = name[len(approval.PREFIX):]  # a call id starts with its session's (events/ids.py)
    if summary.asked(name):
        why = "it was answered already, or its deadline passed"
    elif not call.startswith((f"{session}:", f"{session}/")):
        why = f"the id is of another session, not of {session!r}"
    elif summary.events:
        why = f"session {session!r} never asked for it"
    else:
        why = f"session {session!r} has no history in {TopicNames(settings.app).events}"
    listed = ([f"approvals pending in session {session!r}:"]
              + ["  " + approval_line(ev, settings.app) for ev in pending] if pending
              else [f"no approval is pending in session {session!r}"])
    fail(f"no approval is pending with that id: {name} ({why})", *listed,
         "(--keep sends it anyway: the session keeps it for an approval asked later)")


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
        keep: KeepOpt = False,
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
              bootstrap_servers,
              None if keep else lambda s: _pending_or_exit(s, session, name))
        console.print(f"{'approved' if approved else 'rejected'} {escape(name)} of "
                      f"{escape(session)}" + (" (unchecked: if nothing waits for it yet, the session "
                                               "keeps it)" if keep else ""),
                      highlight=False)

    command.__doc__ = doc
    signals_app.command(command_name, short_help=short_help)(command)


_PENDING_ONLY = ("\n\nOnly a call the session waits on, as its history in APP.events shows "
                 "(else the calls it waits on are listed, exit code 2); --keep sends it anyway, "
                 "for a call not asked yet.")
_approval_command(True, "approve", "Approve a tool call that waits for approval: the tool "
                                   "runs." + _PENDING_ONLY)
_approval_command(False, "reject", "Reject a tool call that waits for approval: the model "
                                   "gets a tool error instead." + _PENDING_ONLY,
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
