"""Cutting one worker off the broker: each worker runs in a network namespace of its own,
where a forwarder listens on the broker's advertised address and relays every connection
over a Unix socket (files cross namespaces) to a relay here, which connects to the broker.
The relay can drop that worker's connections (and refuse new ones), blackhole them (hold
every byte, as a network that lost its route does, until the cut ends) or delay them.

A TCP proxy in front of the broker would be bypassed: clients connect to the address the
broker advertises, not to the one they were given (../shared/BROKER-NOTES.md). Needs root
(``unshare -n``); only namespaces made here, only loopback addresses.

Example::

    relay = Relay(broker_port).start()
    ns = Namespace.make(broker_port, relay.listen("w0"))
    popen = subprocess.Popen(ns.wrap([sys.executable, "-m", "eddies", "worker", ...]))
    relay.cut("w0", "blackhole", seconds=6)
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

MODES = ("drop", "blackhole", "delay")


def available(bootstrap: str = "") -> str | None:
    """Why network cuts cannot be made here, for a broker at ``bootstrap`` ("": an
    embedded one) (None: they can)."""
    host = bootstrap.split(",")[0].rpartition(":")[0]
    if bootstrap and host not in ("127.0.0.1", "localhost"):
        return f"the broker {bootstrap} is not on this machine's loopback"
    if os.geteuid() != 0:
        return "network cuts need root (unshare -n)"
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return f"network cuts need {tool}"
    return None


@dataclass
class _Link:
    """One relayed connection: the worker's side (Unix) and the broker's (TCP)."""

    inner: socket.socket
    outer: socket.socket
    pending: dict[socket.socket, bytearray] = field(default_factory=dict)
    held: bool = False


@dataclass
class _Worker:
    name: str
    listener: socket.socket
    links: list[_Link] = field(default_factory=list)
    mode: str = "open"
    until: float = 0.0
    delay_s: float = 0.0


class Relay:
    """Relays workers' broker connections (see the module docstring); one thread."""

    def __init__(self, broker_port: int) -> None:
        self.broker_port = broker_port
        # Short: a Unix socket's path has at most 107 bytes.
        self.directory = Path(tempfile.mkdtemp(prefix="chaos-net-"))
        self._sel = selectors.DefaultSelector()
        self._workers: dict[str, _Worker] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: (worker, mode, start, seconds) of every cut made.
        self.cuts: list[tuple[str, str, float, float]] = []
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))

    def start(self) -> Relay:
        self._thread = threading.Thread(target=self._run, name="chaos-relay", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(5)

    def listen(self, name: str) -> Path:
        """The Unix socket that ``name``'s forwarder connects to (made once per name)."""
        path = self.directory / f"{name}.sock"
        with self._lock:
            if name not in self._workers:
                if path.exists():
                    path.unlink()
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listener.bind(str(path))
                # A worker opens hundreds of model-call connections at once in a +slow round.
                listener.listen(1024)
                listener.setblocking(False)
                self._workers[name] = _Worker(name, listener)
                self._sel.register(listener, selectors.EVENT_READ, ("accept", name))
        self._wake()
        return path

    def cut(self, name: str, mode: str, seconds: float, delay_s: float = 0.3) -> None:
        """Cut ``name`` off for ``seconds``: "drop" (connections closed, new ones refused),
        "blackhole" (nothing passes, connections stay open) or "delay" (each chunk waits
        ``delay_s``)."""
        assert mode in MODES, mode
        with self._lock:
            w = self._workers[name]
            w.mode, w.until, w.delay_s = mode, time.monotonic() + seconds, delay_s
            self.cuts.append((name, mode, time.time(), seconds))
            if mode == "drop":
                for link in w.links:
                    self._close(link)
                w.links.clear()
        self._wake()

    def cut_now(self, name: str) -> bool:
        """Whether ``name`` is cut off now."""
        w = self._workers.get(name)
        return w is not None and w.mode != "open"

    # --- the relay's thread ---------------------------------------------------------------
    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, mask in self._sel.select(timeout=0.05):
                what, ref = key.data
                if what == "wake":
                    self._wake_r.recv(4096)
                elif what == "accept":
                    self._accept(ref)
                else:
                    sock: socket.socket = key.fileobj  # type: ignore[assignment]
                    if mask & selectors.EVENT_WRITE:
                        self._flush(ref[1], sock)
                    if mask & selectors.EVENT_READ:
                        self._pump(ref, sock)
            self._tick()
        for w in self._workers.values():
            for link in w.links:
                self._close(link)
            w.listener.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _tick(self) -> None:
        now = time.monotonic()
        with self._lock:
            for w in self._workers.values():
                if w.mode != "open" and now >= w.until:
                    w.mode = "open"
                    for link in w.links:  # what a blackhole held goes on now
                        self._release(w, link)
                        for sock in (link.inner, link.outer):
                            self._flush(link, sock)

    def _accept(self, name: str) -> None:
        w = self._workers[name]
        try:
            inner, _ = w.listener.accept()
        except BlockingIOError:
            return
        if w.mode == "drop":
            inner.close()
            return
        try:
            outer = socket.create_connection(("127.0.0.1", self.broker_port), timeout=2)
        except OSError:
            inner.close()
            return
        for sock in (inner, outer):
            sock.setblocking(False)
        link = _Link(inner, outer)
        w.links.append(link)
        self._sel.register(inner, selectors.EVENT_READ, ("pump", (w, link)))
        self._sel.register(outer, selectors.EVENT_READ, ("pump", (w, link)))

    def _pump(self, ref: tuple[_Worker, _Link], sock: socket.socket) -> None:
        w, link = ref
        if w.mode == "blackhole":  # left unread: the kernel's buffers fill, the sender waits
            self._hold(link)
            return
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            # The peer is done (an HTTP/1.0 answer ends so): what it sent last goes on first.
            self._drain(link)
            self._close(link)
            if link in w.links:
                w.links.remove(link)
            return
        if w.mode == "delay":
            time.sleep(min(w.delay_s, 1.0))
        other = link.outer if sock is link.inner else link.inner
        link.pending.setdefault(other, bytearray()).extend(data)
        self._flush(link, other)

    def _flush(self, link: _Link, sock: socket.socket) -> None:
        """Send what ``sock`` takes now; the rest waits for it to be writable (one slow
        reader must not hold the relay up for every worker)."""
        buf = link.pending.get(sock)
        while buf:
            try:
                sent = sock.send(buf)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                buf.clear()
                break
            del buf[:sent]
        if not link.held:
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if buf else 0)
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._sel.modify(sock, events, self._sel.get_key(sock).data)

    def _drain(self, link: _Link) -> None:
        """Send what ``link`` still holds for either side, waiting for it up to a second."""
        for sock, buf in link.pending.items():
            if not buf:
                continue
            with contextlib.suppress(OSError):
                sock.settimeout(1.0)
                sock.sendall(bytes(buf))
            buf.clear()

    def _hold(self, link: _Link) -> None:
        """Stop reading ``link`` (so the selector does not spin on it)."""
        if link.held:
            return
        link.held = True
        for sock in (link.inner, link.outer):
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(sock)

    def _release(self, w: _Worker, link: _Link) -> None:
        if not link.held:
            return
        link.held = False
        for sock in (link.inner, link.outer):
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._sel.register(sock, selectors.EVENT_READ, ("pump", (w, link)))

    def _close(self, link: _Link) -> None:
        for sock in (link.inner, link.outer):
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(sock)
            with contextlib.suppress(OSError):
                sock.close()


