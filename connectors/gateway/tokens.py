"""Who may use the HTTP door: bearer tokens from configuration, each one for every session
or for the sessions whose id starts with a prefix of its own.

The tokens are read from the environment variable the ``serve_tokens_env`` setting names
(``EDDIES_SERVE_TOKENS`` by default; the variable's name is configuration, the tokens
are secrets and are never written to a file Eddies reads): comma-separated, each
``TOKEN`` or ``TOKEN=PREFIX``. Example::

    tokens = Tokens.parse("s3cret, t0ken=acme-")
    tokens.allows("t0ken", "acme-42")     # True
    tokens.allows("t0ken", "other")       # False
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from eddies.connectors.runtime.settings import ConfigError


@dataclass(frozen=True)
class Tokens:
    """The tokens and the session prefix each one is limited to ("" for none)."""

    prefixes: dict[str, str]

    @classmethod
    def parse(cls, text: str, where: str = "serve tokens") -> Tokens:
        """The tokens of ``TOKEN[=PREFIX]`` entries, comma-separated; a ConfigError names
        ``where`` for an entry without a token."""
        out: dict[str, str] = {}
        for entry in (e.strip() for e in text.split(",")):
            if not entry:
                continue
            token, _, prefix = entry.partition("=")
            if not token.strip():
                raise ConfigError(f"{where}: an entry has no token before its '=' ({entry!r})")
            out[token.strip()] = prefix.strip()
        return cls(out)

    def __bool__(self) -> bool:
        return bool(self.prefixes)

    def prefix(self, token: str | None) -> str | None:
        """The session prefix ``token`` is limited to ("" for any), or None if it is not
        one of the tokens. Compared in constant time."""
        if token is None:
            return None
        found = None
        for known, prefix in self.prefixes.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = prefix
        return found

    def allows(self, token: str | None, session_id: str) -> bool:
        """Whether ``token`` may use session ``session_id``."""
        prefix = self.prefix(token)
        return prefix is not None and session_id.startswith(prefix)
