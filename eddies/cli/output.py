"""Where the ``eddies`` commands print: the consoles, the log, the trace tree as
``eddies trace`` and ``eddies demo`` show it, and an approval request as ``eddies tail``
and ``eddies approve`` show it."""

from __future__ import annotations

import json
import logging
import shlex
import time
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


def approval_line(ev: Any, app: str) -> str:
    """An approval request of ``app`` (an event whose payload is an ApprovalRequestEvent)
    with the commands that answer it, as ``eddies tail`` and ``eddies approve`` show it."""
    p = ev.payload
    deadline = "" if p.deadline is None else time.strftime(
        " by %Y-%m-%d %H:%M:%S UTC", time.gmtime(p.deadline / 1000))
    who = f"{shlex.quote(ev.session_id)} {shlex.quote(p.signal)} --app {shlex.quote(app)}"
    return (f"{ev.session_id} run {ev.run}: APPROVAL NEEDED{deadline}: {p.tool}"
            f"({json.dumps(p.arguments)}); answer with: eddies approve {who}  |  "
            f"eddies reject {who} --reason TEXT")
