"""Which shell commands a model may run: a command line is parsed by a real bash parser
(tree-sitter's bash grammar), and every command in it (in pipelines, lists, loops,
substitutions, functions alike) must be one the skills allow; a line the parser cannot
read is refused too, never guessed at. Files named outside the working directory (an
absolute path, ``~``, a ``..`` step) are refused unless allowed: a guard against a
model's mistakes, not a sandbox against a hostile one (for that, run the worker in a
container of its own).

``refusal`` says why a line may not run, or None. Example::

    refusal("grep -c Lisbon notes.txt | sort", {"grep", "sort"})   # None
    refusal("cat notes.txt; rm -rf /", {"cat"})   # "rm is not an allowed command (...)"
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from typing import Any

#: Paths that name no file of the machine's: always allowed.
_HARMLESS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_OUTSIDE = re.compile(r"(^|[\s=:])(/|~)|(^|/)\.\.(/|$)")


@functools.cache
def _parser() -> Any:
    try:
        import tree_sitter_bash
        from tree_sitter import Language, Parser
    except ImportError:
        raise ImportError("the bash tool needs a shell parser: pip install 'eddies[skills]'") from None
    return Parser(Language(tree_sitter_bash.language()))


def refusal(line: str, allowed: Collection[str], *, outside_paths: bool = False) -> str | None:
    """Why ``line`` may not run with commands ``allowed``, or None if it may."""
    if not line.strip():
        return "the command is empty"
    tree = _parser().parse(line.encode())
    if tree.root_node.has_error:
        return "the command could not be parsed as bash; write it more plainly"
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        stack.extend(reversed(node.children))
        if node.type == "command":
            why = _command(node, allowed)
        elif node.type == "file_redirect" and not outside_paths:
            why = _redirect(node)
        elif node.type in ("word", "string", "raw_string", "concatenation") and not outside_paths \
                and node.parent is not None and node.parent.type not in ("command_name", "file_redirect"):
            why = _path(_text(node))
        else:
            why = None
        if why is not None:
            return why
    return None


def _command(node: Any, allowed: Collection[str]) -> str | None:
    name = node.child_by_field_name("name")
    if name is None:  # only assignments: a=1
        return None
    if name.named_child_count != 1 or name.named_children[0].type != "word":
        return (f"the command name {_text(name)!r} is not a plain word (a name built from "
                "variables or substitutions cannot be checked)")
    word = _text(name)
    if word not in allowed:
        return (f"{word} is not an allowed command (allowed: {', '.join(sorted(allowed)) or 'none'})")
    return None


def _redirect(node: Any) -> str | None:
    target = node.child_by_field_name("destination")
    if target is None:
        return None
    text = _text(target)
    if text.isdigit() or text == "-":  # 2>&1, >&-
        return None
    return _path(text)


def _path(text: str) -> str | None:
    for part in text.split():
        if part.strip("'\"") in _HARMLESS:
            continue
        if _OUTSIDE.search(part.strip("'\"")):
            return (f"{part!r} names a file outside the working directory; use paths inside it "
                    "(the skills are in skills/)")
    return None


def _text(node: Any) -> str:
    return bytes(node.text).decode("utf-8", "replace")


__all__ = ["refusal"]
