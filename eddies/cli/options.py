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
