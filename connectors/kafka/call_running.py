"""Making the calls a Kafka executor decided to make (:mod:`.executor`): sync ones on a
bounded pool of call threads, those whose client is asynchronous (a model connection's
``chat_async``) as tasks on a call loop of their own, thousands at once.

Before it starts, a call waits for its provider (its limits, a Retry-After: see
:mod:`eddies.connectors.execution.provider_gates`), then checks again that its partition is
still owned here and that its outcome was not journaled meanwhile (of a partition just
gained from another process, once the journal is caught up: :mod:`.catching_up`); a
non-idempotent one is claimed (:mod:`.claiming`). Once made, its outcome is journaled and sent. Each request
ends as a :data:`.timekeeping.CallDone` on the executor's ``done`` queue. Example::

    runner = CallRunner(ctx=ctx, resolver=None, claims=claims, tail=tail, deadlines=deadlines,
                        done=done, lock=lock, send_result=send_result)
    if (call := runner.asynchronous(request)) is not None:
        runner.on_loop(request, part, offset, call)
    else:
        runner.on_thread(request, part, offset)
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from eddies.connectors.execution.call_deadlines import CallDeadlines, within
from eddies.connectors.execution.call_hooks import CallAdmission
from eddies.connectors.execution.call_loop import CallLoop
from eddies.connectors.execution.calls import CallPerformer, LoopCall, Resolver, result_event, writable_result
from eddies.connectors.execution.provider_gates import ProviderGates
from eddies.connectors.journal.reading import CallRef
from eddies.connectors.kafka.catching_up import CatchUp
from eddies.connectors.kafka.claiming import CallClaims
from eddies.connectors.kafka.journal_tail import JournalTail
from eddies.connectors.kafka.roles import RoleContext
from eddies.connectors.kafka.timekeeping import CallDone
from eddies.connectors.models.provider_limits import ProviderBusyError, estimated_tokens
from eddies.connectors.remote.error_classes import describe_error
from eddies.connectors.runtime.records import journal_partition
from eddies.connectors.runtime.stream_topic import topic_publisher
from eddies.connectors.streaming.progress import StreamProgress, asked, ended
from eddies.events import AgentEvent, CallStatus, ChatMessage, DurableCallRequest

if TYPE_CHECKING:
    from eddies.connectors.observability.prometheus import WorkerMetrics

log = logging.getLogger("eddies.worker")

# A call for a call thread: the request, its APP.requests partition and offset.
_Item = tuple[AgentEvent, int | None, int]

class CallRunner:
    """The call threads (``executor_concurrency``, and spares in place of abandoned ones)
    and the call loop (``max_calls_in_flight`` calls at once) of one executor."""

    def __init__(self, *, ctx: RoleContext, resolver: Resolver | None, claims: CallClaims,
                 tail: JournalTail, deadlines: CallDeadlines[tuple[AgentEvent, int | None, int]],
                 done: queue.SimpleQueue[CallDone], lock: threading.Lock,
                 send_result: Callable[[AgentEvent], None]) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.counters = ctx.counters
        self.metrics: WorkerMetrics | None = ctx.metrics
        self.claims = claims
        self.tail = tail
        self.deadlines = deadlines
        self.send_result = send_result
        self._done = done
        self._lock = lock  # the executor's: guards the thread list's spares
        #: Makes each call thread's performer (a test may make its own).
        counted = None if ctx.metrics is None else ctx.metrics.hook_counted
        self.make_performer: Callable[[], Any] = lambda: CallPerformer(ctx.plan, resolver, counted)
        self._per_thread = threading.local()
        # Calls run on threads fed by one queue (lighter per call than concurrent.futures:
        # no future, no callback; a failure stops the worker).
        self._calls: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._performing: set[int] = set()  # the call threads in perform() now, by ident
        self._spare = 0  # call threads started in place of ones held by abandoned calls
        self._loop: CallLoop | None = None  # made at the first call with an async client
        self._async_performer = CallPerformer(ctx.plan, resolver, counted)
        #: Whether each call may be made, asked of the hooks that decide it here.
        self.admission = CallAdmission(ctx.plan, counted)
        self._hooked = ctx.plan.any_hooks
        self._claimers: ThreadPoolExecutor | None = None  # made at the loop's first claim
        #: Each provider's limits and Retry-After, on the call loop.
        self.gates = ProviderGates()
        #: Idempotent calls of partitions gained from another process catch up first.
        self.catch_up = CatchUp(tail)
        #: The idempotent calls being made now, and their journal partitions: those of a
        #: partition revoked are taken (:meth:`take_asking`) and handed over to its new owner
        #: (CallClaims.hand_over). See :meth:`_start_asking`.
        self._asking: dict[CallRef, int] = {}
        #: Where calls say they started and ended, and models write their answers as they
        #: come: APP.stream, when a model of the agent streams.
        self.streams: StreamProgress | None = None
        if ctx.plan.streams():
            producer = ctx.clients.stream_producer()
            self.streams = StreamProgress(topic_publisher(producer, ctx.names.stream), producer.flush)

    # --- handing calls over -------------------------------------------------------------
    def asynchronous(self, request: AgentEvent) -> LoopCall | None:
        """The call for the call loop when its client is asynchronous (None: a thread's)."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        if self.streams is None:
            return self._async_performer.asynchronous(req, request.scope)
        stream = self.streams.stream(request)
        call = self._async_performer.asynchronous(req, request.scope, stream)
        return None if call is None else call._replace(stream=stream)

    def on_loop(self, request: AgentEvent, part: int | None, offset: int, call: LoopCall) -> None:
        """Make the call on the call loop."""
        self._call_loop().submit(lambda: self._perform_async(request, part, offset, call))

    def on_thread(self, request: AgentEvent, part: int | None, offset: int) -> None:
        """(Under the executor's lock.) Make the call on a call thread."""
        if len(self._threads) < self.settings.executor_concurrency + self._spare:
            self._start_thread()
        self._calls.put((request, part, offset))

    def recut(self, share: float) -> None:
        """This executor owns ``share`` of the app's partitions: its part of every
        provider's limits."""
        if self._loop is not None:
            self._loop.call(lambda: self.gates.recut(share))
        else:
            self.gates.share = share

    def replace_thread(self) -> None:
        """(Under the executor's lock.) A call thread in place of one an abandoned call holds."""
        self._spare += 1
        self._start_thread()

    def take_asking(self, partitions: set[int]) -> list[tuple[CallRef, int]]:
        """The idempotent calls being made now of journal ``partitions`` (no longer owned
        here: the caller disowned them first), with theirs, taken for a hand-over."""
        asking = self._asking
        return [(ref, jpart) for ref, jpart in list(asking.items())
                if jpart in partitions and asking.pop(ref, None) is not None]

    def _start_asking(self, ref: CallRef, jpart: int) -> bool:
        """Whether an idempotent call of ``jpart`` is made now, noted as being made if so.
        Nothing may come between this and the request leaving. Without a lock (a lock here
        cost 0.4% of the worker's hot path): the call is noted, then its partition checked;
        a revoke disowns the partition, then takes the calls noted (each one popped, by it
        or by the call, never both). Found disowned, the call is dropped if it can take
        itself back, and made if the revoke took it: that one is handed over already."""
        self._asking[ref] = jpart
        if self.claims.owns(jpart) or self._asking.pop(ref, None) is None:
            return True
        self.counters.inc("calls_dropped")
        return False

    @property
    def running(self) -> int:
        """How many calls are being made now, on call threads and the call loop."""
        return len(self._performing) + (0 if self._loop is None else self._loop.running)

    def close(self) -> None:
        """Wait for the calls being made to end (those queued, or waiting for their
        provider, are dropped: the executor owns no partition any more)."""
        for _ in self._threads:
            self._calls.put(None)
        for thread in self._threads:
            thread.join()
        if self._loop is not None:
            self._loop.call(lambda: self.gates.recut(0.0))  # the waiting find they are not wanted
            self._loop.close()
        if self._claimers is not None:
            self._claimers.shutdown()
        if self.streams is not None:
            self.streams.close()

    def _call_loop(self) -> CallLoop:
        if self._loop is None:
            self._loop = CallLoop(self.settings.max_calls_in_flight, self._failed)
            share = self.gates.share
            self._loop.call(lambda: self.gates.recut(share))
        return self._loop

    def _failed(self, err: BaseException) -> None:
        log.error("executor task failed: %r", err)  # a bug or a broken producer: stop the worker
        self.ctx.fail(err)

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._thread_loop, daemon=True,
                                  name=f"eddies-call-{len(self._threads)}")
        thread.start()
        self._threads.append(thread)

    # --- call threads ---------------------------------------------------------------------
    def _thread_loop(self) -> None:
        me = threading.get_ident()
        while (item := self._calls.get()) is not None:
            try:
                self._performing.add(me)
                try:
                    self.perform(*item)
                finally:
                    self._performing.discard(me)
                if getattr(self._per_thread, "late", False):
                    self._per_thread.late = False
                    with self._lock:  # its place was taken when its call was abandoned
                        if self._spare > 0:
                            self._spare -= 1
                            self._threads.remove(threading.current_thread())
                            return
            except BaseException as err:  # a bug or a broken producer: stop the worker
                self._failed(err)

    def perform(self, request: AgentEvent, part: int | None, offset: int) -> None:
        """Make one call on the calling thread (the pool's threads do; a broker-less
        harness may too): claimed first if not idempotent, its outcome journaled and sent."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        ref = (req.call_id, req.attempt)
        jpart = journal_partition(request.session_id, self.settings.partitions)
        settled = False  # a request dropped or watched stays unsettled
        again = None  # a request the executor's loop dispatches again
        try:
            if not self.claims.may_start(jpart):  # revoked while queued: its new owner re-issues it
                self.counters.inc("calls_dropped")
                return
            if not req.idempotent:
                verdict = self.claims.claim(request, jpart, part, offset)
                if verdict == "unknown":
                    again = request
                if verdict != "perform":
                    settled = verdict == "answered"
                    return
            elif self.catch_up.needed(jpart):
                self.catch_up.wait(jpart)
                if not self.claims.may_start(jpart):  # revoked while it caught up
                    self.counters.inc("calls_dropped")
                    return
            if req.idempotent:
                if self._answered_meanwhile(request, ref):
                    settled = True
                    return
                if not self._start_asking(ref, jpart):  # revoked meanwhile
                    return
            self._make(request, req, ref, part, offset)
            settled = True
        finally:
            self._asking.pop(ref, None)
            self._done.put((part, offset, ref, settled, again))

    def _answered_meanwhile(self, request: AgentEvent, ref: CallRef) -> bool:
        """Whether an idempotent call has an outcome in the journal by the time it would
        start (it waited for a thread, a place or its provider after it was decided: the
        worker that had its session before may have journaled one since); if so, that
        outcome is sent, and the call is not made again."""
        with self.tail.lock:
            first = self.tail.view.outcomes.get(ref)
        if first is None:
            return False
        self.send_result(self.claims.recorded(request, first))
        self.counters.inc("results_resent")
        return True

    def _make(self, request: AgentEvent, req: DurableCallRequest, ref: CallRef,
              part: int | None, offset: int) -> None:
        performer = getattr(self._per_thread, "performer", None)
        if performer is None:
            performer = self._per_thread.performer = self.make_performer()
        if req.timeout_ms:
            self.deadlines.start(ref, req.timeout_ms, (request, part, offset))
        stream = None if self.streams is None else self.streams.started(request)
        began = time.perf_counter()
        returned = None
        try:
            returned = self.admission.refused(request) if self._hooked else None
            if returned is None:  # not refused by a hook that decides here
                returned = (performer.perform(req, request.scope) if stream is None
                            else performer.perform(req, request.scope, stream))
            result = performer.outcome(request, returned)
        except Exception as err:
            result = result_event(request, CallStatus.ERROR, "null", describe_error(err))
        if stream is not None:
            ended(stream, result)
        if self.metrics is not None:  # what it took, also if abandoned at its timeout meanwhile
            self.metrics.call_performed(req, time.perf_counter() - began, returned)
        if req.timeout_ms and not self.deadlines.finish(ref):  # answered as timed out already
            self._per_thread.late = True
            self.counters.inc("results_late")
            return
        result, data = writable_result(request, result, self.settings.max_record_bytes)
        self.counters.inc("calls_performed")
        self.claims.outcome(request, ref, result, data)

    # --- the call loop --------------------------------------------------------------------
    async def _perform_async(self, request: AgentEvent, part: int | None, offset: int,
                             call: LoopCall) -> None:
        """:meth:`perform` for a coroutine, on the call loop. It waits, not started yet, for
        its provider's gate (limits, Retry-After), then for a place on the loop; a
        non-idempotent call is claimed then (on a claim thread: a claim reads the journal
        back), so a crash while it waits leaves no started mark. Its timeout_ms counts
        from its start and cancels it (a task, unlike a thread, can be stopped), answered
        as the Timekeeper answers a thread's call past its timeout."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        ref = (req.call_id, req.attempt)
        jpart = journal_partition(request.session_id, self.settings.partitions)
        gate = self.gates.gate(call.provider, call.limits)
        tokens = estimated_tokens(req.args) if gate.limits.tokens_per_minute else 0
        claims = self.claims
        settled = entered = False
        returned = again = None
        try:
            if gate.held():
                self.counters.inc("calls_held_by_provider")
            busy: ProviderBusyError | None = None
            try:
                waited = await gate.enter(tokens, lambda: claims.owns(jpart))
            except ProviderBusyError as err:
                waited, busy = 0.0, err
            entered = waited is not None and busy is None
            if waited is None or not await claims.may_start_soon(jpart):
                call.call.close()  # revoked while it waited: its new owner re-issues it
                self.counters.inc("calls_dropped")
                return
            if waited > 0:
                self.counters.inc("calls_waited_for_provider")
            began = time.perf_counter()
            if busy is not None:
                call.call.close()
                if self._answered_meanwhile(request, ref):
                    settled = True
                    return
                result = result_event(request, CallStatus.ERROR, "null", describe_error(busy))
                self.counters.inc("calls_over_provider_wait")
            else:
                async with self._call_loop().place():
                    if not req.idempotent:
                        verdict = await asyncio.get_running_loop().run_in_executor(
                            self._claim_threads(), claims.claim, request, jpart, part, offset)
                        if verdict != "perform":
                            call.call.close()
                            again = request if verdict == "unknown" else None
                            settled = verdict == "answered"
                            return
                    else:
                        # Revoked while it waited for its place or caught up: the new owner
                        # makes it (the old one would ask the provider beside it).
                        if self.catch_up.needed(jpart):
                            await self.catch_up.wait_async(jpart)
                        if not await claims.may_start_soon(jpart):
                            call.call.close()
                            self.counters.inc("calls_dropped")
                            return
                        if self._answered_meanwhile(request, ref):  # checked as late as it can be
                            call.call.close()
                            settled = True
                            return
                        if not self._start_asking(ref, jpart):  # revoked meanwhile
                            call.call.close()
                            return
                    began = time.perf_counter()
                    result, returned = await self._made(request, req, call, gate.hold, waited)
            if self.metrics is not None:
                self.metrics.call_performed(req, time.perf_counter() - began, returned)
            result, data = writable_result(request, result, self.settings.max_record_bytes)
            self.counters.inc("calls_performed")
            claims.outcome(request, ref, result, data)
            settled = True
        finally:
            self._asking.pop(ref, None)
            if entered:
                gate.leave(tokens, _tokens_used(returned) if settled else None)
            self._done.put((part, offset, ref, settled, again))

    def _claim_threads(self) -> ThreadPoolExecutor:
        """The threads that claim the call loop's non-idempotent calls: as many as the
        call threads, which claimed them before they were the loop's."""
        if self._claimers is None:
            self._claimers = ThreadPoolExecutor(self.settings.executor_concurrency,
                                                thread_name_prefix="eddies-claim")
        return self._claimers

    def _timed_out(self) -> None:
        self.counters.inc("calls_timed_out")

    async def _made(self, request: AgentEvent, req: DurableCallRequest, call: LoopCall,
                    hold: Callable[[float], None], waited: float) -> tuple[AgentEvent, Any]:
        """Make the call within its timeout: its result event, and what it returned (a
        model's reply notes how long it ``waited`` for its provider: the trace shows it)."""
        if call.stream is not None:
            call.stream.started(asked(req))
        try:
            returned: Any = None
            if self._hooked and self.admission.admits(request.scope):  # a hook decides first
                returned = await asyncio.get_running_loop().run_in_executor(
                    self._claim_threads(), self.admission.refused, request)
            if returned is not None:
                call.call.close()
            else:
                returned = await within(call.call, req, self._timed_out)
            if waited > 0 and type(returned) is ChatMessage:
                usage = returned.extra_args.get("usage")
                if type(usage) is dict:
                    usage["waited_ms"] = round(waited * 1000)
            made = self._async_performer.outcome(request, returned), returned
        except Exception as err:
            error = describe_error(err)
            if error.http_status in (429, 503) and error.retry_after_ms:
                # The provider said when to come back: every call to it waits till then.
                hold(error.retry_after_ms / 1000)
            made = result_event(request, CallStatus.ERROR, "null", error), None
        if call.stream is not None:
            ended(call.stream, made[0])
        return made


def _tokens_used(returned: Any) -> int | None:
    """The tokens a model's reply says its call took (input and output), if it says."""
    if type(returned) is not ChatMessage:
        return None
    usage = returned.extra_args.get("usage")
    if type(usage) is not dict:
        return None
    return int(usage.get("prompt_tokens", 0) or 0) + int(usage.get("completion_tokens", 0) or 0)
