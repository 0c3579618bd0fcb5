"""Which calls an evaluation makes live: model calls, reads, and the targets it is told
it may make; any other call that no recording answers fails with a CallRefusedError the
agent sees: an evaluation never repeats a production side effect by default. The same
rule in this process (``eddies eval``) and on the workers of an evaluation's app.
Example::

    policy = CallPolicy(allow=frozenset({"search_hotels"}))
    policy.refusal(request)   # None, or why the call may not be made
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eddies.connectors.execution.recorded_calls import RecordedCalls
from eddies.engine import AgentPlan
from eddies.events import CallKind, DurableCallRequest

if TYPE_CHECKING:
    from eddies.connectors.inspect.recording import Recording

#: Calls that are always made live: asking a model (or an embedding model) changes nothing.
MODEL_KINDS = (CallKind.CHAT_MODEL, CallKind.EMBEDDING)
#: Vector store operations that write (a memory set's too).
STORE_WRITES = ("add", "update", "delete")


@dataclass(frozen=True)
class CallPolicy:
    """Which calls an evaluation makes live: models, reads, and the targets of ``allow``.
    ``live_models``: a model call is made live even where the recording made the same one
    (the candidate's model answers every time); else the recorded reply is reused."""

    allow: frozenset[str] = frozenset()
    live_models: bool = False

    def calls(self, plan: AgentPlan, recording: Recording | None = None) -> RecordedCalls:
        """How a run of ``plan`` under this policy answers its calls: from ``recording``
        where it made the same call, else live or refused as this policy says."""
        if recording is None:
            return RecordedCalls({}, plan=plan, refuse=self.refusal)
        return recording.calls(plan, refuse=self.refusal, fresh=self.fresh)

    def fresh(self, request: DurableCallRequest) -> bool:
        """Whether ``request`` is made live whatever the recording holds."""
        return self.live_models and request.kind in MODEL_KINDS

    def refusal(self, request: DurableCallRequest) -> str | None:
        """Why ``request`` may not be made live (None: it may)."""
        if request.kind in MODEL_KINDS or request.target in self.allow:
            return None
        writes = request.kind is CallKind.VECTOR_STORE and _store_op(request) in STORE_WRITES
        if request.idempotent and not writes:
            return None
        what = "writes to a vector store" if writes else "is not idempotent"
        return (f"{request.kind.value} {request.target} {what} and no recording answers it: an "
                f"evaluation does not repeat a side effect (allow it: --allow-call {request.target})")


def _store_op(request: DurableCallRequest) -> str | None:
    try:
        op = json.loads(request.args).get("kwargs", {}).get("op")
    except (ValueError, AttributeError):
        return None
    return op if isinstance(op, str) else None


__all__ = ["MODEL_KINDS", "STORE_WRITES", "CallPolicy"]
