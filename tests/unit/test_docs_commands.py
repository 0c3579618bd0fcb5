"""Every ``eddies`` command line the README and docs/ show names a command that exists and
options it takes: a renamed option or command fails here, not in a reader's terminal."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import typer.main

from eddies.cli import app

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)
SHELL = {"", "sh", "bash", "shell", "console"}  # the fences whose lines are commands
SPAN = re.compile(r"`(eddies [^`\n]+)`")
COMMAND = re.compile(r"(?<![\w.\[/-])eddies (?=[a-z])")


def command_lines(text: str) -> list[str]:
    """What follows each ``eddies `` in the page's commands: shell blocks (a line
    continued with a backslash joined to the next) and inline code spans that start with
    one."""
    found: list[str] = []
    code = [block.replace("\\\n", " ") for lang, block in FENCE.findall(text)
            if lang.strip() in SHELL]
    prose = FENCE.sub("", text)
    for piece in [line for block in code for line in block.splitlines()] + SPAN.findall(prose):
        for start in COMMAND.finditer(piece):
            found.append(piece[start.end():])
    return found


def _options(cmd: Any) -> set[str]:
    return {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts) if opt.startswith("-")}


def problems(line: str, root: Any) -> list[str]:
    """What in ``eddies LINE`` the command line would refuse: an unknown command, or an
    option its command does not take."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:  # an unclosed quote: a span cut out of a longer line
        words = line.split()
    cmd, path = root, "eddies"
    while hasattr(cmd, "commands"):
        if not words or words[0] not in cmd.commands:
            return [f"{path} {words[0] if words else ''}: no such command"]
        path = f"{path} {words[0]}"
        cmd, words = cmd.commands[words[0]], words[1:]
    takes = _options(cmd)
    flags = [word.strip("[]").split("=")[0] for word in words]
    return [f"{path} {flag}: no such option" for flag in flags
            if flag.startswith("-") and flag not in ("-", "--") and flag not in takes]


def test_the_checker_catches_a_wrong_command_and_option() -> None:
    root = typer.main.get_command(app)
    assert problems("replay --session alice --app demo  # a comment --not-an-option", root) == []
    assert problems("flink run --agent FILE.sql", root) == []
    assert problems("replay --sesion alice", root) == ["eddies replay --sesion: no such option"]
    assert problems("replays --session alice", root) == ["eddies replays: no such command"]
    assert problems("flink go", root) == ["eddies flink go: no such command"]
    assert command_lines("run `eddies tail --topic dlq` or\n```sh\neddies send a b \\\n  --json\n```\n"
                         "not `pip install 'eddies[ui]'` nor `eddies.demo:x`") == [
        "send a b    --json", "tail --topic dlq"]


def test_every_command_line_in_the_docs_runs() -> None:
    root = typer.main.get_command(app)
    seen = 0
    wrong: list[str] = []
    for page in PAGES:
        for line in command_lines(page.read_text(encoding="utf-8")):
            seen += 1
            wrong += [f"{page.relative_to(ROOT)}: {p}" for p in problems(line, root)]
    assert seen > 50
    assert wrong == []
