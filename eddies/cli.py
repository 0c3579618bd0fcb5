"""The ``eddies`` command: demo, broker, worker, send, tail, replay, trace, fork, reprocess,
ui, topics, signal, approve, reject, resume, check, flink.

Every command that needs Kafka uses ``bootstrap_servers`` from the config file,
``EDDIES_BOOTSTRAP_SERVERS`` or ``--bootstrap-servers``; with none it starts the embedded
broker, says so, and stops it on exit (send, tail, replay, trace, fork, reprocess, ui and
topics describe refuse: an embedded broker has no app to work on).

Errors a user can fix (configuration, a broker that does not answer within
``connect_timeout_ms``, missing topics) are a line or two on stderr and exit code 2; other
errors are one line and exit code 1. ``EDDIES_LOG_LEVEL=DEBUG`` adds the traceback and the
Kafka client's log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eddies import __version__
from eddies.cli_check import check_app
from eddies.cli_demo import demo_app
from eddies.cli_errors import click_types, print_error, user_error
from eddies.cli_flink import flink_app
from eddies.cli_history import history_app
from eddies.cli_options import AppOpt, BootstrapOpt, ConfigOpt, PartitionsOpt, SessionArg
from eddies.cli_signals import signals_app
from eddies.cli_topics import topics_app
from eddies.cli_ui import ui_app

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Eddies: an event-sourced engine for AI agents on Kafka.")
app.add_typer(topics_app, name="topics")
app.add_typer(flink_app, name="flink")
app.add_typer(signals_app)  # signal, approve, reject, resume: top-level commands
app.add_typer(demo_app)  # demo
app.add_typer(check_app)  # check
app.add_typer(ui_app)  # ui
app.add_typer(history_app)  # replay, trace, fork, reprocess
console = Console()
err_console = Console(stderr=True, soft_wrap=True)  # error lines are never cut



def _settings(config: Path | None, **overrides: Any) -> Any:
    from eddies.connectors.kafka.settings import ConfigError, load_settings

    try:
        return load_settings(config, overrides=overrides)
    except ConfigError as err:
        err_console.print(f"[red]configuration error:[/red] {escape(str(err))}")
        raise typer.Exit(2) from None


@contextlib.contextmanager
def _kafka(settings: Any, *, need: tuple[str, ...] = (), check: bool = True) -> Iterator[Any]:
    """Yield settings with a broker: the configured one, or an embedded one.

    The configured broker must answer within ``connect_timeout_ms`` (``check``; a Worker
    checks it itself) and have the topics in ``need`` (waiting up to that timeout for
    them: a worker started just before creates them). A Kafka error in the body gets the
    broker's address as a note, for :func:`main`'s message.
    """
    from confluent_kafka import KafkaException

    from eddies.connectors.kafka.outbox import DeliveryFailedError
    from eddies.connectors.kafka.preflight import PreflightError, await_topics, check_broker

    if need:
        _need_configured_broker(settings)
    address = settings.bootstrap_servers
    try:
        if address:
            if check or need:  # a worker started just before may still create them
                await_topics(settings, need, settings.connect_timeout_ms / 1000, check_broker(settings))
            yield settings
            return
        from eddies.connectors.kafka.broker import EmbeddedBroker

        with EmbeddedBroker() as broker:
            notice = (f"no bootstrap servers configured: started the embedded broker at "
                      f"{broker.bootstrap} (in memory, stopped on exit)")
            if getattr(settings, "log_format", "text") == "json":  # every line JSON there
                logging.getLogger("eddies.cli").warning(notice)
            else:
                err_console.print(f"[yellow]{notice}[/yellow]", highlight=False)
            settings.bootstrap_servers = address = broker.bootstrap
            yield settings
    except (KafkaException, TimeoutError, DeliveryFailedError, LookupError) as err:
        if not isinstance(err, PreflightError):  # those name the address already
            err.add_note(f"(broker {address})")
        raise


def _need_configured_broker(settings: Any) -> None:
    """Exit with 2 unless a broker is configured: an embedded one starts empty, so a command
    that reads or writes an existing app would have nothing to work on."""
    if not settings.bootstrap_servers:
        _fail(f"no bootstrap servers configured: this command needs the broker that the "
              f"workers of app {settings.app} use",
              "set bootstrap_servers, EDDIES_BOOTSTRAP_SERVERS or -b (`eddies broker` runs one)")


def _fail(*lines: str) -> NoReturn:
    """Print ``lines`` as the command's error and exit with 2."""
    for i, line in enumerate(lines):
        err_console.print(f"[red]{escape(line)}[/red]" if i == 0 else escape(line), highlight=False)
    raise typer.Exit(2)


def _wait_for_signal() -> None:
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(0.2):
        pass


@app.callback(invoke_without_command=True)
def _root(version: Annotated[bool, typer.Option("--version", help="Show the version.")] = False) -> None:
    if version:
        console.print(f"eddies {__version__}")
        raise typer.Exit()


