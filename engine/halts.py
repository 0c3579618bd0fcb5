"""A halted session: a run that stopped on an error it cannot get past by itself waits,
holding nothing, until someone resumes it (after fixing the cause); the session's later
inputs wait behind it, in order, and other sessions go on.

The wait is a signal wait named ``resume:<call id>`` without deadline (a run deadline no
longer ends a halted run); when it begins, a failed ``OutputEvent`` announces it, its
``output`` naming the signal: ``{"halted": true, "resume": "resume:s1:r2:i1:c4"}``.
``eddies resume SESSION`` (or any producer sending that signal) resumes it. Example::

    await ctx.halt_async(ErrorInfo("ModelError", "the model keeps failing"))
    # ... resumed: try again

A session is also halted, by its runner, when an error escapes the machine while it
applies one of the session's records (a defect, not an action's failure: those fail their
run): :meth:`~eddies.engine.machine.SessionMachine.halt` keeps the session's last trusted
state with a :class:`~eddies.engine.state.Fault`, parks that record and every later one,
and announces it the same way (its output also says ``"fault": true``); the resume
signal applies the parked records again, in order.
"""

from __future__ import annotations

import shlex

from eddies.events import AgentEvent, ErrorInfo, OutputEvent

from .state import TERMINAL, RunState

PREFIX = "resume:"
#: The error type of the OutputEvent that announces a halt.
HALTED = "SessionHaltedError"


#: What an action or the machine may raise that is not a session's failure: the process
#: is told to stop. Anything else is the session's (its run fails, or it halts).
PROCESS_EXITS = (SystemExit, KeyboardInterrupt)

#: The most records a halted session keeps for its resume; later ones are refused (the
#: runner dead-letters them, saying why).
MAX_PARKED = 1000


def fault_signal(session_id: str, seq: int) -> str:
    """The signal that resumes a session halted on a fault announced at ``seq``."""
    return f"{PREFIX}{session_id}:halt{seq}"


def notice(session_id: str, signal: str, error: ErrorInfo, *, fault: bool = False) -> OutputEvent:
    """The failed OutputEvent that announces a halt on ``error``, naming its signal
    (``fault``: a halt on an error that escaped the machine)."""
    output: dict[str, object] = {"halted": True, "resume": signal}
    if fault:
        output["fault"] = True
    return OutputEvent(output, ErrorInfo(
        HALTED, f"session {session_id} halted on {error.type}: {error.message}; its later "
        f"inputs wait. Fix the cause, then: eddies resume {shlex.quote(session_id)}",
        category=error.category))


def fault_notice(event: AgentEvent) -> bool:
    """Whether ``event`` announces a halt on a fault (an error that escaped the machine)."""
    payload = event.payload
    return (isinstance(payload, OutputEvent) and not event.scope and isinstance(payload.output, dict)
            and payload.output.get("fault") is True and resume_signal(payload) is not None)


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
