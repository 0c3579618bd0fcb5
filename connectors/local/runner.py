"""``LocalRunner``: the session machine and an executor in one process, no broker.

For unit tests, notebooks and debugging. Deterministic: work is done in FIFO order, and
logical time advances by one millisecond per submitted input; a timer (``ctx.sleep``) or
a signal's deadline fires when nothing else is left to do, moving logical time to its due
time at once (no real waiting). Example::

    runner = LocalRunner(MyAgent())
    runner.run([("s1", "hello"), ("s2", "hi")])   # -> the outputs, in emission order

Crash testing: ``step()`` does one unit of work; ``crash()`` drops every piece of
in-memory state except the journal; ``recover()`` rebuilds the sessions from it.
Determinism testing: ``LocalRunner(agent, interleave=random.Random(seed))`` does its work
in a random order (inputs, results and signals of a session interleaved as on a broker).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable
from typing import Any

from eddies.connectors.execution.held_requests import HeldRequests
from eddies.connectors.execution.recorded_calls import RecordedCalls
from eddies.connectors.local.executor import InProcessExecutor
from eddies.connectors.remote.discovery import discover_tools
from eddies.connectors.runtime.isolation import escaped, reapply
from eddies.engine import (
    Agent,
    AgentPlan,
    Journal,
    SessionMachine,
    SessionState,
    UnsupportedEventError,
    approval,
    halts,
)
from eddies.engine.state import TERMINAL
from eddies.events import (
    AgentEvent,
    ApprovalRequestEvent,
    DurableCallRequest,
    ErrorInfo,
    Identity,
    InputEvent,
    OutputEvent,
    SignalEvent,
)


class RunFailedError(RuntimeError):
    """A run ended with an error output; ``errors`` lists (session, run, ErrorInfo)."""

    def __init__(self, errors: list[tuple[str, int, ErrorInfo]]) -> None:
        lines = "; ".join(f"{s} run {r}: {e.type}: {e.message}" for s, r, e in errors)
        super().__init__(f"{len(errors)} run(s) failed: {lines}")
        self.errors = errors


class _Counted:
    """What a runner's machine and executor counted (an object of its own: handing them the
    runner's bound methods would make the runner a cycle, freed only by the collector)."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], float] = {}

    def metric(self, kind: str, name: str, _session: str, value: float) -> None:
        self.values[(kind, name)] = self.values.get((kind, name), 0) + value

    def hooks(self, counts: dict[str, float]) -> None:
        for key, n in counts.items():
            self.metric("hook", key, "", n)


