"""Running the Flink job: checks before any JVM starts, submission, progress, stop.

``eddies flink run`` calls :func:`run`; ``eddies flink stop`` calls :func:`stop`, which
asks the job manager's REST API for a savepoint (PyFlink's own stop_with_savepoint is
broken on 2.x), so it works for a job started by another process and on a remote cluster.
Example::

    run(settings, FlinkOptions.for_run(settings, savepoint=None, fresh=False))
    stop(settings, savepoint_dir="/backups/sp1")
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eddies.connectors.flink.jars import FlinkSetupError, connector_jars, records_jar
from eddies.connectors.flink.options import FlinkOptions
from eddies.connectors.runtime.settings import ConfigError, Settings

log = logging.getLogger("eddies.flink")

#: The job's name: ``eddies flink stop`` finds the app's job by it.
JOB_NAME = "eddies {app}"


def jar_dir(settings: Settings) -> Path:
    """Where the connector jars and the helper jar are (``flink_jars``, default
    ``share/eddies/flink`` in the Python environment; ``make install-flink`` fills it)."""
    if settings.flink_jars:
        return Path(settings.flink_jars).expanduser().resolve()
    return Path(sys.prefix) / "share" / "eddies" / "flink"


def preflight(settings: Settings, *, jobmanager: str = "",
              waiting: Callable[[str], None] | None = None) -> tuple[list[Path], bool]:
    """What a run needs before a JVM starts: Java, PyFlink, the jars, the broker and the
    app's topics, and (with no ``jobmanager``: a local mini-cluster) its REST port free.
    Returns the jars and whether the broker is the embedded one. ``waiting`` is told when
    the broker does not answer at once (see prepare_app)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise FlinkSetupError("the Flink runner needs Java 11 or newer (no 'java' on PATH and "
                              "no JAVA_HOME)")
    try:
        import pyflink  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        raise FlinkSetupError("the Flink runner needs PyFlink: pip install 'eddies[flink]' "
                              "(or make install-flink)") from None
    if not jobmanager:
        rest_port_free(settings)
    directory = jar_dir(settings)
    try:
        jars = [*connector_jars(directory), records_jar(directory)]
    except FlinkSetupError as err:
        raise FlinkSetupError(f"{err}; or set flink_jars (EDDIES_FLINK_JARS) to a directory "
                              "that has them") from None
    from eddies.connectors.runtime.preflight import prepare_app

    # The task managers read the result key from the same variable: fail here, not in a task.
    membership, _ = prepare_app(settings, waiting)
    embedded = membership.embedded
    return jars, embedded


def rest_port_free(settings: Settings) -> None:
    """ConfigError naming ``flink_rest_port`` if a local mini-cluster could not serve on it:
    found here, the message says what to change; found by the JVM, it is a Java trace."""
    import socket

    port = settings.flink_rest_port
    with socket.socket() as sock:
        # As the mini-cluster binds (rest.bind-address): a port in TIME_WAIT after the last
        # run is free for it, one that something listens on is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as err:
            raise ConfigError(
                f"flink_rest_port (EDDIES_FLINK_REST_PORT): port {port} is taken ({err.strerror}), "
                "by another 'eddies flink run' or a Flink cluster: stop it, choose another "
                "port, or submit to that cluster with --jobmanager") from None


