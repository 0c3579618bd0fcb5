"""External sub-agents declared in SQL: ``CREATE AGENT a USING CONNECTION c``, where ``c``
is a connection of type ``a2a`` (an A2A agent, its card at ``agent_card_path``) or
``http`` (an HTTP sub-agent's endpoint). Example::

    CREATE CONNECTION agents WITH ('type' = 'a2a', 'endpoint' = 'http://127.0.0.1:9999');
    CREATE AGENT helper USING CONNECTION agents COMMENT 'Answers anything.';
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eddies.connectors.declarative.located import DefinitionError
from eddies.connectors.declarative.sql_options import With
from eddies.connectors.declarative.sql_parse import Name, Statement
from eddies.engine import A2aServer, SubagentSetup


@dataclass(frozen=True)
class HttpEndpoint:
    """A connection of type http: the endpoint of an HTTP sub-agent."""

    endpoint: str
    headers: dict[str, str]
    api_key_env: str | None


def external_agent(stmt: Statement, conn: Name, server: Any) -> SubagentSetup:
    """The SubagentSetup ``stmt`` declares on connection ``conn`` (its ``server``)."""
    opts = With(stmt)
    description = opts.text("description") or (stmt.comment.text if stmt.comment else "")
    timeout = opts.number("request_timeout", 300.0)
    if isinstance(server, A2aServer):
        from eddies.connectors.remote.external_subagents import A2ASubagentSetup

        setup: SubagentSetup = A2ASubagentSetup(
            server.url, opts.text("agent_card_path") or "/.well-known/agent-card.json",
            description=description, headers=server.headers, api_key_env=server.api_key_env,
            timeout_s=timeout)
        opts.finish("description, agent_card_path, request_timeout")
    elif isinstance(server, HttpEndpoint):
        from eddies.connectors.remote.external_subagents import HttpSubagentSetup

        setup = HttpSubagentSetup(server.endpoint, description=description, headers=server.headers,
                                  api_key_env=server.api_key_env, timeout_s=timeout,
                                  idempotent=opts.flag("idempotent", True))
        opts.finish("description, request_timeout, idempotent")
    else:
        raise DefinitionError(f"{conn.at}: connection {conn.text!r} is not of type a2a or http: an "
                              "external agent is reached through one")
    return setup


__all__ = ["HttpEndpoint", "external_agent"]
