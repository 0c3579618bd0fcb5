"""Who may use the HTTP door: bearer tokens from configuration, each one for every session
or for the sessions whose id starts with a prefix of its own, and each one may prove who
asks (an end user, their tenant): the door signs that identity on every input it writes.

The tokens are read from the environment variable the ``serve_tokens_env`` setting names
(``EDDIES_SERVE_TOKENS`` by default; the variable's name is configuration, the tokens
are secrets and are never written to a file Eddies reads): comma-separated, each
``TOKEN``, ``TOKEN=PREFIX``, and either followed by ``;user=USER`` and ``;tenant=TENANT``.
Example::

    tokens = Tokens.parse("s3cret, t0ken=acme-;user=ann;tenant=acme")
    tokens.allows("t0ken", "acme-42")     # True
    tokens.allows("t0ken", "other")       # False
    tokens.identity("t0ken")              # Identity(user='ann', tenant='acme')
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from typing import TypeVar

from eddies.connectors.runtime.settings import ConfigError
from eddies.events import Identity

T = TypeVar("T")


@dataclass(frozen=True)
class Tokens:
    """The tokens, the session prefix each one is limited to ("" for none) and who each
    one proves asks (``identities``; a token without one: its inputs are anonymous)."""

    prefixes: dict[str, str]
    identities: dict[str, Identity] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, where: str = "serve tokens") -> Tokens:
        """The tokens of ``TOKEN[=PREFIX][;user=USER][;tenant=TENANT]`` entries,
        comma-separated; a ConfigError names ``where`` for an entry without a token, an
        unknown attribute, or a tenant without a user. The entry itself is never shown:
        it holds the token."""
        out: dict[str, str] = {}
        who: dict[str, Identity] = {}
        for n, entry in enumerate((e.strip() for e in text.split(",") if e.strip()), 1):
            head, *attributes = entry.split(";")
            token, _, prefix = head.partition("=")
            if not token.strip():
                raise ConfigError(f"{where}: an entry has no token before its '=' (entry {n})")
            named: dict[str, str] = {}
            for attribute in attributes:
                key, _, value = attribute.partition("=")
                if key.strip() not in ("user", "tenant") or not value.strip():
                    raise ConfigError(f"{where}: entry {n}: {key.strip()!r} is not user=USER or "
                                      "tenant=TENANT")
                named[key.strip()] = value.strip()
            if "tenant" in named and "user" not in named:
                raise ConfigError(f"{where}: entry {n}: a tenant needs a user (user=USER)")
            out[token.strip()] = prefix.strip()
            if "user" in named:
                who[token.strip()] = Identity(named["user"], named.get("tenant"))
        return cls(out, who)

    def identity(self, token: str | None) -> Identity | None:
        """Who ``token`` proves asks (None: nobody in particular, or not a token)."""
        return _entry(self.identities, token)

    def __bool__(self) -> bool:
        return bool(self.prefixes)

    def prefix(self, token: str | None) -> str | None:
        """The session prefix ``token`` is limited to ("" for any), or None if it is not
        one of the tokens. Compared in constant time."""
        return _entry(self.prefixes, token)

    def allows(self, token: str | None, session_id: str) -> bool:
        """Whether ``token`` may use session ``session_id``."""
        prefix = self.prefix(token)
        return prefix is not None and session_id.startswith(prefix)


def _entry(table: dict[str, T], token: str | None) -> T | None:
    """What ``table`` holds for ``token``, compared with every token in constant time (no
    early exit: how long it takes tells nothing of how much of a token was right)."""
    if token is None:
        return None
    found = None
    for known, value in table.items():
        if hmac.compare_digest(known.encode(), token.encode()):
            found = value
    return found
