"""The WITH options of a SQL statement, read by type, each error naming the place of the
option that is wrong. Example::

    opts = With(stmt, prefix="openai")     # 'openai.connection' is read as 'connection'
    timeout = opts.number("request_timeout", 20.0)
    opts.finish("type, request_timeout")   # any option not read: an error naming it
"""

from __future__ import annotations

import json
from typing import Any

from eddies.connectors.declarative.located import DefinitionError
from eddies.connectors.declarative.references import env_name, read_env
from eddies.connectors.declarative.sql_parse import Option, Statement
from eddies.engine.options import did_you_mean


class With:
    """The WITH options of one statement, read by type; keys compare ignoring case and
    ``-``/``_``; whatever is left unread at :meth:`finish` is an unknown option."""

    def __init__(self, stmt: Statement, prefix: str = "") -> None:
        self.stmt = stmt
        self.left: dict[str, Option] = {}
        for key, option in stmt.options.items():
            norm = key.strip().lower().replace("-", "_")
            if prefix and norm.startswith(prefix + "."):  # 'openai.connection' is 'connection'
                norm = norm[len(prefix) + 1:]
            if norm in self.left:
                raise DefinitionError(f"{option.key_at}: option {key!r} is given twice (first at "
                                      f"{self.left[norm].key_at})")
            self.left[norm] = option

    @property
    def what(self) -> str:
        return f"CREATE {self.stmt.kind} {self.stmt.name}"

    def pop(self, *keys: str) -> Option | None:
        found = [self.left.pop(k) for k in keys if k in self.left]
        if len(found) > 1:
            raise DefinitionError(f"{found[1].key_at}: {found[1].key!r} says again what {found[0].key!r} "
                                  f"(at {found[0].key_at}) says")
        return found[0] if found else None

    def text(self, *keys: str, required: bool = False, secret: bool = False) -> str | None:
        option = self.pop(*keys)
        if option is None:
            if required:
                self.misspelt(*keys)  # 'allowed_tool' names the fix, not just what is missing
                at = self.stmt.with_at or self.stmt.at
                raise DefinitionError(f"{at}: {self.what}: the option {keys[0]!r} is required")
            return None
        if isinstance(option.value, bool) or not isinstance(option.value, (str, int, float)):
            raise DefinitionError(f"{option.at}: {option.key}: expected text")
        if secret and env_name(option.value) is None:
            raise DefinitionError(f"{option.at}: {option.key}: write a secret as '${{NAME}}', the name of "
                                  "the environment variable holding it, not the secret itself")
        return str(option.value) if secret else str(read_env(option.value, option.at))

    def number(self, key: str, default: float) -> float:
        option = self.pop(key)
        if option is None:
            return default
        try:
            if isinstance(option.value, bool):
                raise ValueError
            return float(option.value)
        except ValueError:
            raise DefinitionError(f"{option.at}: {option.key}: expected a number, "
                                  f"got {option.value!r}") from None

    def whole(self, key: str, default: int | None = None) -> int | None:
        option = self.pop(key)
        if option is None:
            return default
        value = option.value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise DefinitionError(f"{option.at}: {option.key}: expected a whole number, got {option.value!r}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        option = self.pop(key)
        if option is None:
            return default
        value = option.value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            value = value.strip().lower() == "true"
        if not isinstance(value, bool):
            raise DefinitionError(f"{option.at}: {option.key}: expected TRUE or FALSE, got {option.value!r}")
        return value

    def prefixed(self, prefix: str) -> dict[str, Option]:
        """Options written ``'prefix.NAME'``, by NAME as written."""
        out = {}
        for norm in [k for k in self.left if k.startswith(prefix + ".")]:
            option = self.left.pop(norm)
            out[option.key.split(".", 1)[1]] = option
        return out

    def misspelt(self, *names: str) -> None:
        """Refuse a left option whose key is near one of ``names``: where a required
        option is missing, a misspelling of it is the likelier mistake to name."""
        for norm, option in self.left.items():
            hint = did_you_mean(norm, names)
            if hint:
                raise DefinitionError(f"{option.key_at}: {option.key!r} is not an option of "
                                      f"{self.what}{hint}")

    def finish(self, known: str) -> None:
        for option in self.left.values():
            raise DefinitionError(f"{option.key_at}: {option.key!r} is not an option of {self.what}"
                                  f"{did_you_mean(option.key, known.split(', '))} "
                                  f"(its options: {known})")


def checked_options(kind: Any, given: dict[str, Option], stmt: Statement,
                    more: dict[str, Any] | None = None) -> Any:
    """``kind.from_mapping`` of the options ``given`` (and ``more``), each checked on its
    own first, so that an error names the place of the option that is wrong."""
    for option in given.values():
        try:
            kind.from_mapping({option.key: option.value})
        except (ValueError, TypeError) as err:
            at = option.key_at if "unknown option" in str(err) else option.at
            raise DefinitionError(f"{at}: {err}") from None
    try:
        return kind.from_mapping({**{k: o.value for k, o in given.items()}, **(more or {})})
    except (ValueError, TypeError) as err:
        raise DefinitionError(f"{stmt.with_at or stmt.at}: {err}") from None


def read_text(option: Option) -> str:
    """An option's value as text (``${NAME}`` kept as written: the runner reads it)."""
    if isinstance(option.value, bool) or not isinstance(option.value, str):
        raise DefinitionError(f"{option.at}: {option.key}: expected text, got {option.value!r}")
    return option.value


def json_list(option: Option) -> tuple[str, ...]:
    try:
        value = json.loads(str(option.value))
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DefinitionError(f"{option.at}: {option.key}: expected a JSON list of text, like "
                              "'[\"--flag\", \"value\"]'")
    return tuple(value)


def option_at(stmt: Statement, key: str) -> str:
    """Where option ``key`` of ``stmt`` was written (the statement's place if it was not)."""
    for written, option in stmt.options.items():
        if written.lower().replace("-", "_").endswith(key):
            return option.at
    return stmt.at


__all__ = ["With", "checked_options", "json_list", "option_at", "read_text"]
