"""Where the ``eddies`` commands print: the consoles, the log, and the trace tree as
``eddies trace`` and ``eddies demo`` show it."""

from __future__ import annotations

import logging
from typing import Any

from rich.console import Console

# Lines are never cut either: piped output (80 columns) stays one record per line for
# grep and scripts, a URL stays whole; tables still fit the width.
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)  # error lines are never cut
# One name for every command, whatever module logs: log collectors select on it.
log = logging.getLogger("eddies.cli")


def print_tree(console: Any, roots: list[Any]) -> None:
    """The tree, one line per step (as ``eddies trace`` and the demo print it)."""
    from eddies.connectors.inspect.tree import render

    for line in render(roots):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
