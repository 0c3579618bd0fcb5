"""How a remote resource's declaration is read: values written ``${NAME}`` and keys named
by an environment variable come from the environment (and are remembered as secrets), and
a declaration that cannot be used is a :class:`ConfigurationError` naming it. Example::

    url = resolve_env("https://mcp.example/${TENANT}/mcp", "MCP server tenant")
    key = secret("OPENAI_KEY", "chat model api_key_env")
"""

from __future__ import annotations

import os
import re

from eddies.connectors.remote.secrets import remember

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ConfigurationError(ValueError):
    """An MCP or A2A resource that cannot be used as declared (named in the message)."""


def secret(name: str, what: str) -> str:
    """The value of environment variable ``name`` (unset: an error naming the variable and
    ``what`` needs it, never a value)."""
    value = os.environ.get(name)
    if value is None:
        raise ConfigurationError(f"{what}: the environment variable {name} is not set")
    return remember(value)


def resolve_env(value: str, what: str) -> str:
    """``value`` with each ``${NAME}`` read from the environment."""
    return _ENV_REF.sub(lambda m: secret(m.group(1), what), value)


__all__ = ["ConfigurationError", "resolve_env", "secret"]