@dataclass
class Namespace:
    """A network namespace with its loopback up and a forwarder on the broker's port."""

    holder: subprocess.Popen[bytes]
    forwarder: subprocess.Popen[bytes]
    #: Forwarders of other ports (the slow provider's), each to a relay of its own.
    others: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @classmethod
    def make(cls, broker_port: int, unix_path: Path,
             also: tuple[tuple[int, Path], ...] = ()) -> Namespace:
        """The namespace, its forwarder of ``broker_port`` to ``unix_path``, and one more
        forwarder of each (port, Unix socket) of ``also``."""
        holder = subprocess.Popen(["unshare", "-n", "sleep", "infinity"])
        netns = f"/proc/{holder.pid}/ns/net"
        for _ in range(100):  # until unshare has made it
            if os.path.exists(netns) and os.readlink(netns) != os.readlink("/proc/self/ns/net"):
                break
            time.sleep(0.01)
        subprocess.run(["nsenter", f"--net={netns}", "ip", "link", "set", "lo", "up"], check=True)
        forwarders = [subprocess.Popen(
            ["nsenter", f"--net={netns}", sys.executable, "-m", "chaos.forwarder",
             str(port), str(path)],
            env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
            for port, path in ((broker_port, unix_path), *also)]
        ns = cls(holder, forwarders[0], forwarders[1:])
        for port, _ in ((broker_port, unix_path), *also):
            ns.wait_listening(port)
        return ns

    def wrap(self, command: list[str]) -> list[str]:
        """``command`` run inside the namespace (nsenter execs it: its pid is the command's)."""
        return ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net", *command]

    def wait_listening(self, port: int) -> None:
        probe = ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net", sys.executable, "-c",
                 f"import socket; socket.create_connection(('127.0.0.1', {port}), 1).close()"]
        for _ in range(100):
            if subprocess.run(probe, capture_output=True).returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("the namespace's forwarder does not listen")

    def close(self) -> None:
        for proc in (self.forwarder, *self.others, self.holder):
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(5)