class LocalRunner:
    """Runs an agent in-process with durable calls journaled in ``journal``."""

    def __init__(
        self, agent: Agent | AgentPlan, *, journal: Journal | None = None, snapshot_every: int = 64,
        recorded: RecordedCalls | None = None, interleave: random.Random | None = None,
    ) -> None:
        if not isinstance(agent, AgentPlan):
            discover_tools(agent)  # MCP and A2A tools' specs come from their servers
        self.plan = agent if isinstance(agent, AgentPlan) else AgentPlan.compile(agent)
        self.journal = journal if journal is not None else Journal()
        self.snapshot_every = snapshot_every
        self.recorded = recorded  # another run's outcomes, reused (fork, reprocess)
        #: Picks the next unit of work at random, when set (else the oldest): inputs,
        #: results and signals of a session then arrive in any order, as they may on a
        #: broker; an agent whose actions are deterministic runs without a journal mismatch
        #: in every one.
        self.interleave = interleave
        # What a downstream consumer has seen: it drops event ids it has already seen.
        self.history: list[AgentEvent] = []
        self.outputs: list[AgentEvent] = []
        self._seen: set[str] = set()
        self._inputs: dict[str, int] = {}
        self._clock = 0
        #: What was counted, as a worker's metrics count it: ``("counter", "ACTION.NAME")``
        #: (``ctx.metrics.inc``), ``("histogram", "ACTION.NAME")`` (the sum of what
        #: ``ctx.metrics.observe`` saw) and ``("hook", "HOOK.NAME")`` (what hooks counted,
        #: e.g. ``("hook", "pii.email")``: the e-mail addresses PiiRedaction redacted).
        self._counted = _Counted()
        self.metrics: dict[tuple[str, str], float] = self._counted.values
        self._boot()

    def _boot(self) -> None:
        self.machine = SessionMachine(self.plan, self._counted.metric)
        self.executor = InProcessExecutor(self.plan, self.journal, self.machine.callable_for,
                                          self.recorded, self._counted.hooks)
        self.states: dict[str, SessionState] = {}
        self._applies: dict[str, int] = {}
        self._work: deque[AgentEvent] = deque()
        self._held: HeldRequests[AgentEvent] = HeldRequests()  # until their due time

    # --- feeding ---------------------------------------------------------------------------
    def submit(
        self, session_id: str, value: Any, *, event_id: str | None = None, timestamp: int | None = None,
        identity: Identity | None = None,
    ) -> str:
        """Queue an input for ``session_id`` (from ``identity``: in process, as a worker
        admits one whose signature holds); returns its event id."""
        n = self._inputs.get(session_id, 0) + 1
        self._inputs[session_id] = n
        self._clock += 1
        eid = event_id or f"{session_id}:in{n}"
        ts = self._clock if timestamp is None else timestamp
        self._work.append(AgentEvent.external(session_id, InputEvent(value, identity), event_id=eid,
                                              timestamp=ts))
        return eid

    def signal(self, session_id: str, name: str, value: Any = None, *,
               event_id: str | None = None, timestamp: int | None = None) -> str:
        """Queue a signal ``name`` with ``value`` for ``session_id`` (what ``eddies signal``
        sends on Kafka); returns its event id."""
        self._clock += 1
        eid = event_id or f"{session_id}:sig{self._clock}"
        ts = self._clock if timestamp is None else timestamp
        self._work.append(AgentEvent.external(session_id, SignalEvent(name, value), event_id=eid,
                                              timestamp=ts))
        return eid

    def approve(self, session_id: str, signal: str, reason: str | None = None) -> str:
        """Approve the tool call that waits on ``signal`` (what ``eddies approve`` sends)."""
        return self.signal(session_id, signal, approval.answer(True, reason))

    def reject(self, session_id: str, signal: str, reason: str | None = None) -> str:
        """Reject the tool call that waits on ``signal``; the model sees ``reason``."""
        return self.signal(session_id, signal, approval.answer(False, reason))

    def resume(self, session_id: str) -> str:
        """Resume the halted session ``session_id`` (what ``eddies resume`` does): its run
        tries its input again. ValueError if it is not halted."""
        for ev in reversed(self.outputs):
            if ev.session_id == session_id:
                signal = halts.resume_signal(_output(ev))
                if signal is not None:
                    return self.signal(session_id, signal)
                break
        raise ValueError(f"session {session_id!r} is not halted")

    def approval_requests(self, session_id: str | None = None) -> list[ApprovalRequestEvent]:
        """The approval requests emitted so far (of one session), in order; each names the
        ``signal`` that answers it. Example::

            [ask] = runner.approval_requests("s1")
            runner.approve("s1", ask.signal)
            runner.run_until_idle()
        """
        return [e.payload for e in self.history if isinstance(e.payload, ApprovalRequestEvent)
                and session_id in (None, e.session_id)]

    def step(self) -> bool:
        """Do one unit of work (apply one event, or perform one call); False when idle.
        With nothing else to do, the first held request comes due (logical time jumps)."""
        if not self._work:
            first = self._held.pop_first()
            if first is None:
                return False
            due, request = first
            if self._waited_for(request):  # else: a deadline of a finished run, say
                self._clock = max(self._clock, due)
                self._work.append(self.executor.execute(request))
            return True
        work = self._work
        if self.interleave is None or len(work) == 1:
            item = work.popleft()
        else:
            at = self.interleave.randrange(len(work))
            work.rotate(-at)
            item = work.popleft()
            work.rotate(at)
        payload = item.payload
        if isinstance(payload, DurableCallRequest):
            if payload.not_before is not None and payload.not_before > self._clock:
                self._held.hold(payload.not_before, (payload.call_id, payload.attempt), item)
            else:
                self._work.append(self.executor.execute(item))
        else:
            self._apply(item)
        return True

    def has_work(self) -> bool:
        """Whether anything but waits (timers, deadlines, signals) is left to do."""
        return bool(self._work)

    def run_until_idle(self, max_steps: int = 10_000_000) -> None:
        """Step until there is no work left."""
        for _ in range(max_steps):
            if not self.step():
                return
        raise RuntimeError(f"still busy after {max_steps} steps")

    def run_until_waiting(self, max_steps: int = 10_000_000) -> None:
        """Step until nothing is left but waits (timers, deadlines, signals, approvals):
        unlike :meth:`run_until_idle`, logical time does not jump to a due time."""
        for _ in range(max_steps):
            if not self._work:
                return
            self.step()
        raise RuntimeError(f"still busy after {max_steps} steps")

    def run(self, inputs: Iterable[tuple[str, Any]]) -> list[Any]:
        """Submit ``(session_id, input)`` pairs, run to completion, return the outputs in
        the order of the inputs that started their runs (whatever order the runs finished
        in; ``outputs`` keeps that order), each run's in the order it sent them::

            LocalRunner(agent).run([("s1", "a"), ("s2", "b")])   # [s1's output, s2's output]

        Raises :class:`RunFailedError` if a run failed (its error output is in ``outputs``).
        """
        start, seen = len(self.outputs), len(self.history)
        pairs = list(inputs)
        ids = [self.submit(session_id, value) for session_id, value in pairs]
        self.run_until_idle()
        finished = self.outputs[start:]
        # Runs of one session go in order: when the outputs' sessions come as the inputs'
        # did, each of another run, they are in order already (the common case: no sort).
        if [o.session_id for o in finished] != [sid for sid, _ in pairs] \
                or len({(o.session_id, o.run) for o in finished}) != len(finished):
            finished = self._in_input_order(finished, ids, seen)
        produced = [(o, _output(o)) for o in finished]
        errors = [(o.session_id, o.run, p.error) for o, p in produced if p.error is not None]
        if errors:
            raise RunFailedError(errors)
        return [p.output for _, p in produced]

    def _in_input_order(self, finished: list[AgentEvent], ids: list[str], seen: int) -> list[AgentEvent]:
        """``finished`` (output events) ordered by the input (event ids ``ids``, applied
        since history entry ``seen``) whose run sent each, each run's in its order; a run
        none of them started (one resumed, say) after them."""
        order = {eid: i for i, eid in enumerate(ids)}
        place = {(ev.session_id, ev.run): order[ev.event_id] for ev in self.history[seen:]
                 if not ev.scope and ev.event_id in order and isinstance(ev.payload, InputEvent)}
        keyed = [(place.get((o.session_id, o.run), len(ids)), j, o) for j, o in enumerate(finished)]
        return [o for _, _, o in sorted(keyed, key=lambda t: t[:2])]

    def outputs_for(self, session_id: str) -> list[Any]:
        """Output values of one session, in order."""
        return [_output(o).output for o in self.outputs if o.session_id == session_id]

    # --- crash and recovery ------------------------------------------------------------------
    def crash(self) -> None:
        """Lose all in-memory state (sessions, queued work, live callables); keep the journal.

        Inputs submitted but not yet applied are lost too, as records not yet consumed
        would be re-read from Kafka; re-submit them (same event ids) to model that.
        """
        self.executor.close()
        self._boot()

    def recover(self) -> None:
        """Rebuild every journaled session and re-send the requests still without outcome."""
        for sid in self.journal.sessions():
            state, events = self.journal.last_saved(self.machine, sid)
            emitted: list[AgentEvent] = []
            state, halted = reapply(self.machine, state, events, emitted)
            self._deliver(emitted + halted)
            state, requests = self.machine.resume(state)
            self.states[sid] = state
            self._work.extend(requests)

    def take_over(self, events: Iterable[AgentEvent]) -> None:
        """Apply recorded external events (inputs, signals, call results) in their order,
        making no call: the calls they answer were made already. Then queue the calls left
        without an answer, so that stepping goes on live from there (``eddies fork``)."""
        sessions: dict[str, None] = {}
        for ev in events:
            self._apply(ev, perform=False)
            sessions[ev.session_id] = None
        for sid in sessions:
            state, requests = self.machine.resume(self.states[sid])
            self.states[sid] = state
            self._work.extend(requests)

    # --- internals -------------------------------------------------------------------------
    def _waited_for(self, request: AgentEvent) -> bool:
        """Whether the running run of the request's session still waits for its outcome
        (a held request of a finished run, or of a wait a signal answered, moves no clock)."""
        payload = request.payload
        assert isinstance(payload, DurableCallRequest)
        state = self.states.get(request.session_id)
        run = None if state is None else state.run
        rec = None if run is None else run.calls.get(payload.call_id)
        return rec is not None and rec.status not in TERMINAL and rec.attempt == payload.attempt

    def _apply(self, event: AgentEvent, perform: bool = True) -> None:
        sid = event.session_id
        self.journal.append(event)  # write-ahead: the log is what recovery re-applies
        state = self.states.get(sid)
        if state is None:
            state = self.machine.new_state(sid)
        try:
            state, emitted = self.machine.apply(state, event)
        except UnsupportedEventError:
            raise
        except BaseException as err:  # a defect: this session halts, the others go on
            state, emitted = self._halt(sid, event, escaped(err))
        self.states[sid] = state
        n = self._applies.get(sid, 0) + 1
        self._applies[sid] = n
        if n % self.snapshot_every == 0:
            self.journal.snapshot(state)
        if perform:
            for ev in emitted:
                if isinstance(ev.payload, DurableCallRequest) and ev.payload.for_executor:
                    self._work.append(ev)
        self._deliver(emitted)

    def _halt(self, sid: str, event: AgentEvent, error: ErrorInfo) -> tuple[SessionState, list[AgentEvent]]:
        """``error`` escaped the machine applying ``event``: the session halts on its last
        trusted state, which its journal has (its snapshot and the events logged since,
        ``event`` last: it was logged before it was applied)."""
        machine = self.machine
        machine.evict(sid)
        state, events = self.journal.last_saved(machine, sid)
        state, emitted = reapply(machine, state, events[:-1])
        state, halted = machine.halt(state, event, error)
        return state, emitted + halted

    def _deliver(self, emitted: list[AgentEvent]) -> None:
        for ev in emitted:
            if ev.event_id in self._seen:
                continue
            self._seen.add(ev.event_id)
            self.history.append(ev)
            if isinstance(ev.payload, OutputEvent) and not ev.scope:  # a sub-agent's is its caller's
                self.outputs.append(ev)


def _output(event: AgentEvent) -> OutputEvent:
    payload = event.payload
    assert isinstance(payload, OutputEvent)
    return payload
