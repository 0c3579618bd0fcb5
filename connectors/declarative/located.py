"""A parsed definition that remembers where each part was written, so an error can name
its line and column. Example::

    doc = parse_yaml("agents:\\n  - name: a\\n", "agents.yaml")
    doc["agents"][0].where       # "agents.yaml:2:5"
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml


class DefinitionError(ValueError):
    """A definition that cannot become an agent; the message starts with FILE:LINE:COL."""


def read_definition(path: str | Path) -> str:
    """The text of the definition file ``path``; a DefinitionError naming it if it cannot
    be read."""
    try:
        return Path(path).read_text()
    except OSError as err:
        raise DefinitionError(f"{path}: cannot read it: {err.strerror}") from None


@contextmanager
def located(at: str, prefix: str = "") -> Iterator[None]:
    """What the block's constructors refuse (ValueError, TypeError) as a DefinitionError at
    ``at``; a DefinitionError of reading the definition there names its own place already::

        with located(entry.where):
            server = McpServer(url=_text(entry, "url"))
    """
    try:
        yield
    except DefinitionError:
        raise
    except (ValueError, TypeError) as err:
        raise DefinitionError(f"{at}: {prefix}{err}") from None


class Map(dict[str, Any]):
    """A mapping of a definition, with where it and each of its keys were written."""

    where: str
    key_where: dict[str, str]  # where each key's value was written
    key_at: dict[str, str]  # where each key itself was written


class Seq(list[Any]):
    """A list of a definition, with where it and each item were written."""

    where: str
    item_where: list[str]


def parse_yaml(text: str, source: str) -> Any:
    """``text`` as Maps, Seqs and plain scalars; DefinitionError for YAML that does not parse."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        raise DefinitionError(f"{at}: not valid YAML: {getattr(err, 'problem', err)}") from None
    if node is None:
        raise DefinitionError(f"{source}: the file is empty")
    return _build(node, source, yaml.SafeLoader(""))


def _at(node: yaml.Node, source: str) -> str:
    return f"{source}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"


def _build(node: yaml.Node, source: str, loader: yaml.SafeLoader) -> Any:
    if isinstance(node, yaml.MappingNode):
        out = Map()
        out.where, out.key_where, out.key_at = _at(node, source), {}, {}
        for key_node, value_node in node.value:
            key = _build(key_node, source, loader)
            if not isinstance(key, str):
                raise DefinitionError(f"{_at(key_node, source)}: a key must be text, got {key!r}")
            if key in out:
                raise DefinitionError(f"{_at(key_node, source)}: {key!r} is given twice")
            out[key] = _build(value_node, source, loader)
            out.key_where[key] = _at(value_node, source)
            out.key_at[key] = _at(key_node, source)
        return out
    if isinstance(node, yaml.SequenceNode):
        seq = Seq(_build(n, source, loader) for n in node.value)
        seq.where, seq.item_where = _at(node, source), [_at(n, source) for n in node.value]
        return seq
    return loader.construct_object(node, deep=True)


def where(parent: Map | Seq, key: str | int) -> str:
    """Where ``parent[key]`` was written (the parent's place if unknown)."""
    if isinstance(parent, Map) and isinstance(key, str):
        return parent.key_where.get(key, parent.where)
    if isinstance(parent, Seq) and isinstance(key, int) and key < len(parent.item_where):
        return parent.item_where[key]
    return parent.where


__all__ = ["DefinitionError", "Map", "Seq", "parse_yaml", "where"]
