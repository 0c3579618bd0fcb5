"""``eddies broker``: the embedded broker (Tansu, in memory), run until Ctrl-C."""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer

from eddies.cli.output import console

broker_app = typer.Typer()


@broker_app.command()
def broker(port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: any free one).")] = 0) -> None:
    """Run the embedded broker (Tansu, in memory) until Ctrl-C."""
    from eddies.connectors.kafka.broker import EmbeddedBroker

    with EmbeddedBroker(port or None) as b:
        console.print(f"embedded broker at [bold]{b.bootstrap}[/bold] (in memory)\n"
                      f"  export EDDIES_BOOTSTRAP_SERVERS={b.bootstrap}")
        _wait_for_signal()


def _wait_for_signal() -> None:
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(0.2):
        pass
