"""``eddies send``: one input written to a session's partition of APP.input."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from eddies.cli.options import AppOpt, BootstrapOpt, ConfigOpt, SessionArg
from eddies.cli.output import console, err_console
from eddies.cli.settings import kafka_settings, settings_or_exit

send_app = typer.Typer()


@send_app.command(short_help="Send one input to a session (--follow: and print its answer).")
def send(
    session: SessionArg,
    value: Annotated[str, typer.Argument(help="The input: text, or JSON with --json.")],
    as_json: Annotated[bool, typer.Option("--json", help="Parse VALUE as JSON.")] = False,
    event_id: Annotated[str, typer.Option(help="Input id (default: from its offset).")] = "",
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="Then print the answer as it is written (the app's stream: "
        "a model with stream=True), what the agent does, and the run's output.")] = False,
    idle: Annotated[float, typer.Option(
        help="With --follow: give up after this many seconds without a record.")] = 120.0,
    user: Annotated[str | None, typer.Option(
        "--user", help="Who asks: the end user's id, signed with the identity key "
        "(identity_key_env) so the workers trust it; tools and sub-agents get it.")] = None,
    tenant: Annotated[str | None, typer.Option(
        "--tenant", help="With --user: the tenant the user acts for.")] = None,
) -> None:
    """Send one input to a session (``--follow``: and print its answer as it is written)."""
    from eddies.connectors.runtime.client import send_input
    from eddies.connectors.runtime.topics import TopicNames

    payload: Any = value
    if as_json:
        try:
            payload = json.loads(value)
        except ValueError as err:
            err_console.print(f"[red]VALUE is not JSON:[/red] {err}")
            raise typer.Exit(2) from None
    if tenant is not None and not user:
        err_console.print("[red]--tenant needs --user[/red] (an identity names its user)")
        raise typer.Exit(2)
    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers)
    # Checked first: a producer would wait for a missing topic, or a broker may create it
    # with its default partition count, which no worker of the app could read.
    names = TopicNames(settings.app)
    need = (names.input, names.output, names.stream) if follow else (names.input,)
    with kafka_settings(settings, need=need) as s:
        from eddies.connectors.runtime.preflight import require_topics
        from eddies.events import partition_for

        # Other producers must pick the same partition (murmur2 of the key, as Kafka's Java
        # client does); a worker forwards records that arrive elsewhere, at a cost.
        count = require_topics(s, [names.input])[names.input]
        feed = None
        if follow:  # from where the topics end now: the answer cannot come before the input
            from eddies.connectors.inspect.session_feed import SessionFeed

            feed = SessionFeed(s, session, count)
        identity = signer = None
        if user:
            from eddies.connectors.runtime.preflight import producer_identity_signer
            from eddies.events import Identity

            identity, signer = Identity(user, tenant), producer_identity_signer(s)
        sent = send_input(s, session, payload, event_id, identity=identity, signer=signer)
        console.print(f"sent to {session} (partition {partition_for(session, count)} of {names.input}: "
                      "murmur2 of the session id, as Kafka's Java client does)")
        if feed is not None:
            from eddies.cli.follow import follow as follow_session

            try:
                answered = follow_session(feed, s.app, idle, sent)
            finally:
                feed.close()
            if not answered:
                err_console.print(f"[red]no output for {session} within {idle:g} s without a "
                                  "record: is a worker of the app up?[/red]")
                raise typer.Exit(1)
