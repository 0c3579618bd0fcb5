"""Personal data kept out of what a session records and sends: a hook that finds e-mail
addresses, phone numbers, payment card numbers, IBANs and national ids in inputs, in what
models, tools and sub-agents are sent, and in answers, and masks, hashes or refuses them.

Card numbers, IBANs and national ids count only when their checksum holds (python-stdnum),
phone numbers only when they are valid numbers (phonenumbers), so an order number is not
taken for a card. Both are the ``pii`` extra, imported when the first text is checked.
Hashing is keyed (HMAC-SHA-256 with a secret from the environment): an unkeyed hash of a
card number is found again by trying every number. Example::

    agent.add_hook(PiiRedaction())                                   # mask: "[card]"
    agent.add_hook(PiiRedaction(action="hash", key_env="PII_KEY"))  # "[card:3f9a…]"
    agent.add_hook(PiiRedaction(action="refuse", kinds=("card",)))
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import re
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

from eddies.engine import CallView, Hook, InputInfo, Refuse
from eddies.events import CallKind

#: What is looked for unless ``kinds`` says otherwise.
DEFAULT_KINDS = ("email", "phone", "card", "iban", "us_ssn")
ACTIONS = ("mask", "hash", "refuse")

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_SSN = re.compile(r"(?<![\d-])\d{3}-?\d{2}-?\d{4}(?![\d-])")
_DNI = re.compile(r"\b\d{8}-?[A-Z]\b")

Span = tuple[int, int, str]


def _checked(pattern: re.Pattern[str], valid: Callable[[str], bool],
             kind: str) -> Callable[[str], list[Span]]:
    def find(text: str) -> list[Span]:
        return [(m.start(), m.end(), kind) for m in pattern.finditer(text) if valid(m.group())]
    return find


@cache
def _finders(kinds: tuple[str, ...], phone_region: str | None) -> list[Callable[[str], list[Span]]]:
    """The finder of each kind (the pii extra imported here, on first use)."""
    try:
        import phonenumbers
        from stdnum import iban, luhn
        from stdnum.es import dni
        from stdnum.us import ssn
    except ImportError:
        raise RuntimeError("PiiRedaction needs the pii extra: pip install 'eddies[pii]' "
                           "(python-stdnum and phonenumbers)") from None

    def phones(text: str) -> list[Span]:
        return [(m.start, m.end, "phone") for m in phonenumbers.PhoneNumberMatcher(
            text, phone_region, leniency=phonenumbers.Leniency.VALID)]

    digits = re.compile(r"\D")
    found = {
        "email": _checked(_EMAIL, lambda _: True, "email"),
        "phone": phones,
        "card": _checked(_CARD, lambda s: luhn.is_valid(digits.sub("", s)), "card"),
        "iban": _checked(_IBAN, iban.is_valid, "iban"),
        "us_ssn": _checked(_SSN, ssn.is_valid, "us_ssn"),
        "es_dni": _checked(_DNI, dni.is_valid, "es_dni"),
    }
    return [found[k] for k in kinds]


class PiiRedaction(Hook):
    """Masks (``[card]``), hashes (``[card:HMAC]``, keyed by the environment variable
    ``key_env``) or refuses the personal data of ``kinds`` in the session's inputs, in
    what its model, tool and sub-agent calls (``calls``) are sent and return, and in its
    answers (``inputs``, ``results``, ``outputs``: False leaves those alone). A model
    call whose results it checks does not stream its answer.
    ``phone_region`` (``"GB"``, ``"US"``): also numbers written without a country code
    as they are written there; None (the default): international ``+`` numbers only.
    """

    name = "pii"

    def __init__(self, *, kinds: Iterable[str] = DEFAULT_KINDS, action: str = "mask",
                 key_env: str | None = None, phone_region: str | None = None,
                 calls: Iterable[CallKind] = (CallKind.CHAT_MODEL, CallKind.TOOL, CallKind.SUBAGENT),
                 inputs: bool = True, outputs: bool = True, results: bool = True) -> None:
        self.kinds = tuple(kinds)
        unknown = [k for k in self.kinds if k not in ("email", "phone", "card", "iban", "us_ssn", "es_dni")]
        if unknown or not self.kinds:
            raise ValueError(f"PiiRedaction: kinds: {unknown or 'none given'}; known: email, phone, card, "
                             "iban, us_ssn, es_dni")
        if action not in ACTIONS:
            raise ValueError(f"PiiRedaction: action {action!r} is not one of {', '.join(ACTIONS)}")
        self.action = action
        self._key = b""
        if action == "hash":
            secret = os.environ.get(key_env or "")
            if not secret:
                raise ValueError(f"PiiRedaction: action 'hash' needs a key: key_env names an environment "
                                 f"variable that holds it ({key_env or 'none named'} is not set)")
            self._key = secret.encode()
        self.phone_region = phone_region
        self.calls = frozenset(calls)
        self.inputs, self.outputs, self.results = inputs, outputs, results

    # --- finding and replacing ---------------------------------------------------------------
    def spans(self, text: str) -> list[Span]:
        """The personal data in ``text``: (start, end, kind), in order, none overlapping
        (the longer of two that overlap)."""
        found = [s for find in _finders(self.kinds, self.phone_region) for s in find(text)]
        found.sort(key=lambda s: (s[0], s[0] - s[1]))
        kept: list[Span] = []
        for span in found:
            if kept and span[0] < kept[-1][1]:
                continue
            kept.append(span)
        return kept

    def redact(self, text: str) -> tuple[str, list[str]]:
        """``text`` with its personal data replaced, and the kinds replaced (one per span)."""
        spans = self.spans(text)
        if not spans:
            return text, []
        parts, at = [], 0
        for start, end, kind in spans:
            parts += [text[at:start], self._replacement(text[start:end], kind)]
            at = end
        parts.append(text[at:])
        return "".join(parts), [kind for _, _, kind in spans]

    def _replacement(self, found: str, kind: str) -> str:
        if self.action == "hash":
            return f"[{kind}:{hmac.new(self._key, found.encode(), hashlib.sha256).hexdigest()[:16]}]"
        return f"[{kind}]"

    def _value(self, value: Any, found: list[str]) -> Any:
        """``value`` (JSON) with every text in it redacted; ``found`` collects the kinds."""
        if isinstance(value, str):
            text, kinds = self.redact(value)
            found += kinds
            return text
        if isinstance(value, list):
            return [self._value(v, found) for v in value]
        if isinstance(value, dict):
            return {k: self._value(v, found) for k, v in value.items()}
        return value

    def _decided(self, value: Any, view: CallView | InputInfo) -> tuple[Any, Refuse | None]:
        """``value`` redacted (or refused); what was found counted by kind in ``view``."""
        found: list[str] = []
        redacted = self._value(value, found)
        for kind in set(found):
            view.count(kind, found.count(kind))
        if found and self.action == "refuse":
            return value, Refuse(f"it holds personal data ({', '.join(sorted(set(found)))})")
        return (redacted if found else value), None

    # --- the hook ------------------------------------------------------------------------------
    def on_input(self, value: Any, info: InputInfo) -> Any:
        if not self.inputs:
            return value
        redacted, refused = self._decided(value, info)
        return refused or redacted

    def before_call(self, call: CallView) -> CallView | Refuse | None:
        if call.kind not in self.calls:
            return None
        if call.kind is CallKind.CHAT_MODEL:  # what the model reads: its messages
            messages, refused = self._decided(call.kwargs.get("messages", []), call)
            if refused is not None:
                return refused
            return None if messages is call.kwargs.get("messages") else call.with_arguments(messages=messages)
        asked, refused = self._decided({"args": call.args, "kwargs": call.kwargs}, call)
        if refused is not None:
            return refused
        if asked["args"] is call.args and asked["kwargs"] is call.kwargs:
            return None
        return dataclasses.replace(call, args=asked["args"], kwargs=asked["kwargs"])

    def sees_results(self) -> bool:
        return self.results

    def on_result(self, call: CallView, value: Any) -> Any:
        if call.kind not in self.calls:
            return value
        redacted, refused = self._decided(value, call)
        return refused or redacted

    def on_output(self, value: Any, info: InputInfo) -> Any:
        if not self.outputs:
            return value
        redacted, refused = self._decided(value, info)
        return refused or redacted


__all__ = ["ACTIONS", "DEFAULT_KINDS", "PiiRedaction"]
