"""How the ``eddies`` command reports an error: a user's (configuration, broker, topics:
exit code 2) or a bug (exit code 1); a command's own error and its exit."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.markup import escape

from eddies.cli.output import err_console


def user_error(err: Exception) -> str | None:
    """The message for an error the user can fix (configuration, broker, topics), or None
    for a bug."""
    from confluent_kafka import KafkaException

    from eddies.connectors.flink.jars import FlinkSetupError
    from eddies.connectors.kafka.broker import BrokerError
    from eddies.connectors.remote.configuration import ConfigurationError
    from eddies.connectors.runtime.outbox import DeliveryFailedError
    from eddies.connectors.runtime.preflight import PreflightError, error_text
    from eddies.connectors.runtime.settings import ConfigError
    from eddies.connectors.runtime.topics import TopicError
    from eddies.engine import PlanError

    if isinstance(err, ConfigError | ConfigurationError):  # a setting; an MCP or A2A resource
        return f"configuration error: {err}"
    if isinstance(err, PlanError):  # the agent's definition (its message names the agent)
        return f"configuration error: {err}"
    if isinstance(err, KafkaException):
        return f"Kafka error: {error_text(err)}"
    # A bare LookupError is a reader's missing topic; KeyError and IndexError are bugs.
    if isinstance(err, (PreflightError, TopicError, BrokerError, DeliveryFailedError, TimeoutError,
                        FlinkSetupError, FileNotFoundError)) \
            or type(err) is LookupError:
        return str(err)
    return None


def print_error(message: str, err: BaseException) -> None:
    """``message`` in red, then the notes of ``err`` (the broker's address)."""
    first, *rest = [*message.splitlines(), *getattr(err, "__notes__", [])] or [""]
    err_console.print(f"[red]{escape(first)}[/red]", highlight=False)
    for line in rest:
        err_console.print(escape(line), highlight=False)


def fail(*lines: str) -> NoReturn:
    """Print ``lines`` as the command's error and exit with 2."""
    for i, line in enumerate(lines):
        err_console.print(f"[red]{escape(line)}[/red]" if i == 0 else escape(line), highlight=False)
    raise typer.Exit(2)


def click_types(name: str) -> tuple[type[BaseException], ...]:
    """Exception class ``name`` of click and of the copy of click in typer (typer 0.2x
    raises its own, which ``click.ClickException`` does not catch)."""
    import importlib

    found: list[type[BaseException]] = []
    for module in ("click.exceptions", "typer._click.exceptions"):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)
