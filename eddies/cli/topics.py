"""``eddies topics create`` and ``eddies topics describe``: the application's topics."""

from __future__ import annotations

import typer
from rich.table import Table

from eddies.cli.options import AppOpt, BootstrapOpt, ConfigOpt, PartitionsOpt
from eddies.cli.output import console
from eddies.cli.settings import kafka_settings, need_configured_broker, settings_or_exit

topics_app = typer.Typer(no_args_is_help=True, help="Create or describe the application's topics.")


@topics_app.command("create")
def topics_create(config: ConfigOpt = None, app_id: AppOpt = None,
                  bootstrap_servers: BootstrapOpt = None, partitions: PartitionsOpt = None) -> None:
    """Create the app's topics that are missing; check the others."""
    from confluent_kafka.admin import AdminClient

    from eddies.connectors.runtime.topics import TopicNames, ensure_topics

    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers,
                                partitions=partitions)
    with kafka_settings(settings) as s:
        # TopicError (another partition count): main prints it, exit code 2.
        created = ensure_topics(AdminClient(s.client_config()), TopicNames(s.app), s.partitions,
                                s.replication, max_message_bytes=s.write_limit)
        console.print(f"created: {', '.join(created) or 'nothing (all present)'}")


@topics_app.command("describe")
def topics_describe(config: ConfigOpt = None, app_id: AppOpt = None,
                    bootstrap_servers: BootstrapOpt = None) -> None:
    """Show the application's topics and their partition counts."""
    from eddies.connectors.runtime.preflight import app_topics

    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers)
    need_configured_broker(settings)
    with kafka_settings(settings, check=False) as s:  # app_topics checks the broker
        table = Table("topic", "partitions")
        for name, count in app_topics(s).items():
            table.add_row(name, "missing" if count is None else str(count))
        console.print(table)
