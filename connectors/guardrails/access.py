"""Which tools and sub-agents each caller may use: an allow-list per tenant (or per user),
checked against who asked for the run (its input's signed identity, see
``docs/guide/identity.md``). A call it does not allow is refused before it is made: the
tool never runs, and the model sees the refusal as the tool's result. It decides in the
session machine from what the history holds (the identity is recorded with the input), so
a replay, a fork or ``eddies eval`` decides the same, asking nothing. Example::

    agent.add_hook(CallAccess({"acme": ["lookup", "refund"], "trial-co": ["lookup"]},
                              anonymous=["lookup"]))
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from eddies.engine import CallView, Hook, Refuse
from eddies.events import CallKind

#: The kinds of call an allow-list covers: what a model or an action asks of the world.
GUARDED = frozenset({CallKind.TOOL, CallKind.SUBAGENT})
#: In an allow-list: every tool and sub-agent.
ANY = "*"


class CallAccess(Hook):
    """Allows each tenant (``by="tenant"``, the default) or user (``by="user"``) the tools
    and sub-agents named in ``allowed`` (``"*"``: all); an anonymous run (no signed
    identity) the ones in ``anonymous``; a tenant or user not named, the ones in
    ``others``. Both default to none: what is not allowed is refused. Models, memory and
    the agent's own functions are not its concern."""

    name = "access"

    def __init__(self, allowed: Mapping[str, Iterable[str]], *, by: str = "tenant",
                 anonymous: Iterable[str] = (), others: Iterable[str] = ()) -> None:
        if by not in ("tenant", "user"):
            raise ValueError(f"CallAccess: by={by!r}: expected 'tenant' or 'user'")
        self.by = by
        self.allowed = {who: frozenset(names) for who, names in allowed.items()}
        self.anonymous = frozenset(anonymous)
        self.others = frozenset(others)

    def before_call(self, call: CallView) -> CallView | Refuse | None:
        if call.kind not in GUARDED:
            return None
        who = call.identity
        named = None if who is None else who.tenant if self.by == "tenant" else who.user
        if who is None:
            allowed, caller = self.anonymous, "an anonymous caller"
        elif named is None:
            allowed, caller = self.others, f"user {who.user!r} (no tenant)"
        else:
            allowed, caller = self.allowed.get(named, self.others), f"{self.by} {named!r}"
        if call.target in allowed or ANY in allowed:
            return None
        what = "tool" if call.kind is CallKind.TOOL else "sub-agent"
        return Refuse(f"{caller} may not use the {what} {call.target!r}")


__all__ = ["ANY", "GUARDED", "CallAccess"]
