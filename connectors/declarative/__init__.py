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
        from eddies.connectors.declarative.sql_agents import load_sql

        return load_sql(path, agent)
    from eddies.connectors.declarative.yaml_agents import load_yaml

    return load_yaml(path, agent)


def load_all(path: str | Path) -> list[Agent]:
    """Every agent the YAML or SQL file ``path`` can load on its own (in YAML each one it
    declares; in SQL each one no other agent uses), in the file's order: what
    ``eddies check`` checks. Example::

        [agent.name for agent in load_all("agents.sql")]   # ['helper', 'reviewed']
    """
    if str(path).endswith(".sql"):
        from eddies.connectors.declarative.sql_agents import load_sql_all

        return load_sql_all(path)
    from eddies.connectors.declarative.yaml_agents import load_yaml_all

    return load_yaml_all(path)


__all__ = ["SUFFIXES", "load_all", "load_definition"]
