"""One session's failure is that session's: an error that escapes the session machine
while it applies a record (a defect of the engine or of a built-in agent, not an action's
failure, which fails its run) halts that session alone.

The machine changes a state in place, so after an escape the state it had is not to be
trusted. :class:`TrustedStates` keeps what it takes to have the last trusted one again,
cheaply: per session changed since it was last saved, the state it had then (its bytes;
none for a session that had no state) and the records applied since. The machine is
deterministic, so applying them again to that state gives the state just before the
record that failed, on which :meth:`~eddies.engine.machine.SessionMachine.halt` parks that
record and the session's later ones until ``eddies resume``. A runner whose store keeps
each session's state as of its last record (Flink keyed state) reads that instead.

Example::

    trusted = TrustedStates()
    since = trusted.since.get(sid) or trusted.start(sid, state)   # before each apply
    state, emitted = machine.apply(state, event)
    since.append(event)                                           # after it
    ...                                        # an apply raised:
    state, emitted = trusted.rebuild(machine, sid)   # the state before it
    trusted.reset(sid)                         # the session's state is saved
"""

from __future__ import annotations

import traceback
from typing import Protocol

from eddies.engine import SessionMachine, SessionState
from eddies.engine.halts import PROCESS_EXITS
from eddies.events import AgentEvent, ErrorInfo

#: Records applied since a session's base state before a new base is taken: a session
#: that is not saved for long (a long run) keeps no longer list than this.
MAX_SINCE = 64


def escaped(err: BaseException) -> ErrorInfo:
    """What the session halts on after ``err`` escaped the machine (re-raised when it is
    the process's own exit): its type and message, and where in the code it was raised,
    which a defect report needs."""
    if isinstance(err, PROCESS_EXITS):
        raise err
    frames = traceback.extract_tb(err.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    return ErrorInfo(type(err).__name__, f"{err}{where}")


class Trusted(Protocol):
    """Where a runner has its sessions' last trusted states (see the module's docstring).

    Per record, a runner looks ``since`` up (a dict lookup, not a call: the per-record
    path is hot) and calls :meth:`start` only when it has nothing for the session (or too
    much); it appends the record to the list it got once the record is applied."""

    #: Session -> the records applied to it since its base state was taken.
    since: dict[str, list[AgentEvent]]

    def start(self, sid: str, state: SessionState | None) -> list[AgentEvent] | None:
        """Take ``sid``'s ``state`` (None: it has none) as its base, from now on: where to
        append the records applied to it (None: nowhere, none are needed)."""

    def reset(self, sid: str) -> None:
        """``sid``'s state as it is now is trusted (saved, or changed by the runner
        itself, not by a record)."""

    def rebuild(self, machine: SessionMachine, sid: str
                ) -> tuple[SessionState | None, list[AgentEvent]]:
        """The state ``sid`` had before the record being applied (None: none) and what to
        emit for it; the machine has forgotten the session's caches (``evict``). What was
        kept for ``sid`` is forgotten: the halted state is the next base."""


class TrustedStates:
    """The last trusted state of each session changed since it was saved, as its base
    state's bytes and the records applied since (see the module's docstring)."""

    def __init__(self) -> None:
        self.since: dict[str, list[AgentEvent]] = {}
        # Session -> its state's bytes when its records began (none: it had no state).
        self._bases: dict[str, bytes] = {}

    def start(self, sid: str, state: SessionState | None) -> list[AgentEvent] | None:
        if state is None:
            self._bases.pop(sid, None)
        else:
            self._bases[sid] = state.to_bytes()
        events: list[AgentEvent] = []
        self.since[sid] = events
        return events

    def reset(self, sid: str) -> None:
        if self.since.pop(sid, None) is not None:
            self._bases.pop(sid, None)

    def forget(self, sids: list[str]) -> None:
        """``sids`` are no longer held here."""
        since, bases = self.since, self._bases
        for sid in sids:
            since.pop(sid, None)
            bases.pop(sid, None)

    def rebuild(self, machine: SessionMachine, sid: str
                ) -> tuple[SessionState | None, list[AgentEvent]]:
        """From the base and the records since. What to emit is nothing, unless one of
        those records fails again (a defect that depends on more than the records): the
        session is halted on it here (its notice emitted), the later ones parked."""
        events = self.since.pop(sid, None)
        data = self._bases.pop(sid, None)
        if events is None:
            return None, []
        state = machine.new_state(sid) if data is None else SessionState.from_bytes(data)
        return reapply(machine, state, events)


def reapply(machine: SessionMachine, state: SessionState, events: list[AgentEvent],
            out: list[AgentEvent] | None = None) -> tuple[SessionState, list[AgentEvent]]:
    """Apply ``events`` again to ``state``; what they emit goes to ``out`` (None: dropped,
    it was emitted when they were first applied). One that an error escapes on (a defect
    that depends on more than the records) halts the session there, the later ones
    parked: what halting emits is returned, to be emitted."""
    notices: list[AgentEvent] = []
    for ev in events:
        base = state.to_bytes()  # (rare: a rebuild)
        try:
            state, emitted = machine.apply(state, ev)
        except BaseException as err:
            error = escaped(err)
            machine.evict(state.session_id)
            state, emitted = machine.halt(SessionState.from_bytes(base), ev, error)
            notices += emitted
            continue
        if out is not None:
            out += emitted
    return state, notices
