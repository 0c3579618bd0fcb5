"""``eddies sessions``: an app's sessions as ``APP.events`` holds them, with their status,
the latest first; a halted one with why and the command that resumes it. Example::

    eddies sessions --app support --status halted
"""

from __future__ import annotations

import shlex
import time
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from eddies.cli.errors import fail
from eddies.cli.options import AppOpt, BootstrapOpt, ConfigOpt
from eddies.cli.output import console
from eddies.cli.settings import kafka_settings, settings_or_exit

sessions_app = typer.Typer()

#: What --status takes (the statuses connectors/inspect/sessions.py gives).
STATUSES = ("answered", "failed", "running", "halted", "waiting for approval",
            "waiting for a signal", "finished")


@sessions_app.command(short_help="List the app's sessions and their status (halted ones too).")
def sessions(
    query: Annotated[str, typer.Argument(help="Only sessions whose id contains it.")] = "",
    status: Annotated[str | None, typer.Option(
        help="Only sessions with this status: " + ", ".join(STATUSES) + ".")] = None,
    limit: Annotated[int, typer.Option(help="At most this many, the latest first.")] = 50,
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
) -> None:
    """List the app's sessions, the latest first: status, runs, when its last event was
    written, and what it waits for; a halted session with why it halted and the command
    that resumes it once the cause is fixed."""
    from eddies.connectors.inspect.sessions import SessionIndex
    from eddies.connectors.runtime.topics import TopicNames

    if status is not None and status not in STATUSES:
        fail(f"--status: {status!r} is not one of " + ", ".join(STATUSES))
    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers)
    with kafka_settings(settings, need=(TopicNames(settings.app).events,)) as s:
        found = SessionIndex(s).refresh().search(query)
    if status is not None:
        found = [f for f in found if f.status == status]
    if not found:
        console.print(f"no {'' if status is None else status + ' '}sessions in {escape(s.app)}"
                      + (f" matching {query!r}" if query else ""), highlight=False)
        return
    table = Table(box=None, pad_edge=False)
    for column in ("session", "status", "runs", "last event", "waits for / why"):
        table.add_column(column)
    for summary in found[:limit]:
        why = ", ".join(summary.waits)
        if summary.status == "halted":
            why = (f"{summary.reason}\n  (this app: eddies resume {shlex.quote(summary.session_id)} "
                   f"--app {shlex.quote(s.app)})")
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(summary.last_ms / 1000))
        table.add_row(escape(summary.session_id), summary.status, str(summary.runs), when, escape(why))
    console.print(table)
    if len(found) > limit:
        console.print(f"... and {len(found) - limit} more (--limit)", highlight=False)
