"""``eddies send``: one input written to a session's partition of APP.input."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from eddies.cli.options import AppOpt, BootstrapOpt, ConfigOpt, SessionArg
from eddies.cli.output import console, err_console
from eddies.cli.settings import kafka_settings, settings_or_exit

send_app = typer.Typer()


@send_app.command()
def send(
    session: SessionArg,
    value: Annotated[str, typer.Argument(help="The input: text, or JSON with --json.")],
    as_json: Annotated[bool, typer.Option("--json", help="Parse VALUE as JSON.")] = False,
    event_id: Annotated[str, typer.Option(help="Input id (default: from its offset).")] = "",
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
) -> None:
    """Send one input to a session."""
    from eddies.connectors.runtime.client import send_input
    from eddies.connectors.runtime.topics import TopicNames

    payload: Any = value
    if as_json:
        try:
            payload = json.loads(value)
        except ValueError as err:
            err_console.print(f"[red]VALUE is not JSON:[/red] {err}")
            raise typer.Exit(2) from None
    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers)
    # Checked first: a producer would wait for a missing topic, or a broker may create it
    # with its default partition count, which no worker of the app could read.
    with kafka_settings(settings, need=(TopicNames(settings.app).input,)) as s:
        send_input(s, session, payload, event_id)
        from eddies.connectors.runtime.preflight import require_topics
        from eddies.events import partition_for

        # Other producers must pick the same partition (murmur2 of the key, as Kafka's Java
        # client does); a worker forwards records that arrive elsewhere, at a cost.
        topic = TopicNames(s.app).input
        count = require_topics(s, [topic])[topic]
        console.print(f"sent to {session} (partition {partition_for(session, count)} of {topic}: "
                      "murmur2 of the session id, as Kafka's Java client does)")
