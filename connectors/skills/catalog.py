"""Skills: folders holding a ``SKILL.md`` (the Agent Skills layout), read when an agent is
built. A ``SKILL.md`` opens with YAML front matter naming the skill and saying when to use
it; its body holds the instructions, and the folder anything they refer to (scripts,
references, templates)::

    ---
    name: trip-budget
    description: Work out a trip's budget from nightly prices. Use when asked what a stay costs.
    ---
    Multiply the nightly price by the nights; scripts/budget.py does it for a list.

A folder given may be one skill or hold several (each in a folder of its own); a package's
data is named ``package:NAME/FOLDER``. The name is 1-64 lowercase letters, digits and
hyphens, the folder's own name; the description 1-1024 characters. Anything else is a
SkillError naming the file. Example::

    skills = find_skills(["./skills", "package:eddies/skills"])
    skills["trip-budget"].description
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The file that makes a folder a skill.
SKILL_FILE = "SKILL.md"
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_NAME = 64
MAX_DESCRIPTION = 1024


class SkillError(ValueError):
    """A skill folder that cannot be used, and why."""


@dataclass(frozen=True)
class Skill:
    """One skill: its name, when to use it, its instructions and its folder."""

    name: str
    description: str
    instructions: str
    folder: Path
    #: The front matter's other keys (license, metadata, ...), as written.
    extra: Mapping[str, Any]

    def files(self) -> list[str]:
        """The skill's files other than SKILL.md, as paths relative to its folder."""
        found = []
        for root, dirs, names in os.walk(self.folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                rel = Path(root, name).relative_to(self.folder).as_posix()
                if rel != SKILL_FILE and not name.startswith("."):
                    found.append(rel)
        return found


def find_skills(places: Iterable[str | os.PathLike[str]]) -> dict[str, Skill]:
    """The skills in ``places`` (folders, or ``package:NAME/FOLDER``), by name; two of one
    name are a SkillError."""
    found: dict[str, Skill] = {}
    for place in places:
        folder = _folder(place)
        candidates = ([folder] if (folder / SKILL_FILE).is_file()
                      else sorted(p for p in folder.iterdir() if (p / SKILL_FILE).is_file()))
        if not candidates:
            raise SkillError(f"{place}: no {SKILL_FILE} in it or in a folder of it")
        for path in candidates:
            skill = read_skill(path)
            if skill.name in found:
                raise SkillError(f"{path / SKILL_FILE}: skill {skill.name!r} is also in "
                                 f"{found[skill.name].folder}")
            found[skill.name] = skill
    return found


def read_skill(folder: Path) -> Skill:
    """The skill in ``folder`` (its SKILL.md read and checked)."""
    import yaml

    path = folder / SKILL_FILE
    text = path.read_text(encoding="utf-8")
    match = re.match(r"^---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", text, flags=re.S)
    if match is None:
        raise SkillError(f"{path}: it must open with front matter between '---' lines "
                         "(name and description)")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as err:
        raise SkillError(f"{path}: its front matter is not YAML: {err}") from None
    if not isinstance(meta, dict):
        raise SkillError(f"{path}: its front matter must be a mapping (name, description)")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > MAX_NAME:
        raise SkillError(f"{path}: name must be 1-{MAX_NAME} lowercase letters, digits and "
                         f"hyphens, got {name!r}")
    if name != folder.resolve().name:
        raise SkillError(f"{path}: name {name!r} must be its folder's name ({folder.resolve().name!r})")
    if not isinstance(description, str) or not description.strip() or len(description) > MAX_DESCRIPTION:
        raise SkillError(f"{path}: description must be 1-{MAX_DESCRIPTION} characters saying what "
                         "the skill does and when to use it")
    extra = {k: v for k, v in meta.items() if k not in ("name", "description")}
    return Skill(name, " ".join(description.split()), text[match.end():].strip(), folder.resolve(),
                 extra)


def _folder(place: str | os.PathLike[str]) -> Path:
    text = os.fspath(place)
    if text.startswith("package:"):
        import importlib.resources

        package, _, sub = text[len("package:"):].partition("/")
        try:
            root = Path(str(importlib.resources.files(package)))
        except ModuleNotFoundError:
            raise SkillError(f"{text}: no package {package!r}") from None
        folder = root / sub
    else:
        folder = Path(text)
    if not folder.is_dir():
        raise SkillError(f"{text}: not a folder")
    return folder


__all__ = ["SKILL_FILE", "Skill", "SkillError", "find_skills", "read_skill"]
