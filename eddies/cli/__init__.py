"""The ``eddies`` command: demo, broker, worker, send, tail, sessions, replay, trace, fork,
reprocess, eval, ui, topics, signal, approve, reject, resume, check, flink.

Every command that needs Kafka uses ``bootstrap_servers`` from the config file,
``EDDIES_BOOTSTRAP_SERVERS`` or ``--bootstrap-servers``; with none it starts the embedded
broker, says so, and stops it on exit (send, tail, replay, trace, fork, reprocess, ui and
topics describe refuse: an embedded broker has no app to work on).

Errors a user can fix (configuration, a broker that does not answer within
``connect_timeout_ms``, missing topics) are a line or two on stderr and exit code 2; other
errors are one line and exit code 1. ``EDDIES_LOG_LEVEL=DEBUG`` adds the traceback and the
Kafka client's log.

The commands live one group to a module, next to this package's shared ones (output,
errors, options, settings, agents); this module only assembles them into ``app`` and runs
it (:func:`main`).
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer
from rich.markup import escape

from eddies import __version__
from eddies.cli.broker import broker_app
from eddies.cli.check import check_app
from eddies.cli.demo import demo_app
from eddies.cli.errors import click_types, print_error, user_error
from eddies.cli.evaluate import eval_app
from eddies.cli.flink import flink_app
from eddies.cli.history import history_app
from eddies.cli.output import console, err_console
from eddies.cli.send import send_app
from eddies.cli.serve import serve_app
from eddies.cli.sessions import sessions_app
from eddies.cli.signals import signals_app
from eddies.cli.tail import tail_app
from eddies.cli.topics import topics_app
from eddies.cli.ui import ui_app
from eddies.cli.worker import worker_app

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Eddies: an event-sourced engine for AI agents on Kafka.")
# The order here is the order `eddies --help` lists the commands in.
app.add_typer(broker_app)  # broker
app.add_typer(worker_app)  # worker
app.add_typer(send_app)  # send
app.add_typer(tail_app)  # tail
app.add_typer(sessions_app)  # sessions
app.add_typer(topics_app, name="topics")
app.add_typer(flink_app, name="flink", short_help="Run the agents as a PyFlink job on keyed state.")
app.add_typer(signals_app)  # signal, approve, reject, resume: top-level commands
app.add_typer(demo_app)  # demo
app.add_typer(check_app)  # check
app.add_typer(ui_app)  # ui
app.add_typer(serve_app)  # serve
app.add_typer(history_app)  # replay, trace, fork, reprocess
app.add_typer(eval_app)  # eval


@app.callback(invoke_without_command=True)
def _root(version: Annotated[bool, typer.Option("--version", help="Show the version.")] = False) -> None:
    if version:
        console.print(f"eddies {__version__}")
        raise typer.Exit()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``eddies`` console script."""
    import os
    import sys

    # --agent my_module:my_agent names a module in the folder the command runs in, as with
    # `python -m`, uvicorn or celery: a console script's path starts at its own bin folder.
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    level = os.environ.get("EDDIES_LOG_LEVEL", "WARNING").upper()
    try:
        logging.basicConfig(level=level,
                            format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    except ValueError:
        err_console.print(f"[red]EDDIES_LOG_LEVEL: {escape(level)} is not one of DEBUG, INFO, "
                          "WARNING, ERROR, CRITICAL[/red]", highlight=False)
        return 2
    debug = level == "DEBUG"
    # librdkafka logs every failed connection attempt at ERROR (dozens a second while a
    # broker is down); the commands say in one message what failed, so its log is shown
    # only when debugging.
    logging.getLogger("eddies.kafka.client").setLevel(logging.NOTSET if debug else logging.CRITICAL)
    # httpx logs every request (each model, MCP and A2A call) at INFO, with its URL, and
    # litellm each completion (twice: its own handler, then the root's); at INFO that drowns
    # the worker's own lines, which say what was called, and a worker holding thousands of
    # calls spent a quarter of its CPU writing them. Only DEBUG shows them.
    for noisy in ("httpx", "httpcore", "LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logging.getLogger(noisy).setLevel(logging.NOTSET if debug else logging.WARNING)
    usage_errors = click_types("ClickException")
    aborts: tuple[type[BaseException], ...] = (typer.Abort, *click_types("Abort"))
    try:
        code = app(args=argv, standalone_mode=False)
        return int(code or 0) if isinstance(code, int) else 0
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except SystemExit as exc:
        if isinstance(exc.code, str):  # sys.exit("message")
            err_console.print(escape(exc.code), highlight=False)
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except Exception as err:
        if isinstance(err, usage_errors):  # bad arguments, or none (the help)
            err.show()  # type: ignore[attr-defined]
            return int(err.exit_code)  # type: ignore[attr-defined]
        if isinstance(err, aborts):
            err_console.print("Aborted!")
            return 1
        message = user_error(err)
        if debug:
            import traceback

            traceback.print_exception(err)
        if message is not None:
            print_error(message, err)
            return 2
        print_error(f"internal error: {type(err).__name__}: {err}", err)
        if not debug:
            err_console.print("run with EDDIES_LOG_LEVEL=DEBUG for the traceback", highlight=False)
        return 1
