"""Agents declared in files instead of Python: YAML in the shape of Apache Flink Agents'
(``yaml_agents``) and Confluent-style SQL DDL (``sql_agents``). Functions, tools and
classes they name are imported from Python. Example::

    agent = load_definition("agents.sql", "support")
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eddies.engine import Agent

#: The file names a definition may have.
SUFFIXES = (".yaml", ".yml", ".sql")


def load_definition(path: str | Path, agent: str | None = None) -> Agent:
    """The agent the YAML or SQL file ``path`` declares (``agent``: which one, when it
    declares several); DefinitionError naming file, line and column when it cannot be one."""
    if str(path).endswith(".sql"):
        from .sql_agents import load_sql

        return load_sql(path, agent)
    from .yaml_agents import load_yaml

    return load_yaml(path, agent)


__all__ = ["SUFFIXES", "load_definition"]