def run(settings: Settings, options: FlinkOptions, *, jars: list[Path],
        say: Callable[[str], None] = print, stop: threading.Event | None = None,
        progress_every_s: float = 5.0) -> int:
    """Submit the job and follow it until it ends or ``stop`` is set (then cancel it: its
    checkpoints stay, and the next run restores from the newest). Returns the exit code."""
    # The local mini-cluster's JVM: C1 only, because C2 kept a core's 40% compiling for
    # a minute and more of a backlog while the task's own work is mostly Python
    # (bench/RESULTS.md, "Flink runner next to the worker"). JVM_ARGS overrides it.
    os.environ.setdefault("JVM_ARGS", "-Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1")
    os.environ["JVM_ARGS"] += f" -Djava.io.tmpdir={options.tmp_dir}"
    os.environ["FLINK_LOG_DIR"] = str(options.tmp_dir)
    os.environ["TMPDIR"] = str(options.tmp_dir)
    stop = stop or threading.Event()
    # PyFlink imports Beam, whose file systems warn at import about every cloud SDK not
    # installed ("Failed to import GCSFileSystem"): nothing the job uses.
    logging.getLogger("apache_beam.io.filesystems").setLevel(logging.ERROR)
    from eddies.connectors.flink.job import build

    env = build(settings, options, jars)
    restored = f", restoring {options.restore_from}" if options.restore_from else ""
    client = env.execute_async(JOB_NAME.format(app=settings.app))
    job_id = str(client.get_job_id())
    where = options.jobmanager or f"127.0.0.1:{settings.flink_rest_port}"
    say(f"job {job_id} submitted (app {settings.app}, parallelism {settings.flink_parallelism}, "
        f"{settings.flink_state_backend} state, checkpoints every "
        f"{settings.flink_checkpoint_interval_ms} ms to {options.checkpoint_dir}{restored}); "
        f"web UI and REST at http://{where}")
    monitor = Progress(where, job_id)
    code = 0
    try:
        while not stop.wait(progress_every_s):
            line, state = monitor.poll()
            if state == "UNKNOWN":  # no REST answer: a local cluster ends with its job
                state = _status(client)
                if state == "GONE" and not options.jobmanager:
                    say(f"job {job_id} ended (stopped from outside; its cluster shut down)")
                    break
            if line:
                say(line)
            if state in ("RESTARTING", "FAILING", "FAILED"):
                why = monitor.failure()
                if why:
                    say(why)
            if state in ("FAILED", "CANCELED", "FINISHED"):
                say(f"job {job_id} {state.lower()}")
                code = 0 if state == "FINISHED" else 1
                break
    finally:
        if stop.is_set():
            say(f"stopping job {job_id} (cancel; its checkpoints stay in {options.checkpoint_dir})")
            _quiet_gateway()  # a local cluster's JVM ends with the job, mid-call
            try:
                client.cancel().result()
            except Exception as err:  # already gone
                log.debug("cancel: %s", err)
        shutil.rmtree(options.tmp_dir, ignore_errors=True)
        _quiet_gateway()
    return code


class _NotFromPy4j(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}py4j{os.sep}" not in record.pathname


def _quiet_gateway() -> None:
    """After the job: the local cluster's JVM goes away with it, and py4j then logs a
    traceback for every Java object Python lets go of (at exit, dozens). None of them
    says anything about the job."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_NotFromPy4j())


def _status(client: Any) -> str:
    """The job's state as its JobClient knows it, or GONE when nobody answers."""
    try:
        return str(client.get_job_status().result()).rsplit(".", 1)[-1].upper()
    except Exception:
        return "GONE"


class Progress:
    """Reads a job's state, its checkpoints and the session machine's counters (Flink
    metrics ``eddies.*``, summed over subtasks) from the REST API. A line is told when the
    state or a count moved, else once every ``quiet_s``: an idle job does not fill the
    terminal with the same line (its checkpoints alone do not count as news)."""

    def __init__(self, address: str, job_id: str, *, quiet_s: float = 60.0) -> None:
        self.base = f"http://{address}"
        self.job_id = job_id
        self.quiet_s = quiet_s
        self._last: tuple[float, dict[str, float]] | None = None
        self._told: tuple[float, str, dict[str, float]] | None = None  # when, state, counts
        self._vertex = ""
        self._ids: dict[str, str] = {}  # counter name -> metric id
        self._failure: tuple[int, str] | None = None  # the newest failure told

    def poll(self) -> tuple[str, str]:
        """A progress line ("" when there is no news) and the job's state (UNKNOWN: no
        answer)."""
        job_url = f"{self.base}/jobs/{self.job_id}"
        try:
            job = _get(job_url)
            cps = _get(f"{job_url}/checkpoints")
            counts = self._counters(job)
        except (OSError, ValueError) as err:
            return f"job {self.job_id}: no answer from the job manager ({err})", "UNKNOWN"
        state = str(job.get("state", "UNKNOWN"))
        now = time.monotonic()
        rates: dict[str, float] = {}
        if self._last is not None:
            dt = max(now - self._last[0], 1e-3)
            rates = {k: (v - self._last[1].get(k, 0)) / dt for k, v in counts.items()}
        self._last = (now, counts)

        told = self._told
        if told is not None and (told[1], told[2]) == (state, counts) and now - told[0] < self.quiet_s:
            return "", state
        self._told = (now, state, counts)

        def show(name: str, label: str, after: str = "") -> str:
            rate = f" ({rates[name]:,.0f}/s)" if name in rates else ""
            n = counts.get(name, 0)
            return f"{n:,.0f} {label if n == 1 else label + 's'}{after}{rate}"

        done = int(cps.get("counts", {}).get("completed", 0))
        latest = (cps.get("latest") or {}).get("completed") or {}
        cp = f"{done} checkpoint{'' if done == 1 else 's'}" + (
            f" (last {latest.get('end_to_end_duration')} ms, {latest.get('state_size', 0):,} bytes)"
            if latest else "")
        dead = f", {show('dlq', 'dead letter')}" if counts.get("dlq") else ""
        failed = f" ({counts['outputs_failed']:,.0f} failed)" if counts.get("outputs_failed") else ""
        # The failed count next to the answers' (a rate after both): "3 answers (1 failed)".
        return (f"job {state.lower()}: {show('outputs', 'answer', failed)}, "
                f"{show('inputs', 'input')}, {show('events', 'event')}{dead}; {cp}"), state

    def failure(self) -> str:
        """The job's newest failure, the first time it is seen ("": none, or told already):
        a restarting job says why (a task's exception) instead of only that it restarts."""
        try:
            history = _get(f"{self.base}/jobs/{self.job_id}/exceptions").get("exceptionHistory", {})
        except (OSError, ValueError) as err:
            log.debug("exceptions: %s", err)
            return ""
        entries = history.get("entries") or []
        if not entries:
            return ""
        newest = max(entries, key=lambda e: int(e.get("timestamp", 0)))
        seen = (int(newest.get("timestamp", 0)), str(newest.get("exceptionName", "")))
        if seen == self._failure:
            return ""
        self._failure = seen
        trace = str(newest.get("stacktrace", "")).strip()
        # The Java trace's chain of causes without its frames, and a Python traceback that
        # a PyFlink task raised (inside the Java one) whole: the cause is at their ends.
        lines = trace.splitlines()
        python = next((i for i, line in enumerate(lines) if line.startswith("Traceback")), None)
        shown = [line for line in lines[:python] if not line.startswith(("\t", " "))]
        if python is not None:
            shown += [line for line in lines[python:] if not line.lstrip().startswith("at ")]
        where = f" in {newest['taskName']}" if newest.get("taskName") else ""
        return f"job {self.job_id} failed{where}: {seen[1]}\n" + "\n".join(shown)

    def _counters(self, job: dict[str, Any]) -> dict[str, float]:
        if not self._vertex:
            self._vertex = next((str(v["id"]) for v in job.get("vertices", [])
                                 if "session machine" in str(v.get("name"))), "")
        if not self._vertex:
            return {}
        url = f"{self.base}/jobs/{self.job_id}/vertices/{self._vertex}/subtasks/metrics"
        if not self._ids:  # reported once the first record was processed
            for m in _get(url):
                mid = str(m.get("id", ""))
                if ".eddies." in mid or mid.startswith("eddies."):
                    self._ids[mid.rsplit(".", 1)[-1]] = mid
            if not self._ids:
                return {}
        values = _get(f"{url}?get={','.join(self._ids.values())}&agg=sum")
        by_id = {str(m.get("id")): float(m.get("sum", 0)) for m in values}
        return {name: by_id.get(mid, 0.0) for name, mid in self._ids.items()}


