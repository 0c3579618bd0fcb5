"""``RunLoop``: what the session machine's collaborators (sub-agent scopes, call outcomes)
ask of its run loop (:class:`eddies.engine.runs.Runs`) when what they decide makes actions
run, fail or finish. A Protocol, so they depend on this module and not on the loop, which
holds them."""

from __future__ import annotations

from typing import Protocol

from eddies.events import AgentEvent, ErrorInfo

from .state import CallRecord, Frame, Invocation, RunState, SessionState


class RunLoop(Protocol):
    def drive(self, state: SessionState, out: list[AgentEvent], frame: Frame | None = None) -> None:
        """Run the invocations of the current run (of sub-agent ``frame``) until one waits."""

    def enqueue(self, run: RunState, trigger: AgentEvent, frame: Frame | None = None) -> None:
        """Queue the actions ``trigger`` starts (in ``frame``, if given)."""

    def start_runs(self, state: SessionState, out: list[AgentEvent]) -> None:
        """Start queued inputs while the session has no run."""

    def fail(self, state: SessionState, run: RunState, inv: Invocation, error: ErrorInfo,
             out: list[AgentEvent], frame: Frame | None = None) -> None:
        """Action ``inv`` failed with ``error``: its run (or sub-agent) ends."""

    def finish(self, state: SessionState, run: RunState, failed: bool) -> None:
        """End ``run``: forget what is kept live for it."""

    def settled(self, state: SessionState, run: RunState, call_id: str, rec: CallRecord,
                out: list[AgentEvent]) -> None:
        """A call has its outcome: resume the action waiting for it once it may."""

    def arguments(self, state: SessionState, run: RunState, call_id: str, rec: CallRecord) -> str:
        """The arguments of a call in flight (replaying its action if need be)."""

    def remember_input(self, state: SessionState, ev: AgentEvent) -> bool:
        """False for an input or signal already applied."""


__all__ = ["RunLoop"]
