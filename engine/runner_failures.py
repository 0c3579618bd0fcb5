"""Failures a runner asks the session machine for, when it cannot keep or write what the
machine produced: one run failed (an event it could not write), or everything a session
holds (a snapshot larger than a record may be). A part of
:class:`eddies.engine.machine.SessionMachine` (mixed into it). Example::

    state, emitted = machine.fail_run(state, 3, ErrorInfo("TooLarge", "..."))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eddies.events import AgentEvent, ErrorInfo, OutputEvent

from .state import RunState, SessionState

if TYPE_CHECKING:
    from eddies.events import Event


class RunnerFailures:
    """``fail_run`` and ``fail_session``, for the session machine."""

    if TYPE_CHECKING:  # provided by SessionMachine
        def _emit(self, state: SessionState, run: RunState, payload: Event, causation: str | None,
                  action: str | None, out: list[AgentEvent],
                  scope: tuple[str, ...] = ()) -> AgentEvent: ...
        def _finish(self, state: SessionState, run: RunState, failed: bool) -> None: ...
        def _start_runs(self, state: SessionState, out: list[AgentEvent]) -> None: ...

    def fail_run(self, state: SessionState, run_number: int, error: ErrorInfo,
                 cause: str | None = None) -> tuple[SessionState, list[AgentEvent]]:
        """Fail run ``run_number``, for a runner that could not write one of its events
        (``cause``: that event's id): a failed OutputEvent carrying ``error``. A run still
        in progress ends there (its calls' late results are ignored) and the next queued
        input starts; a finished one gets the failed OutputEvent after its other events.
        Example::

            state, emitted = machine.fail_run(state, 3, ErrorInfo("TooLarge", "..."))
        """
        out: list[AgentEvent] = []
        run = state.run
        if run is not None and run.number == run_number:
            inv = run.active
            self._emit(state, run, OutputEvent(None, error), cause or run.input_id,
                       inv.action if inv is not None else None, out)
            self._finish(state, run, failed=True)
            self._start_runs(state, out)
        else:
            self._emit(state, RunState(run_number, ""), OutputEvent(None, error), cause, None, out)
        return state, out

    def fail_session(self, state: SessionState, error: ErrorInfo, *,
                     clear_memory: bool = False) -> tuple[SessionState, list[AgentEvent]]:
        """Fail what the session holds, for a runner that cannot keep or save it as it is
        (its snapshot or an event it emitted is larger than a record may be).

        The running run and every queued input end with a failed OutputEvent carrying
        ``error``; their calls' late results are ignored. With ``clear_memory`` the
        short-term memory is emptied too (a failed OutputEvent of the last run says so when
        nothing else was failed). The session takes new inputs afterwards. Example::

            state, emitted = machine.fail_session(state, ErrorInfo("TooLarge", "..."))
        """
        out: list[AgentEvent] = []
        run = state.run
        if run is not None:
            inv = run.active
            cause = inv.trigger.event_id if inv is not None else run.input_id
            self._emit(state, run, OutputEvent(None, error), cause,
                       inv.action if inv is not None else None, out)
            self._finish(state, run, failed=True)
        while state.queue:
            inp = state.queue.popleft()
            run = RunState(inp.run, inp.event_id)
            state.run = run
            self._emit(state, run, OutputEvent(None, error), inp.event_id, None, out)
            self._finish(state, run, failed=True)
        if clear_memory:
            state.memory.clear()
            if not out:
                last = RunState(state.runs, "")
                self._emit(state, last, OutputEvent(None, error), None, None, out)
        return state, out


__all__ = ["RunnerFailures"]
