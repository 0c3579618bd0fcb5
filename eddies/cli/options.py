"""Options every ``eddies`` command that reaches Kafka takes, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="TOML settings file.",
                                                envvar="EDDIES_CONFIG")]
AppOpt = Annotated[str | None, typer.Option("--app", help="Application id (topic prefix).")]
BootstrapOpt = Annotated[str | None, typer.Option("--bootstrap-servers", "-b",
                                                  help="Kafka bootstrap servers.")]
PartitionsOpt = Annotated[int | None, typer.Option("--partitions", help="Partitions per topic.")]
SessionArg = Annotated[str, typer.Argument(help="Session id (the record key).")]


def offsets_of(text: str) -> dict[int, int]:
    """``--from-offset PARTITION:OFFSET[,PARTITION:OFFSET...]`` as partition -> offset."""
    out: dict[int, int] = {}
    for item in text.split(","):
        part, sep, offset = item.strip().partition(":")
        if not sep or not part.isdigit() or not offset.isdigit():
            raise typer.BadParameter(f"{item!r}: use PARTITION:OFFSET", param_hint="--from-offset")
        out[int(part)] = int(offset)
    return out


def time_ms_of(text: str) -> int:
    """``--from-time``: ISO 8601 (``2026-12-01T09:00:00Z``) or ms since the epoch."""
    from datetime import datetime

    if text.isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        raise typer.BadParameter(f"{text!r}: ISO 8601 or ms since the epoch",
                                 param_hint="--from-time") from None
