"""Noticing that this process stood still (SIGSTOP, a VM or GC pause, a throttled
container) or waited on the brokers for longer than its group's patience.

A process that stood still past the group's session timeout may have lost its partitions
without being told yet: librdkafka reports the loss only at its next heartbeat, and the
records it fetched before the pause are still there to be applied. So after a stall a role
writes nothing and starts no call until it has shown again that it still holds its
partitions (:meth:`.ownership.Ownership.confirmed`). A ticking thread measures the gaps;
a caller also counts a tick that is overdue now (it may run before the ticking thread
after a pause), and reports a wait of its own that was too long (a flush that outlasted a
network cut) with :meth:`StallWatch.note`. Example::

    stalls = StallWatch(threshold_s=0.75).start()
    checked = time.monotonic()
    ...
    if stalls.since(checked):      # a stall ended after the last check: check again
        ...
"""

from __future__ import annotations

import threading
import time


class StallWatch:
    """When this process last stood still for longer than ``threshold_s``."""

    def __init__(self, threshold_s: float, tick_s: float = 0.05) -> None:
        self.threshold_s = threshold_s
        self._tick = tick_s
        self._last_tick = time.monotonic()
        #: When the latest stall ended (a ``time.monotonic()`` value; 0.0: none yet).
        self.last = 0.0
        self.count = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> StallWatch:
        """Start the ticking thread (idempotent)."""
        if self._thread is None:
            self._last_tick = time.monotonic()
            self._thread = threading.Thread(target=self._run, name="eddies-stall-watch",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop ticking."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)
            self._thread = None

    def note(self, ended: float | None = None) -> None:
        """A stall (a wait of the caller's own) ended at ``ended`` (default: now)."""
        self.last = max(self.last, time.monotonic() if ended is None else ended)
        self.count += 1

    def since(self, t: float) -> bool:
        """Whether a stall ended after ``t`` (a ``time.monotonic()`` value), or one is
        going on now (the ticking thread is overdue)."""
        now = time.monotonic()
        if self._thread is not None and now - self._last_tick > self.threshold_s:
            self.note(now)
        return self.last > t

    def _run(self) -> None:
        while not self._stop.wait(self._tick):
            now = time.monotonic()
            if now - self._last_tick > self.threshold_s:
                self.note(now)
            self._last_tick = now


class StallGate:
    """What a role may do after a stall, or when it has not reached the brokers lately:
    nothing is written and no call started until the role has shown again that the group
    still counts it as a member (a re-commit: :meth:`confirmed`; call threads wait in
    :meth:`wait_sure`). A process cut off from the brokers does not stand still, and may
    not notice that its group dropped it: the brokers must also have answered a request
    (any: :meth:`reached`) sent less than ``lease_s`` ago (by default the stall threshold,
    half the group's session timeout); past that the role is unsure, and a request that
    fails or takes that long counts as a stall (a re-commit is due). Example::

        gate = StallGate(stalls)
        if gate.confirmation_due():          # a stall since the last re-commit
            began = time.monotonic()
            ... re-commit the offsets committed last ...
            gate.confirmed(began)
        elif gate.reach_due():               # a third of the lease gone
            ... any request to the brokers; gate.reached(sent_at) ...
        if not gate.unsure():
            ...                              # write, start calls
    """

    def __init__(self, stalls: StallWatch, lease_s: float | None = None) -> None:
        self.stalls = stalls
        self._lease_s = lease_s
        #: When membership was last shown (a ``time.monotonic()`` value).
        self.confirmed_at = time.monotonic()
        #: When the brokers last answered a request sent then (or membership was shown).
        self.reached_at = self.confirmed_at
        self._sure = threading.Event()  # set while no stall is unconfirmed
        self._sure.set()

    @property
    def lease_s(self) -> float:
        """How long an answer from the brokers counts."""
        return self.stalls.threshold_s if self._lease_s is None else self._lease_s

    def unsure(self) -> bool:
        """Whether this process stood still (or waited on the brokers too long) since
        membership was last shown, or the brokers' last answer is older than the lease."""
        if (self.stalls.since(self.confirmed_at)
                or time.monotonic() - self.reached_at > self.lease_s):
            self._sure.clear()
            return True
        return False

    def confirmation_due(self) -> bool:
        """Whether membership must be shown again (a stall since it last was, or no
        answer from the brokers within the lease)."""
        return self.unsure()

    def reach_due(self) -> bool:
        """Whether the brokers should be asked something now (a third of the lease gone)."""
        return time.monotonic() - self.reached_at > self.lease_s / 3

    def confirmed(self, since: float) -> None:
        """Membership was shown by an answer to a request sent at ``since`` (a
        ``time.monotonic()`` value taken before it was sent)."""
        self.confirmed_at = max(self.confirmed_at, since)
        self.reached(since)

    def reached(self, since: float) -> None:
        """The brokers answered a request sent at ``since`` (in time)."""
        self.reached_at = max(self.reached_at, since)
        if not self.unsure():
            self._sure.set()

    def wait_sure(self, timeout: float) -> bool:
        """Wait until no stall is unconfirmed; False after ``timeout`` seconds."""
        if not self.unsure():
            return True
        return self._sure.wait(timeout) and not self.unsure()
