"""Signed call results: only an executor can answer a durable call.

Users and executors both write to ``APP.input`` (one topic keeps one order per session),
so Kafka ACLs cannot tell a user's record from an executor's. An executor therefore signs
every DurableCallResult it sends: the ``eddies.signature`` header holds the lowercase hex
HMAC-SHA256 of the record's value (the whole Avro envelope: session, call id, attempt,
status, value, error) under a key that only workers hold. The orchestrator accepts a result
only with a valid signature; anything else goes to the dead-letter topic.

The key is read from the environment variable named by the ``result_key_env`` setting
(``EDDIES_RESULT_KEY`` by default), never from a file or flag. Several comma-separated keys
rotate without downtime: the first signs, any verifies. Example::

    signer = ResultSigner.from_env("EDDIES_RESULT_KEY", allow_dev_key=False)
    headers = [(SIGNATURE_HEADER, signer.sign(value))]
    assert signer.verify(value, signer.sign(value))
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping

SIGNATURE_HEADER = "eddies.signature"
#: The header of an input whose identity (who asked) its producer vouches for: the HMAC of
#: the record's value under the identity key (``identity_key_env``).
IDENTITY_HEADER = "eddies.identity.signature"
#: The key of a worker on the embedded broker with no key set: development only (it is
#: public, so it keeps mistakes out, not attackers).
DEV_KEY = b"eddies-embedded-broker-development-key"
DEV_IDENTITY_KEY = b"eddies-embedded-broker-development-identity-key"
#: The shortest key accepted: 128 bits as hex.
MIN_KEY_CHARS = 32


class ResultKeyError(ValueError):
    """The result key is missing or too weak; the message names the variable."""


class ResultSigner:
    """Signs and verifies call results with HMAC-SHA256."""

    __slots__ = ("_macs", "dev")

    def __init__(self, keys: list[bytes], dev: bool = False) -> None:
        if not keys:
            raise ValueError("at least one key is needed")
        # Keyed once, copied per record: hmac.digest() releases the GIL around its OpenSSL
        # call, and getting it back behind a busy thread costs up to the 5 ms switch
        # interval (measured: a worker lost ~20% of its throughput); a copy keeps the GIL.
        self._macs = [hmac.new(key, digestmod=hashlib.sha256) for key in keys]
        self.dev = dev  # signing with the public development key

    @classmethod
    def from_env(cls, variable: str, *, allow_dev_key: bool,
                 environ: Mapping[str, str] | None = None) -> ResultSigner:
        """The signer of the keys in environment variable ``variable``. Without it, the
        development key if ``allow_dev_key`` (the embedded broker), else ResultKeyError."""
        keys = _keys("result_key_env", variable, environ)
        if not keys:
            if allow_dev_key:
                return cls([DEV_KEY], dev=True)
            raise ResultKeyError(
                f"result_key_env: environment variable {variable} is not set. Executors sign "
                "call results with it and orchestrators refuse unsigned ones; set it to the same "
                "random secret on every worker of the app (e.g. `openssl rand -hex 32`); see the "
                "docs/operations/trust.md")
        return cls(keys)

    def sign(self, value: bytes) -> bytes:
        """The signature header value of a result record's ``value``."""
        return _mac(self._macs[0], value)

    def verify(self, value: bytes, signature: bytes | None) -> bool:
        """Whether ``signature`` is a valid signature of ``value`` under any key."""
        if not signature:
            return False
        return any(hmac.compare_digest(_mac(m, value), signature) for m in self._macs)


def identity_signer(variable: str, *, allow_dev_key: bool,
                    environ: Mapping[str, str] | None = None) -> ResultSigner | None:
    """The signer of inputs' identities, keyed by environment variable ``variable``
    (``identity_key_env``; comma-separated keys rotate as the result key's do). Without
    it: the public development key on the embedded broker (``allow_dev_key``), else None:
    no identity is vouched for, so admission clears every one. Example::

        signer = identity_signer("EDDIES_IDENTITY_KEY", allow_dev_key=True)
        headers = [(IDENTITY_HEADER, signer.sign(value))]
    """
    keys = _keys("identity_key_env", variable, environ)
    if keys:
        return ResultSigner(keys)
    return ResultSigner([DEV_IDENTITY_KEY], dev=True) if allow_dev_key else None


def _keys(setting: str, variable: str, environ: Mapping[str, str] | None) -> list[bytes]:
    """The keys in environment variable ``variable`` (named by ``setting``), each checked."""
    text = (os.environ if environ is None else environ).get(variable, "")
    keys = [k.strip() for k in text.split(",") if k.strip()]
    for k in keys:
        if len(k) < MIN_KEY_CHARS:
            raise ResultKeyError(
                f"{setting}: a key in {variable} has {len(k)} characters; use at least "
                f"{MIN_KEY_CHARS} (e.g. `openssl rand -hex 32`)")
    return [k.encode() for k in keys]


def _mac(keyed: hmac.HMAC, value: bytes) -> bytes:
    mac = keyed.copy()
    mac.update(value)  # releases the GIL only past 2 KiB, where hashing costs more anyway
    return mac.hexdigest().encode()
