"""How sub-agent scopes are named and what a scope reads of its callers: plain functions
of names and session state, shared by the plan (a scope's plan), the session machine (its
frames) and an action's step (a sub-agent's memory). Example::

    scope_key(("reviewer@i1c0", "checker@i4c0"))   # "reviewer@i1c0/checker@i4c0"
"""

from __future__ import annotations

from typing import Any

from eddies.events import DurableCallRequest, decode_value

from .state import Frame, RunState, SessionState


def scope_part(agent: str, invocation: int, ordinal: str) -> str:
    """The scope part of a call of sub-agent ``agent``: ``name@i<invocation>c<ordinal>``
    (``ordinal``: the call id's last part, ``c<n>``)."""
    return f"{agent}@i{invocation}{ordinal}"


def agent_of(part: str) -> str:
    """The sub-agent a scope part is a call of."""
    return part.rpartition("@")[0]


def scope_key(scope: tuple[str, ...]) -> str:
    """How a run keys the frame of ``scope``."""
    return "/".join(scope)


def subagent_input(req: DurableCallRequest) -> Any:
    """The prompt of a sub-agent call request."""
    return decode_value(req.args)["kwargs"].get("prompt")


def parent_memory(state: SessionState, run: RunState, frame: Frame) -> dict[str, str]:
    """What a sub-agent reads under its own short-term memory: its callers', nearest
    first (the session's memory at the root)."""
    merged = dict(state.memory)
    for depth in range(1, len(frame.scope)):
        above = run.frames.get(scope_key(frame.scope[:depth]))
        if above is not None:
            merged.update(above.memory)
    return merged


__all__ = ["agent_of", "parent_memory", "scope_key", "scope_part", "subagent_input"]
