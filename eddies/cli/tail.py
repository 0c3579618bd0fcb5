"""``eddies tail``: the app's outputs (or events, or dead letters) decoded and printed, an
approval request with the commands that answer it."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer

from eddies.cli.options import AppOpt, BootstrapOpt, ConfigOpt
from eddies.cli.output import approval_line, console, err_console
from eddies.cli.settings import kafka_settings, settings_or_exit

tail_app = typer.Typer()


@tail_app.command(short_help="Print outputs, events, stream records or dead letters.")
def tail(
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    from_beginning: Annotated[bool, typer.Option(help="Print what is there, too.")] = False,
    follow: Annotated[bool, typer.Option(help="Keep following new records.")] = True,
    idle: Annotated[float, typer.Option(help="With --follow: stop after this many idle seconds.")] = 3600.0,
    topic: Annotated[str, typer.Option(help="output, events, stream or dlq.")] = "output",
    session: Annotated[list[str] | None, typer.Option(
        "--session", help="Only this session's records (repeatable).")] = None,
) -> None:
    """Decode and print outputs (or events, stream records, or dead letters).

    A session's records are on one partition (its key's murmur2 hash, as Kafka's Java
    client places them), so ``--session`` reads that partition alone (every partition of
    the dead letters, where a misrouted record's stays where it came) and keeps its records:
    ``eddies tail --topic events --session alice`` follows one session as it runs.
    """
    from eddies.connectors.inspect.summary import describe
    from eddies.connectors.runtime.client import read_records
    from eddies.connectors.runtime.preflight import require_topics
    from eddies.connectors.runtime.records import DLQ_REASON_HEADER, header
    from eddies.connectors.runtime.topics import TopicNames
    from eddies.connectors.streaming.following import line
    from eddies.events import DecodeError, decode, partition_for
    from eddies.events.stream import decode_stream

    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers)
    names = TopicNames(settings.app)
    name = {"output": names.output, "events": names.events, "dlq": names.dlq,
            "stream": names.stream}.get(topic)
    if name is None:
        err_console.print(f"[red]--topic {topic!r}: use output, events, stream or dlq[/red]")
        raise typer.Exit(2)
    with kafka_settings(settings, need=(name,)) as s:
        # Without --from-beginning, records written before this command started are skipped
        # (by timestamp: the embedded broker's end offsets cannot be trusted).
        since_ms = int(time.time() * 1000) - 1000
        keys = {sid.encode() for sid in session or ()}
        partitions = None
        if keys and topic != "dlq":  # a dead letter stays on its record's partition, maybe another
            count = require_topics(s, [name])[name]
            partitions = sorted({partition_for(key, count) for key in keys})
        for msg in read_records(s, name, follow=follow, timeout=idle, partitions=partitions):
            if not from_beginning and msg.timestamp()[1] < since_ms:
                continue
            if keys and msg.key() not in keys:
                continue
            if topic == "dlq":
                reason = (header(msg.headers(), DLQ_REASON_HEADER) or b"").decode()
                console.print(f"{msg.partition()}/{msg.offset()}: {reason}")
                continue
            if topic == "stream":
                try:
                    console.print(line(decode_stream(msg.value())), highlight=False, markup=False)
                except DecodeError as err:
                    console.print(f"undecodable record at {msg.partition()}/{msg.offset()}: {err}")
                continue
            try:
                ev = decode(msg.value())
            except DecodeError as err:
                console.print(f"undecodable record at {msg.partition()}/{msg.offset()}: {err}")
                continue
            console.print(f"{ev.session_id}:{describe(ev)}" if topic == "events" else
                          _output_line(ev, settings.app), highlight=False, markup=False)


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
    return approval_line(ev, app)
