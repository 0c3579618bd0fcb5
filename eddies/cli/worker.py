"""``eddies worker``: a worker of the app's agent, run until Ctrl-C or SIGTERM (a second
one stops it at once), its counters shown live on a terminal."""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from eddies.cli.options import AppOpt, BootstrapOpt, ConfigOpt, PartitionsOpt
from eddies.cli.output import err_console, log
from eddies.cli.settings import kafka_settings, notice, settings_or_exit

worker_app = typer.Typer()


@worker_app.command(short_help="Run a worker until Ctrl-C or SIGTERM.")
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
    """Run a worker until Ctrl-C or SIGTERM: it finishes the calls in flight, saying so; a
    second Ctrl-C stops it at once (the journal then decides those calls, as after a kill)."""
    from eddies.connectors.runtime.settings import ConfigError, load_agent

    for given in (yaml_file, sql_file):
        if given is not None:
            agent = str(given)
    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers,
                                partitions=partitions, agent=agent, role=role,
                                metrics_port=metrics_port, metrics_host=metrics_host,
                                log_format=log_format, otel_endpoint=otel_endpoint)
    json_logs = settings.log_format == "json"
    if json_logs:  # for a log collector: every line JSON, its own lines included
        from eddies.connectors.runtime.json_logs import use_json_logs

        use_json_logs()
        if "EDDIES_LOG_LEVEL" not in os.environ:  # the worker's own INFO lines, not libraries'
            logging.getLogger("eddies").setLevel(logging.INFO)
    say = log.info if json_logs else err_console.print
    try:
        agent_obj = load_agent(settings.agent)
    except ConfigError as err:
        err_console.print(f"[red]configuration error:[/red] {escape(str(err))}")
        raise typer.Exit(2) from None
    # From here on SIGTERM stops the worker cleanly (and the embedded broker with it), also
    # while it is still starting: a supervisor may signal as soon as it sees the start line.
    stopping = _Stopping(say)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stopping)
    embedded = not settings.bootstrap_servers
    try:
        _run(settings, agent_obj, stopping, say, json_logs)
    except _StopNow as now:
        w = stopping.worker
        running = 0 if w is None else w.calls_running
        if embedded:  # its sessions went with the broker: nothing to resume
            say("stopped at once, and the embedded broker with it")
        else:
            say("stopped at once, as by a kill: " + (
                f"the journal decides the {_calls(running)} in flight when the next worker "
                f"resumes {'its session' if running == 1 else 'their sessions'} (redone, or "
                "found completed)" if running else "the next worker resumes the sessions "
                "from the journal"))
        # Not an orderly exit: the interpreter's would wait for the threads of calls still
        # running (a thread pool's are joined at exit) and flush the clients' buffers.
        # The embedded broker, if any, was stopped as the exception left its block.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(now.code)


def _run(settings: Any, agent_obj: Any, stopping: _Stopping, say: Callable[..., Any],
         json_logs: bool) -> None:
    """The worker, from its start to its stop (see :class:`_Stopping`)."""
    from eddies.connectors.kafka.worker import Worker

    done = stopping.requested
    with kafka_settings(settings, check=False) as s:  # Worker.start checks the broker
        w = stopping.worker = Worker(s, agent_obj)
        w.start(waiting=functools.partial(notice, s))
        # Started: from now on a broker that goes away is worth the client's error lines.
        client_log = logging.getLogger("eddies.kafka.client")
        if client_log.level > logging.ERROR:
            client_log.setLevel(logging.ERROR)
        from eddies.connectors.runtime.process_tuning import tune_gc, tune_thread_switches

        tune_gc()  # this process only runs the worker
        tune_thread_switches()
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
        stopping.armed = False  # stopped cleanly: what is left (the broker's stop) is short
        counts = w.counters.snapshot()
        say("worker stopped: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        if w.errors:
            if json_logs:
                log.error("worker failed: %r", w.errors[0])
            else:
                err_console.print(f"[red]worker failed:[/red] {w.errors[0]!r}")
            raise typer.Exit(1)


class _StopNow(BaseException):
    """A second stop signal, raised in the main thread: the worker stops at once. Not an
    Exception, so that no ``except Exception`` on the way swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.code = 128 + signum  # the shell's code for death by that signal: 130 for SIGINT


class _Stopping:
    """The worker's stop signals (Ctrl-C, SIGTERM), as the signal handler. The first stops
    it cleanly: calls running finish and journal their outcomes, sessions are saved, the
    group is left; that can take as long as the slowest call, so it says what it waits
    for. A second one meanwhile stops it at once (:class:`_StopNow`): what is in flight is
    then decided by the journal, as after a kill."""

    def __init__(self, say: Callable[..., Any]) -> None:
        self.say = say
        self.requested = threading.Event()
        self.worker: Any = None  # the Worker, once made
        self.armed = True  # whether a second signal stops at once

    def __call__(self, signum: int, frame: Any) -> None:
        if self.requested.is_set():
            if self.armed:
                self.armed = False  # a third signal must not interrupt the stop at once
                raise _StopNow(signum)
            return
        self.requested.set()
        again = ("Ctrl-C again to stop now" if signum == signal.SIGINT
                 else "a second SIGTERM stops it at once")
        w = self.worker
        if w is None or (w.orchestrator is None and w.executor is None):
            self.say(f"stopping once the worker has started ({again})")
            return
        running = w.calls_running
        what = (f"finishing {_calls(running)} in flight" if running
                else "saving the sessions and leaving the group" if w.orchestrator is not None
                else "leaving the group")
        self.say(f"stopping: {what} ({again})")


def _calls(n: int) -> str:
    return f"{n} call{'' if n == 1 else 's'}"


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
