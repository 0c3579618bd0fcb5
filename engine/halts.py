"""A halted session: a run that stopped on an error it cannot get past by itself waits,
holding nothing, until someone resumes it (after fixing the cause); the session's later
inputs wait behind it, in order, and other sessions go on.

The wait is a signal wait named ``resume:<call id>`` without deadline (a run deadline no
longer ends a halted run); when it begins, a failed ``OutputEvent`` announces it, its
``output`` naming the signal: ``{"halted": true, "resume": "resume:s1:r2:i1:c4"}``.
``eddies resume SESSION`` (or any producer sending that signal) resumes it. Example::

    await ctx.halt_async(ErrorInfo("ModelError", "the model keeps failing"))
    # ... resumed: try again
"""

from __future__ import annotations

import shlex

from eddies.events import ErrorInfo, OutputEvent

from .state import TERMINAL, RunState

PREFIX = "resume:"
#: The error type of the OutputEvent that announces a halt.
HALTED = "SessionHaltedError"


def notice(session_id: str, signal: str, error: ErrorInfo) -> OutputEvent:
    """The failed OutputEvent that announces a halt on ``error``, naming its signal."""
    return OutputEvent({"halted": True, "resume": signal}, ErrorInfo(
        HALTED, f"session {session_id} halted on {error.type}: {error.message}; its later "
        f"inputs wait. Fix the cause, then: eddies resume {shlex.quote(session_id)}",
        category=error.category))


def halted(run: RunState) -> bool:
    """Whether ``run`` waits to be resumed."""
    calls = run.calls
    for cid in run.waiting:
        rec = calls.get(cid)
        if rec is not None and rec.kind == "SIGNAL" and rec.target.startswith(PREFIX) \
                and rec.status not in TERMINAL:
            return True
    return False


def resume_signal(output: OutputEvent) -> str | None:
    """The signal that resumes the halt ``output`` announces (None: it announces none)."""
    value = output.output
    if output.error is None or output.error.type != HALTED or not isinstance(value, dict):
        return None
    signal = value.get("resume")
    return signal if isinstance(signal, str) and signal.startswith(PREFIX) else None