@app.command()
def broker(port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: any free one).")] = 0) -> None:
    """Run the embedded broker (Tansu, in memory) until Ctrl-C."""
    from eddies.connectors.kafka.broker import EmbeddedBroker

    with EmbeddedBroker(port or None) as b:
        console.print(f"embedded broker at [bold]{b.bootstrap}[/bold] (in memory)\n"
                      f"  export EDDIES_BOOTSTRAP_SERVERS={b.bootstrap}")
        _wait_for_signal()


@app.command()
def worker(
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    partitions: PartitionsOpt = None,
    agent: Annotated[str | None, typer.Option(
        help="module:attribute of the Agent, or a YAML or SQL file declaring it (FILE or "
             "FILE#name).")] = None,
    yaml_file: Annotated[Path | None, typer.Option(
        "--yaml", help="A YAML file declaring the agent (the same as --agent FILE).")] = None,
    sql_file: Annotated[Path | None, typer.Option(
        "--sql", help="A SQL file declaring the agent (the same as --agent FILE).")] = None,
    role: Annotated[str | None, typer.Option(help="all, orchestrator or executor.")] = None,
    metrics_port: Annotated[int | None, typer.Option(
        help="Serve Prometheus metrics on this port (0: any free one; needs the metrics extra).")] = None,
    metrics_host: Annotated[str | None, typer.Option(
        help="Address to serve metrics on (default 0.0.0.0).")] = None,
    log_format: Annotated[str | None, typer.Option(
        help="text, or json: one JSON object per line.")] = None,
    otel_endpoint: Annotated[str | None, typer.Option(
        help="Export every run's spans over OTLP/HTTP to this URL (a base URL gets "
             "/v1/traces; off: none; needs the otel extra).")] = None,
) -> None:
    """Run a worker until Ctrl-C or SIGTERM."""
    from eddies.connectors.kafka.settings import ConfigError, load_agent
    from eddies.connectors.kafka.worker import Worker

    for given in (yaml_file, sql_file):
        if given is not None:
            agent = str(given)
    settings = _settings(config, app=app_id, bootstrap_servers=bootstrap_servers,
                         partitions=partitions, agent=agent, role=role, metrics_port=metrics_port,
                         metrics_host=metrics_host, log_format=log_format,
                         otel_endpoint=otel_endpoint)
    json_logs = settings.log_format == "json"
    if json_logs:  # for a log collector: every line JSON, its own lines included
        import os

        from eddies.connectors.json_logs import use_json_logs

        use_json_logs()
        if "EDDIES_LOG_LEVEL" not in os.environ:  # the worker's own INFO lines, not libraries'
            logging.getLogger("eddies").setLevel(logging.INFO)
    say = logging.getLogger("eddies.cli").info if json_logs else err_console.print
    try:
        agent_obj = load_agent(settings.agent)
    except ConfigError as err:
        err_console.print(f"[red]configuration error:[/red] {escape(str(err))}")
        raise typer.Exit(2) from None
    # From here on SIGTERM stops the worker cleanly (and the embedded broker with it), also
    # while it is still starting: a supervisor may signal as soon as it sees the start line.
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    with _kafka(settings, check=False) as s:  # Worker.start checks the broker
        w = Worker(s, agent_obj).start()
        # Started: from now on a broker that goes away is worth the client's error lines.
        client_log = logging.getLogger("eddies.kafka.client")
        if client_log.level > logging.ERROR:
            client_log.setLevel(logging.ERROR)
        from eddies.connectors.process_tuning import tune_gc

        tune_gc()  # this process only runs the worker
        served = "" if w.metrics_address is None else (
            ", metrics at http://{}:{}/metrics".format(*w.metrics_address))
        say(f"worker for app {s.app}, agent {w.plan.agent_name!r}, role {s.role}, broker "
            f"{s.bootstrap_servers}{served}")
        if err_console.is_terminal and not json_logs:
            from rich.live import Live

            with Live(_status(w), console=err_console, refresh_per_second=2) as live:
                while not done.wait(0.5) and not w.stopped:
                    live.update(_status(w))
        else:
            while not done.wait(1.0) and not w.stopped:
                pass
        w.stop()
        counts = w.counters.snapshot()
        say("worker stopped: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        if w.errors:
            if json_logs:
                logging.getLogger("eddies.cli").error("worker failed: %r", w.errors[0])
            else:
                err_console.print(f"[red]worker failed:[/red] {w.errors[0]!r}")
            raise typer.Exit(1)


def _status(w: Any) -> Table:
    """A table of the worker's counters, for the live view."""
    table = Table("counter", "value", title=f"eddies worker: {w.settings.app}", title_justify="left")
    counts = w.counters.snapshot()
    orch = w.orchestrator
    if orch is not None:
        table.add_row("partitions", ",".join(map(str, sorted(orch.partitions))) or "-")
        table.add_row("sessions in memory", str(len(orch.states)))
    for name in ("inputs", "outputs", "outputs_failed", "requests", "calls_performed", "results",
                 "snapshots", "dlq", "sessions_restored", "requests_reissued"):
        table.add_row(name, str(counts.get(name, 0)))
    for name in ("input_gaps", "consumer_errors", "results_unknown", "input_pauses",  # once they happen
                 "calls_awaited", "results_awaited", "claims_lost", "calls_dropped", "forwarded",
                 "orphan_results", "sessions_failed", "snapshots_unreadable"):
        if counts.get(name):
            table.add_row(name, str(counts[name]))
    return table


@app.command()
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
    from eddies.connectors.kafka.client import send_input
    from eddies.connectors.kafka.topics import TopicNames

    payload: Any = value
    if as_json:
        try:
            payload = json.loads(value)
        except ValueError as err:
            err_console.print(f"[red]VALUE is not JSON:[/red] {err}")
            raise typer.Exit(2) from None
    settings = _settings(config, app=app_id, bootstrap_servers=bootstrap_servers)
    # Checked first: a producer would wait for a missing topic, or a broker may create it
    # with its default partition count, which no worker of the app could read.
    with _kafka(settings, need=(TopicNames(settings.app).input,)) as s:
        send_input(s, session, payload, event_id)
        from eddies.connectors.kafka.preflight import require_topics
        from eddies.events import partition_for

        # Other producers must pick the same partition (murmur2 of the key, as Kafka's Java
        # client does); a worker forwards records that arrive elsewhere, at a cost.
        topic = TopicNames(s.app).input
        count = require_topics(s, [topic])[topic]
        console.print(f"sent to {session} (partition {partition_for(session, count)} of {topic}: "
                      "murmur2 of the session id, as Kafka's Java client does)")


@app.command()
def tail(
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    from_beginning: Annotated[bool, typer.Option(help="Print what is there, too.")] = False,
    follow: Annotated[bool, typer.Option(help="Keep following new records.")] = True,
    idle: Annotated[float, typer.Option(help="With --follow: stop after this many idle seconds.")] = 3600.0,
    topic: Annotated[str, typer.Option(help="output, events or dlq.")] = "output",
) -> None:
    """Decode and print outputs (or events, or dead letters)."""
    from eddies.connectors.inspect.summary import describe
    from eddies.connectors.kafka.client import read_records
    from eddies.connectors.kafka.topics import TopicNames
    from eddies.connectors.records import DLQ_REASON_HEADER, header
    from eddies.events import DecodeError, decode

    settings = _settings(config, app=app_id, bootstrap_servers=bootstrap_servers)
    names = TopicNames(settings.app)
    name = {"output": names.output, "events": names.events, "dlq": names.dlq}.get(topic)
    if name is None:
        err_console.print(f"[red]--topic {topic!r}: use output, events or dlq[/red]")
        raise typer.Exit(2)
    with _kafka(settings, need=(name,)) as s:
        # Without --from-beginning, records written before this command started are skipped
        # (by timestamp: the embedded broker's end offsets cannot be trusted).
        since_ms = int(time.time() * 1000) - 1000
        for msg in read_records(s, name, follow=follow, timeout=idle):
            if not from_beginning and msg.timestamp()[1] < since_ms:
                continue
            if topic == "dlq":
                reason = (header(msg.headers(), DLQ_REASON_HEADER) or b"").decode()
                console.print(f"{msg.partition()}/{msg.offset()}: {reason}")
                continue
            try:
                ev = decode(msg.value())
            except DecodeError as err:
                console.print(f"undecodable record at {msg.partition()}/{msg.offset()}: {err}")
                continue
            console.print(f"{ev.session_id}:{describe(ev)}" if topic == "events" else
                          _output_line(ev, settings.app), highlight=False, markup=False, soft_wrap=True)


def _output_line(ev: Any, app: str) -> str:
    """How ``eddies tail`` shows a record of ``app``.output: an answer, or an approval
    request with the commands that answer it."""
    from eddies.events import ApprovalRequestEvent

    p = ev.payload
    if not isinstance(p, ApprovalRequestEvent):
        error = getattr(p, "error", None)
        shown = json.dumps(getattr(p, "output", None)) if error is None else \
            f"ERROR {error.type}: {error.message}"
        return f"{ev.session_id} run {ev.run}: {shown}"
    deadline = "" if p.deadline is None else time.strftime(
        " by %Y-%m-%d %H:%M:%S UTC", time.gmtime(p.deadline / 1000))
    who = f"{shlex.quote(ev.session_id)} {shlex.quote(p.signal)} --app {shlex.quote(app)}"
    return (f"{ev.session_id} run {ev.run}: APPROVAL NEEDED{deadline}: {p.tool}"
            f"({json.dumps(p.arguments)}); answer with: eddies approve {who}  |  "
            f"eddies reject {who} --reason TEXT")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``eddies`` console script."""
    import os

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
    # httpx logs every request (each model, MCP and A2A call) at INFO, with its URL: at
    # INFO that drowns the worker's own lines, which say what was called, so only DEBUG shows it.
    for noisy in ("httpx", "httpcore"):
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


if __name__ == "__main__":
    sys.exit(main())
