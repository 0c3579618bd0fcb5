"""The settings a command works with: loaded from the config file, the environment and its
options, and given a broker (the configured one, or an embedded one when none is)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from eddies.cli.errors import fail
from eddies.cli.output import err_console, log


def settings_or_exit(config: Path | None, **overrides: Any) -> Any:
    """The settings from ``config``, the environment and ``overrides``; a configuration
    error is printed and exits with 2."""
    from eddies.connectors.runtime.settings import ConfigError, load_settings

    try:
        return load_settings(config, overrides=overrides)
    except ConfigError as err:
        err_console.print(f"[red]configuration error:[/red] {escape(str(err))}")
        raise typer.Exit(2) from None


@contextlib.contextmanager
def kafka_settings(settings: Any, *, need: tuple[str, ...] = (), check: bool = True) -> Iterator[Any]:
    """Yield settings with a broker: the configured one, or an embedded one.

    The configured broker must answer within ``connect_timeout_ms`` (``check``; a Worker
    checks it itself), failing at once if it refuses the connection, and have the topics
    in ``need`` (waiting up to that timeout for them: a worker started just before
    creates them). Each wait is announced on stderr once, so a command never stands
    silent. A Kafka error in the body gets the broker's address as a note, for
    :func:`eddies.cli.main`'s message.
    """
    from confluent_kafka import KafkaException

    from eddies.connectors.runtime.outbox import DeliveryFailedError
    from eddies.connectors.runtime.preflight import PreflightError, await_topics, check_broker

    if need:
        need_configured_broker(settings)
    address = settings.bootstrap_servers
    try:
        if address:
            if check or need:  # a worker started just before may still create them
                said = functools.partial(notice, settings)
                await_topics(settings, need, settings.connect_timeout_ms / 1000,
                             check_broker(settings, waiting=said), waiting=said)
            yield settings
            return
        from eddies.connectors.kafka.broker import EmbeddedBroker

        with EmbeddedBroker() as broker:
            notice(settings, f"no bootstrap servers configured: started the embedded broker "
                             f"at {broker.bootstrap} (in memory, stopped on exit)")
            settings.bootstrap_servers = address = broker.bootstrap
            yield settings
    except (KafkaException, TimeoutError, DeliveryFailedError, LookupError) as err:
        if not isinstance(err, PreflightError):  # those name the address already
            err.add_note(f"(broker {address})")
        raise


def notice(settings: Any, text: str) -> None:
    """``text`` on stderr, in yellow (with ``log_format`` json, a warning in the log: every
    line JSON there)."""
    if getattr(settings, "log_format", "text") == "json":
        log.warning(text)
    else:
        err_console.print(f"[yellow]{escape(text)}[/yellow]", highlight=False)


def need_configured_broker(settings: Any) -> None:
    """Exit with 2 unless a broker is configured: an embedded one starts empty, so a command
    that reads or writes an existing app would have nothing to work on."""
    if not settings.bootstrap_servers:
        fail(f"no bootstrap servers configured: this command needs the broker that the "
             f"workers of app {settings.app} use",
             "set bootstrap_servers, EDDIES_BOOTSTRAP_SERVERS or -b (`eddies broker` runs one)")
