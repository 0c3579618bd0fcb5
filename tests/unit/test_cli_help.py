"""`eddies --help` (and each group's) lists every command on one line: a short help of one
sentence, not the first paragraph of its docstring wrapped into the table."""

from __future__ import annotations

from typing import Any

import typer.main

from eddies.cli import app

#: What fits on one line of the table in an 80-column terminal (its borders and the longest
#: name, `reprocess`, take the rest).
MOST_CHARS = 63


def _listed(group: Any, path: str = "eddies") -> dict[str, str]:
    """{command path: the text its group's listing shows for it}."""
    shown: dict[str, str] = {}
    for name, cmd in group.commands.items():
        where = f"{path} {name}"
        # What click and typer list: the short help, else the help's first paragraph.
        text = cmd.short_help or (cmd.help or "").split("\n\n")[0]
        shown[where] = text
        if hasattr(cmd, "commands"):  # a group (typer carries its own click)
            shown.update(_listed(cmd, where))
    return shown


def test_every_command_is_listed_on_one_line() -> None:
    listed = _listed(typer.main.get_command(app))
    assert {"eddies demo", "eddies flink run", "eddies eval", "eddies topics describe"} <= set(listed)
    long = {cmd: text for cmd, text in listed.items()
            if "\n" in text.strip() or len(text.strip()) > MOST_CHARS}
    assert long == {}, "commands listed on more than one line: give them a short_help"
    assert all(text.strip() for text in listed.values()), "a command listed without help"
