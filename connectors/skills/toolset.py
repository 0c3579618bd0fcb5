"""A SKILLS resource: skill folders offered to a model, disclosed a step at a time.

A model that names the resource in its setup's ``tools`` gets ``load_skill``, whose
description lists every skill's name and when to use it (all the model reads of a skill
it does not use); calling it returns the skill's instructions and the names of its files,
and ``load_skill(name, path)`` one of those files. With ``allowed_commands``, it also gets
``bash``: a command line run by ``bash`` in a new temporary working directory that holds
the skills under ``skills/NAME``, with a time limit, its commands checked first by a real
shell parser (:mod:`eddies.connectors.skills.commands`); a refused line is an error whose
reason the model reads, and it may try another. Both are durable TOOL calls: a replay
returns what they returned, and ``bash`` (not idempotent) is not run twice by a crash.
Example::

    skills = Skills(["./skills"], allowed_commands=["python3", "cat", "grep"], timeout_s=20)
    agent.add_resource("skills", ResourceType.SKILLS, skills)
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["skills"]))
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from eddies.connectors.skills.catalog import Skill, find_skills
from eddies.connectors.skills.commands import refusal
from eddies.engine.resources import FunctionTool

#: What a tool result may hold of a file or of a command's output, in characters.
MAX_OUTPUT_CHARS = 20_000


class CommandRefusedError(ValueError):
    """A command line the bash tool will not run, and why (the model reads it)."""


class Skills:
    """Skill folders (``places``: folders, or ``package:NAME/FOLDER``) as the
    ``load_skill`` tool and, with ``allowed_commands``, the ``bash`` tool; read when made,
    so a broken SKILL.md fails the agent's start, naming the file."""

    def __init__(self, places: Iterable[str | os.PathLike[str]], *,
                 allowed_commands: Iterable[str] = (), timeout_s: float = 30.0,
                 outside_paths: bool = False, max_output_chars: int = MAX_OUTPUT_CHARS) -> None:
        self.places = [os.fspath(p) for p in places]
        self.skills: dict[str, Skill] = find_skills(self.places)
        self.allowed_commands = frozenset(allowed_commands)
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        self.timeout_s = timeout_s
        self.outside_paths = outside_paths
        self.max_output_chars = max_output_chars
        if self.allowed_commands:
            refusal("true", {"true"})  # the parser is there, or the start fails saying so

    def tools(self) -> list[FunctionTool]:
        """The tools a model that names this resource gets."""
        catalogue = "\n".join(f"- {s.name}: {s.description}" for s in self.skills.values())
        out = [FunctionTool(self.load_skill, name="load_skill", idempotent=True, description=(
            "Load a skill: its instructions and the names of its files; with path, one of its "
            "files. Load a skill before doing what it covers. The skills:\n" + catalogue))]
        if self.allowed_commands:
            out.append(FunctionTool(self.bash, name="bash", description=(
                "Run a bash command line in a new, empty working directory that holds the "
                "skills' files under skills/NAME/. Allowed commands: "
                f"{', '.join(sorted(self.allowed_commands))}. It has {self.timeout_s:g} s; "
                "files it writes are gone after it ends (chain steps with && in one line).")))
        return out

    def load_skill(self, name: str, path: str | None = None) -> str:
        """The instructions of skill ``name`` and its files' names, or its file ``path``.

        :param name: the skill's name, as listed
        :param path: one of the skill's files, relative to its folder
        """
        skill = self.skills.get(name)
        if skill is None:
            raise KeyError(f"no skill {name!r} (the skills: {', '.join(self.skills) or 'none'})")
        if path is None:
            files = skill.files()
            listed = ("\n\nIts files (load_skill with path, or under skills/"
                      f"{name}/ for bash):\n" + "\n".join(f"- {f}" for f in files)) if files else ""
            return f"# {name}\n\n{skill.instructions}{listed}"
        target = (skill.folder / path).resolve()
        if not target.is_relative_to(skill.folder) or not target.is_file():
            raise FileNotFoundError(f"skill {name!r} has no file {path!r} (its files: "
                                    f"{', '.join(skill.files()) or 'none'})")
        try:
            return _cut(target.read_text(encoding="utf-8"), self.max_output_chars)
        except UnicodeDecodeError:
            raise ValueError(f"{path} is not text ({target.stat().st_size} bytes)") from None

    def bash(self, command: str) -> dict[str, Any]:
        """Run ``command`` (a bash command line); its exit code and output.

        :param command: the command line, run by bash in a working directory of its own
        """
        why = refusal(command, self.allowed_commands, outside_paths=self.outside_paths)
        if why is not None:
            raise CommandRefusedError(f"refused: {why}")
        with tempfile.TemporaryDirectory(prefix="eddies-bash-") as work:
            links = Path(work, "skills")
            links.mkdir()
            for skill in self.skills.values():
                (links / skill.name).symlink_to(skill.folder, target_is_directory=True)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": work,
                   "LANG": "C.UTF-8", "TMPDIR": work}
            # A session of its own: on the time limit, the whole group goes, children too.
            proc = subprocess.Popen([shutil.which("bash") or "/bin/bash", "--noprofile", "--norc",
                                     "-c", command], cwd=work, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
            try:
                out, err = proc.communicate(timeout=self.timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
                timed_out = True
        result: dict[str, Any] = {
            "exit_code": proc.returncode,
            "stdout": _cut(out.decode("utf-8", "replace"), self.max_output_chars),
            "stderr": _cut(err.decode("utf-8", "replace"), self.max_output_chars)}
        if timed_out:
            result["timed_out"] = f"killed after {self.timeout_s:g} s"
        return result


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


__all__ = ["CommandRefusedError", "Skills"]