def _get(url: str, data: dict[str, Any] | None = None) -> Any:
    body = None if data is None else json.dumps(data).encode()
    req = urllib.request.Request(url, data=body, method="GET" if data is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"{}")


def stop(settings: Settings, savepoint_dir: str, *, jobmanager: str = "",
         say: Callable[[str], None] = print, timeout_s: float = 300) -> str:
    """Stop the app's running job with a savepoint in ``savepoint_dir``; its path."""
    base = f"http://{jobmanager or f'127.0.0.1:{settings.flink_rest_port}'}"
    name = JOB_NAME.format(app=settings.app)
    try:
        jobs = _get(f"{base}/jobs/overview").get("jobs", [])
    except (OSError, ValueError) as err:
        raise ConfigError(f"no Flink job manager answers at {base} ({err}); is "
                          f"'eddies flink run' running (flink_rest_port, --jobmanager)?") from None
    running = [j for j in jobs if j.get("name") == name and j.get("state") == "RUNNING"]
    if not running:
        raise ConfigError(f"no running job named {name!r} at {base}")
    jid = running[0]["jid"]
    target = str(Path(savepoint_dir).resolve())
    trigger = _get(f"{base}/jobs/{jid}/stop", {"targetDirectory": target, "drain": False,
                                                "formatType": "CANONICAL"})["request-id"]
    say(f"job {jid}: savepoint requested in {target}")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = _get(f"{base}/jobs/{jid}/savepoints/{trigger}")
        if status.get("status", {}).get("id") == "COMPLETED":
            op = status.get("operation", {})
            if "failure-cause" in op:
                raise RuntimeError(f"savepoint failed: {op['failure-cause'].get('stack-trace', '')[:2000]}")
            location = str(op.get("location", target))
            say(f"job {jid} stopped; savepoint at {location} "
                f"(resume with: eddies flink run --from-savepoint {location.removeprefix('file:')})")
            return location
        time.sleep(0.5)
    raise TimeoutError(f"savepoint of job {jid} not complete after {timeout_s:.0f} s")


def install_signal_handlers(stop_event: threading.Event) -> None:
    """SIGINT and SIGTERM stop the run (the job is cancelled; checkpoints stay)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop_event.set())


