"""``eddies flink run`` and ``eddies flink stop``: the session machine as a PyFlink job.

Nothing here imports PyFlink until a command runs (``eddies[flink]`` is an extra).
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from eddies.cli.options import AppOpt, ConfigOpt
from eddies.cli.output import err_console
from eddies.cli.settings import kafka_settings, notice, settings_or_exit

# "\\[": rich markup would take "[flink]" for a style and drop it.
flink_app = typer.Typer(no_args_is_help=True, help="Run the agents as a PyFlink job on keyed "
                        "state (the flink extra: pip install 'eddies\\[flink]').")

JobManagerOpt = Annotated[str, typer.Option(
    "--jobmanager", help="HOST:PORT of a Flink cluster's REST endpoint (default: a local "
    "mini-cluster in this process, REST on flink_rest_port).")]


@flink_app.command(
    "run", short_help="Run the job until Ctrl-C or SIGTERM; a next run continues it.")
def run_cmd(
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: Annotated[str | None, typer.Option("--bootstrap-servers", "-b",
                                                          help="Kafka bootstrap servers.")] = None,
    partitions: Annotated[int | None, typer.Option("--partitions", help="Partitions per topic.")] = None,
    agent: Annotated[str | None, typer.Option(help="module:attribute of the Agent, or a YAML or SQL file "
                                                      "declaring it (FILE or FILE#name).")] = None,
    parallelism: Annotated[int | None, typer.Option(help="Parallel session-machine tasks.")] = None,
    checkpoint_interval_ms: Annotated[int | None, typer.Option(
        "--checkpoint-interval-ms", help="Checkpoint every this many ms (default 10000).")] = None,
    checkpoint_dir: Annotated[str | None, typer.Option(
        help="Checkpoint directory (default .eddies/flink/APP/checkpoints).")] = None,
    state_backend: Annotated[str | None, typer.Option(
        help="hashmap (default; state on the heap) or rocksdb (state on disk).")] = None,
    exactly_once: Annotated[bool | None, typer.Option(
        "--exactly-once/--at-least-once",
        help="Sink delivery. At-least-once (default) is correct: event ids are deterministic "
        "and applying an event twice does nothing, so consumers drop repeats by id. "
        "Exactly-once uses Kafka transactions, for real Apache Kafka only: UNSAFE on the "
        "embedded broker, whose transactions do not isolate readers.")] = None,
    from_savepoint: Annotated[str | None, typer.Option(
        help="Start from this savepoint (default: the newest checkpoint, if any).")] = None,
    fresh: Annotated[bool, typer.Option(
        help="Ignore existing checkpoints (state starts empty; inputs from committed offsets).")] = False,
    jobmanager: JobManagerOpt = "",
    executor: Annotated[bool | None, typer.Option(
        "--executor/--no-executor",
        help="Also run an executor (eddies worker --role executor) in this process; default: "
        "only on the embedded broker.")] = None,
) -> None:
    """Run the job until Ctrl-C or SIGTERM (it is then cancelled; its checkpoints stay,
    and the next run continues from the newest). Durable calls are performed by executors:
    ``eddies worker --role executor`` with the same --app."""
    from eddies.connectors.flink.options import FlinkOptions
    from eddies.connectors.flink.runner import install_signal_handlers, preflight, run

    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers,
                                partitions=partitions, agent=agent, flink_parallelism=parallelism,
                                flink_checkpoint_interval_ms=checkpoint_interval_ms,
                                flink_checkpoint_dir=checkpoint_dir, flink_state_backend=state_backend,
                                exactly_once=exactly_once)
    import dataclasses

    from eddies.connectors.declarative import SUFFIXES
    from eddies.connectors.runtime.settings import load_agent

    path, _, name = settings.agent.partition("#")
    if path.endswith(SUFFIXES):  # the tasks' Python workers may run in another directory
        settings = dataclasses.replace(settings, agent=f"{Path(path).resolve()}{'#' + name if name else ''}")
    load_agent(settings.agent)  # a wrong agent fails here, not in a task
    with kafka_settings(settings, check=False) as s:
        jars, embedded = preflight(s, jobmanager=jobmanager, waiting=functools.partial(notice, s))
        if s.exactly_once and embedded:
            err_console.print("[yellow]--exactly-once on the embedded broker: its transactions "
                              "do not isolate readers (see the help)[/yellow]")
        options = FlinkOptions.for_run(s, savepoint=from_savepoint, fresh=fresh,
                                       jobmanager=jobmanager, embedded=embedded)
        stop = threading.Event()
        install_signal_handlers(stop)
        worker: Any = None
        if executor if executor is not None else embedded:
            from dataclasses import replace

            from eddies.connectors.kafka.worker import Worker

            worker = Worker(replace(s, role="executor")).start()
            err_console.print(f"executor running in this process (app {s.app})")
        else:
            err_console.print(f"durable calls wait for executors: eddies worker --role executor "
                              f"--app {s.app} -b {s.bootstrap_servers}")
        try:
            code = run(s, options, jars=jars, stop=stop,
                       say=lambda line: err_console.print(line, highlight=False, markup=False))
        finally:
            if worker is not None:
                worker.stop()
        raise typer.Exit(code)


@flink_app.command(
    "stop", short_help="Stop the app's running job with a savepoint.")
def stop_cmd(
    savepoint: Annotated[str, typer.Option("--savepoint", help="Directory for the savepoint.")],
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    jobmanager: JobManagerOpt = "",
) -> None:
    """Stop the app's running job with a savepoint (resume: flink run --from-savepoint)."""
    from eddies.connectors.flink.runner import stop

    settings = settings_or_exit(config, app=app_id)
    stop(settings, savepoint, jobmanager=jobmanager,
         say=lambda line: err_console.print(line, highlight=False, markup=False))
