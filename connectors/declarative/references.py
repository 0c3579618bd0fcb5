"""What a definition names outside itself, read the same way from YAML and SQL: Python
objects written ``module:attribute``, and secrets written ``${NAME}`` (an environment
variable, read when the agent is loaded and never echoed). Example::

    import_target("eddies.demo:add", "a.yaml:3:5", "function")   # the function
    env_name("${OPENAI_KEY}")                                     # "OPENAI_KEY"
"""

from __future__ import annotations

import importlib
import os
import re
from typing import Any

from eddies.connectors.declarative.located import DefinitionError

_ENV = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def env_name(value: Any) -> str | None:
    """NAME if ``value`` is written ``${NAME}``, else None."""
    found = _ENV.match(value) if isinstance(value, str) else None
    return found.group(1) if found else None


def read_env(value: Any, at: str) -> Any:
    """``value``, or the environment variable NAME when it is written ``${NAME}``."""
    name = env_name(value)
    if name is None:
        return value
    got = os.environ.get(name)
    if got is None:
        raise DefinitionError(f"{at}: the environment variable {name} is not set")
    return got


def import_target(text: str, at: str, key: str, dotted: bool = False) -> Any:
    """The object ``text`` names as ``module:attribute`` (``dotted``: ``module.attribute``
    too, Flink SQL's form for a Python function)."""
    if ":" in text or not dotted:
        module_name, _, attr = text.partition(":")
    else:
        module_name, _, attr = text.rpartition(".")
    if not module_name or not attr:
        form = "module:attribute or module.attribute" if dotted else "module:attribute"
        raise DefinitionError(f"{at}: {key}: expected {form}, got {text!r}")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except ImportError as err:
        raise DefinitionError(f"{at}: cannot import {module_name!r}: {err}") from None
    except AttributeError:
        raise DefinitionError(f"{at}: {module_name!r} has no {attr!r}") from None
    return obj


def hooks_named(texts: list[str], at: str, key: str = "hooks") -> list[Any]:
    """The hooks ``texts`` name (each ``module:attribute``): a Hook as it is, a Hook class
    made with no arguments; anything else is an error naming it."""
    from eddies.engine import Hook

    made = []
    for text in texts:
        target = import_target(text, at, key)
        if isinstance(target, type) and issubclass(target, Hook):
            try:
                target = target()
            except TypeError as err:
                raise DefinitionError(f"{at}: {key}: {text} cannot be made without arguments ({err}): "
                                      "name an instance of it") from None
        if not isinstance(target, Hook):
            raise DefinitionError(f"{at}: {key}: {text} is not a Hook (subclass eddies.engine.Hook) "
                                  "or an instance of one")
        made.append(target)
    return made


__all__ = ["env_name", "hooks_named", "import_target", "read_env"]
