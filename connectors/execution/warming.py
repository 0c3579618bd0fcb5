"""Resources made ready before an executor takes work, so that a new process's first
answer is as fast as its later ones.

A resource object may define ``warm()``: the first-use work its first call would
otherwise do (:class:`eddies.connectors.models.litellm.LiteLLMChatModel` imports litellm,
~3 s). Workers call :func:`warm` before they join their groups, so the partitions they
take are served at once, and a rebalance onto a new worker does not wait for it either.
Example::

    class MyConnection:
        def warm(self) -> None:            # optional
            self.client = make_client()    # what the first chat() would have done
        def chat(self, messages, *, model, tools, **arguments): ...

    warmed = warm(plan)   # ["my_connection"]
"""

from __future__ import annotations

import logging
from typing import Any

from eddies.engine import AgentPlan

log = logging.getLogger("eddies.worker")


def warm(plan: AgentPlan) -> list[str]:
    """Call ``warm()`` of every resource of ``plan`` and of its sub-agents' plans that has
    one, each object once; the names of the resources warmed. A ``warm()`` that raises is
    logged and skipped: warming only moves work earlier, and the first call does it again
    (a model server that is down at start may be up by then)."""
    done: set[int] = set()
    names: list[str] = []
    for name, obj in every_resource(plan):
        hook = getattr(obj, "warm", None)
        if id(obj) in done or not callable(hook):
            continue
        done.add(id(obj))
        try:
            hook()
        except Exception as err:
            log.warning("resource %r could not be warmed (its first call will try again): "
                        "%s: %s", name, type(err).__name__, err)
            continue
        names.append(name)
    return names


def every_resource(plan: AgentPlan) -> list[tuple[str, Any]]:
    """(name, object) of every resource of ``plan`` and of its sub-agents' plans."""
    out = [(name, obj) for name, (_, obj) in plan.resources.items()]
    for sub in plan.subagents.values():
        out += every_resource(sub)
    return out
