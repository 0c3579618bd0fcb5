"""``eddies send --follow``: a session's answer printed as the model writes it, what the
agent is doing on a line below it, until the run's output (the truth) arrives."""

from __future__ import annotations

import json
from typing import Any

from eddies.cli.output import approval_line, console


def follow(feed: Any, app: str, idle_s: float, input_id: str = "") -> bool:
    """Print ``feed``'s session until the output of input ``input_id``'s run arrives (with
    no id, or from a worker that does not name inputs in outputs: the first output);
    whether it did within ``idle_s`` idle seconds. An earlier input's output is printed as
    a note. On a terminal the answer grows in place
    with the status below it; elsewhere (a pipe, a log) the text is printed as it comes and
    each status on a line of its own, marked ``...``."""
    from eddies.connectors.streaming.following import StreamFollower
    from eddies.events import AgentEvent, ApprovalRequestEvent

    view = StreamFollower()
    screen = _Screen() if console.is_terminal else _Lines()
    try:
        for record in feed.records(idle_s):
            if isinstance(record, AgentEvent):
                if isinstance(record.payload, ApprovalRequestEvent):
                    screen.note(approval_line(record, app))
                    continue
                answers = getattr(record.payload, "input_id", None)
                if input_id and answers and answers != input_id:
                    screen.note(f"(an earlier input's answer) {_output(record)}")
                    continue
                screen.done(_output(record))
                return True
            change = view.add(record)
            if change is not None:
                screen.show(change.call_id, view.text(change.call_id), change.text,
                            change.restarted, change.status)
        return False
    finally:
        screen.stop()


def _output(ev: Any) -> str:
    p = ev.payload
    error = getattr(p, "error", None)
    if error is not None:
        return f"{ev.session_id} run {ev.run}: ERROR {error.type}: {error.message}"
    out = getattr(p, "output", None)
    shown = out if isinstance(out, str) else json.dumps(out)  # an answer as written, else JSON
    return f"{ev.session_id} run {ev.run}: {shown}"


class _Lines:
    """For a pipe or a log: text as it comes, statuses on lines of their own."""

    def __init__(self) -> None:
        self._mid_line = False

    def _end_line(self) -> None:
        if self._mid_line:
            console.out("")
            self._mid_line = False

    def show(self, call_id: str, whole: str, added: str, restarted: bool, status: str | None) -> None:
        if restarted:
            self.note("(the model is asked again: what it wrote above is void)")
        if added:
            console.out(added, end="", highlight=False)
            console.file.flush()
            self._mid_line = True
        if status:
            self.note(f"... {status}")

    def note(self, line: str) -> None:
        self._end_line()
        console.out(line, highlight=False)

    def done(self, line: str) -> None:
        self.note(line)

    def stop(self) -> None:
        self._end_line()


class _Screen:
    """For a terminal: the answer so far, the status under it, redrawn in place."""

    def __init__(self) -> None:
        from rich.live import Live

        self._texts: dict[str, str] = {}  # each model call's text, in the order they came
        self._status = ""
        self._live = Live("", console=console, refresh_per_second=20, transient=True)
        self._live.start()

    def _draw(self) -> None:
        from rich.console import Group
        from rich.text import Text

        answer = "\n\n".join(t for t in self._texts.values() if t)
        self._live.update(Group(Text(answer), Text(self._status, style="dim")))

    def show(self, call_id: str, whole: str, added: str, restarted: bool, status: str | None) -> None:
        self._texts[call_id] = whole
        if status is not None:
            self._status = status
        self._draw()

    def note(self, line: str) -> None:
        self._live.console.print(line, highlight=False, markup=False)

    def done(self, line: str) -> None:
        self.stop()
        console.print(line, highlight=False, markup=False)

    def stop(self) -> None:
        if self._live.is_started:
            self._live.stop()
