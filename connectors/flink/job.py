"""The Flink job: ``APP.input`` -> key by session -> the session machine on keyed state ->
``APP.events``, ``APP.requests``, ``APP.output``, ``APP.journal``, and ``APP.dlq`` through
a side output. Imports PyFlink at module level: only ``eddies flink`` loads this module.

Example (``runner.run`` does this, and follows the job)::

    env = build(settings, options, jars)      # settings.agent names the agent
    client = env.execute_async("eddies support")
"""

from __future__ import annotations

import logging
import os
import pickle
import site
import sys
import time
from pathlib import Path
from typing import Any

from pyflink.common import Configuration, Row, Types, WatermarkStrategy  # type: ignore[import-untyped]
from pyflink.datastream import (  # type: ignore[import-untyped]
    DataStream,
    KeyedProcessFunction,
    KeyedStream,
    OutputTag,
    RuntimeContext,
    StreamExecutionEnvironment,
)
from pyflink.datastream.connectors.base import DeliveryGuarantee  # type: ignore[import-untyped]
from pyflink.datastream.connectors.kafka import KafkaSink, KafkaSource  # type: ignore[import-untyped]
from pyflink.datastream.state import MapStateDescriptor  # type: ignore[import-untyped]
from pyflink.java_gateway import get_gateway  # type: ignore[import-untyped]

from eddies.connectors.flink.options import FlinkOptions
from eddies.connectors.flink.processor import InputRecord, Processor, encode_batch
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames

log = logging.getLogger("eddies.flink")

_BYTES = Types.PRIMITIVE_ARRAY(Types.BYTE())
#: An input record as the Java ``KafkaRecordReader`` emits it, after its session key.
INPUT_TYPE = Types.ROW_NAMED(["key", "value", "partition", "offset", "timestamp", "headers"],
                             [_BYTES, _BYTES, Types.INT(), Types.LONG(), Types.LONG(), _BYTES])
KEYED_INPUT_TYPE = Types.ROW([Types.STRING(), INPUT_TYPE])
#: What the Java ``KafkaRecordWriter`` takes per output record (processor.Row).
OUTPUT_TYPE = Types.ROW_NAMED(["topic", "partition", "key", "value", "headers", "timestamp"],
                              [Types.STRING(), Types.INT(), _BYTES, _BYTES, _BYTES, Types.LONG()])
DLQ_TAG = OutputTag("dlq", OUTPUT_TYPE)
#: Counters of the processor that the job reports as Flink metrics ``eddies.<name>``.
REPORTED_COUNTERS = ("inputs", "results", "events", "outputs", "outputs_failed", "dlq",
                     "forwarded", "sessions_closed", "state_bytes")


class _MapStore:
    """The current key's MapState as a :class:`eddies.connectors.flink.processor.Store`.

    Values are declared PICKLED_BYTE_ARRAY: a checkpoint writes each as one byte array
    (as STRING, char by char, it took most of the job's CPU); declared
    PRIMITIVE_ARRAY(BYTE), a value put in thread mode reached the heap backend as
    ``Object[]`` and failed the checkpoint. Our values are bytes already, so they go to
    the Java MapState as they are, past PyFlink's wrapper, which pickles each one and
    unpickles it on the way back (a tenth of the per-record state cost). Checkpoints of
    earlier versions hold pickled values: read back by their pickle header, which none of
    ours starts with (they are JSON or UTF-8 text, and 0x80 starts no UTF-8 text)."""

    def __init__(self, state: Any) -> None:
        self._java = state._state  # noqa: SLF001 (PyFlink keeps the Java MapState there)

    def items(self) -> Any:
        entries = self._java.entries()
        for entry in entries or ():
            value = entry.getValue()
            yield entry.getKey(), pickle.loads(value) if value[:1] == _PICKLED else value

    def put(self, key: str, value: bytes) -> None:
        self._java.put(key, value)

    def put_all(self, entries: dict[str, bytes]) -> None:
        self._java.putAll(entries)

    def remove(self, key: str) -> None:
        self._java.remove(key)

    def clear(self) -> None:
        self._java.clear()


_PICKLED = b"\x80"  # the first byte of a pickle (protocol 2 and later)


class SessionFunction(KeyedProcessFunction):  # type: ignore[misc]
    """Runs the session machine for the sessions of one subtask (see processor.py)."""

    def __init__(self, settings: Settings, dev_key: bool) -> None:
        # Settings travel with the job; the result key does not (it stays in the
        # environment of the task managers, EDDIES_RESULT_KEY or what result_key_env names).
        self.settings = settings
        self.dev_key = dev_key
        self.processor: Any = None

    def open(self, runtime_context: RuntimeContext) -> None:
        from eddies.connectors.remote.discovery import discover_tools
        from eddies.connectors.runtime.settings import load_agent
        from eddies.connectors.runtime.signing import ResultSigner, identity_signer
        from eddies.engine import AgentPlan

        agent = load_agent(self.settings.agent)
        discover_tools(agent)  # MCP and A2A tools' specs come from their servers
        plan = AgentPlan.compile(agent)
        signer = ResultSigner.from_env(self.settings.result_key_env, allow_dev_key=self.dev_key)
        self.processor = Processor(self.settings, plan, signer, identities=identity_signer(
            self.settings.identity_key_env, allow_dev_key=self.dev_key))
        self.store = _MapStore(runtime_context.get_map_state(
            MapStateDescriptor("session", Types.STRING(), Types.PICKLED_BYTE_ARRAY())))
        self.dlq = TopicNames(self.settings.app).dlq
        self.topic = TopicNames(self.settings.app).input
        from eddies.connectors.runtime.process_tuning import tune_gc
        from eddies.events import codec

        codec.prepare()  # compiled now, not in the first record's time
        tune_gc()
        # The processor's counters, reported as Flink metrics (eddies.<name>, per
        # subtask) for `eddies flink run`'s progress and any Flink metrics reporter;
        # pushed at most once a second, as each increment is a call into the JVM.
        group = runtime_context.get_metrics_group().add_group("eddies")
        self._metrics = {name: group.counter(name) for name in REPORTED_COUNTERS}
        self._reported: dict[str, int] = {}
        self._report_at = 0.0
        self._report_timer = 0  # when a timer pushes the counters (0: none pending)

    def process_element(self, value: Any, ctx: Any) -> Any:
        key, data = value[0], value[1]
        record = InputRecord(self.topic, None if key is None else bytes(key),
                             None if data is None else bytes(data), value[2], value[3], value[4],
                             None if value[5] is None else bytes(value[5]))
        rows = self.processor.handle(record, self.store)
        yield from self._out(rows, ctx)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        if timestamp == self._report_timer:
            self._report_timer = 0
            self._report(force=True)
        rows = self.processor.on_timer(ctx.get_current_key(), timestamp, self.store)
        yield from self._out(rows, ctx, report_later=False)

    def _report(self, force: bool = False) -> None:
        now = time.monotonic()
        if now < self._report_at and not force:
            return
        self._report_at = now + 1.0
        counts = self.processor.counters.snapshot()
        for name, counter in self._metrics.items():
            delta = counts.get(name, 0) - self._reported.get(name, 0)
            if delta:
                counter.inc(delta)
                self._reported[name] = counts.get(name, 0)

    def _out(self, rows: list[Any], ctx: Any, report_later: bool = True) -> Any:
        self._report()
        timers = self.processor.timers
        if report_later and not self._report_timer:  # pushes what this record counted
            self._report_timer = int(time.time() * 1000) + 1000
            timers.append(self._report_timer)
        if timers:
            service = ctx.timer_service()
            for t in timers:
                service.register_processing_time_timer(t)
            timers.clear()
        dlq = self.dlq
        if any(r[0] == dlq for r in rows):
            for r in rows:
                if r[0] == dlq:
                    yield DLQ_TAG, Row(*r)
            rows = [r for r in rows if r[0] != dlq]
        if rows:  # one element for all of them (see OutputBatch.java)
            yield encode_batch(rows)


def python_path(tmp: Path) -> list[str]:
    """Where the task's Python finds modules. Thread mode embeds the base interpreter's
    libpython, which reads no virtual environment and no ``.pth`` file: so the
    environment's site-packages, this process's import path (the agent's module), and, for
    an editable install (whose finder is a ``.pth`` hook), a tree of links with the
    installed layout of ``eddies``."""
    import eddies

    paths: list[str] = []
    root = Path(eddies.__file__).resolve().parent
    layers = {name: Path(__import__(f"eddies.{name}", fromlist=["_"]).__path__[0]).resolve()
              for name in ("events", "engine", "connectors", "schemas")}
    if any(p.parent != root for p in layers.values()):
        tree = tmp / "python" / "eddies"
        tree.mkdir(parents=True, exist_ok=True)
        for f in root.iterdir():
            if f.name not in layers:
                (tree / f.name).symlink_to(f)
        for name, p in layers.items():
            (tree / name).symlink_to(p)
        paths.append(str(tree.parent))
    paths += site.getsitepackages()
    paths += [os.path.abspath(p or ".") for p in sys.path if os.path.isdir(p or ".")]
    return list(dict.fromkeys(paths))


def configuration(settings: Settings, options: FlinkOptions) -> Any:
    """The Flink configuration of a run: Python in thread mode with the latency settings,
    checkpoints, state backend, restore path, temp dirs."""
    conf = Configuration()
    conf.set_string("python.executable", sys.executable)
    conf.set_string("python.execution-mode", "thread")
    conf.set_string("python.pythonpath", os.pathsep.join(python_path(options.tmp_dir)))
    conf.set_string("python.fn-execution.bundle.time", str(settings.flink_bundle_time_ms))
    conf.set_string("execution.buffer-timeout.interval", f"{settings.flink_buffer_timeout_ms}ms")
    conf.set_string("parallelism.default", str(settings.flink_parallelism))
    # Chained operators hand records on without a deep copy each: every operator here
    # makes new objects and keeps none it was given.
    conf.set_string("pipeline.object-reuse", "true")
    conf.set_string("execution.checkpointing.interval", f"{settings.flink_checkpoint_interval_ms}ms")
    conf.set_string("execution.checkpointing.dir", options.checkpoint_dir.resolve().as_uri())
    conf.set_string("execution.checkpointing.externalized-checkpoint-retention",
                    "RETAIN_ON_CANCELLATION")
    conf.set_string("execution.checkpointing.num-retained", "2")
    conf.set_string("state.backend.type", settings.flink_state_backend)
    if settings.flink_state_backend == "rocksdb":  # only what changed since the last one
        conf.set_string("execution.checkpointing.incremental", "true")
    conf.set_string("rest.port", str(settings.flink_rest_port))
    conf.set_string("rest.address", "127.0.0.1")
    conf.set_string("rest.bind-address", "127.0.0.1")
    if options.restore_from is not None:
        conf.set_string("execution.state-recovery.path", str(options.restore_from))
    conf.set_string("io.tmp.dirs", str(options.tmp_dir))
    if options.jobmanager:
        host, _, port = options.jobmanager.rpartition(":")
        conf.set_string("execution.target", "remote")
        conf.set_string("rest.address", host)
        conf.set_string("rest.port", port)
    return conf


def build(settings: Settings, options: FlinkOptions, jars: list[Path]) -> Any:
    """The job graph in a new execution environment (not submitted)."""
    env = StreamExecutionEnvironment.get_execution_environment(configuration(settings, options))
    env.add_jars(*(p.resolve().as_uri() for p in jars))
    jvm = get_gateway().jvm
    # PyFlink's wrappers (the sources', sinks' and streams' builders) offer no public handle to
    # the Java objects they wrap: the reader, writer and keying set in Java reach them by
    # their private _j_ names (hence the SLF001 exceptions below).
    names = TopicNames(settings.app)
    kafka = {k: v for k, v in settings.kafka.items()
             if not k.startswith(("enable.", "linger.", "fetch.wait", "logger"))}
    source = (KafkaSource.builder()
              .set_bootstrap_servers(settings.bootstrap_servers)
              .set_topics(names.input)
              .set_group_id(f"{settings.app}.flink")
              .set_property("fetch.max.wait.ms", str(max(settings.fetch_wait_ms, 1)))
              .set_property("partition.discovery.interval.ms", "60000")
              .set_property("max.partition.fetch.bytes", str(settings.write_limit)))
    for k, v in kafka.items():
        source.set_property(k, v)
    source._j_builder.setDeserializer(jvm.io.eddies.flink.KafkaRecordReader())  # noqa: SLF001
    # Committed offsets, else the earliest (never "latest" on the embedded broker). Built
    # in Java: PyFlink's wrapper names the reset strategy of a shaded kafka-clients.
    initializer = jvm.org.apache.flink.connector.kafka.source.enumerator.initializer
    source._j_builder.setStartingOffsets(initializer.OffsetsInitializer.committedOffsets(  # noqa: SLF001
        jvm.org.apache.kafka.clients.consumer.OffsetResetStrategy.EARLIEST))
    stream = env.from_source(source.build(), WatermarkStrategy.no_watermarks(),
                             f"{names.input}", type_info=KEYED_INPUT_TYPE).uid("input")
    # Keyed by the session key the reader put first, as PyFlink's key_by would after running
    # a Python operator per record to compute it.
    selector = jvm.KeyByKeySelector()
    key_type = Types.ROW([Types.STRING()]).get_java_type_info()
    if settings.flink_parallelism == 1:
        # One subtask holds every key group, so the source's records need no shuffle to
        # reach their key's state: the source is chained to the session machine (no
        # serialisation, network buffer or thread hand-off per record: ~13 ms less idle
        # latency in make bench-flink). A run at a higher parallelism shuffles by key again;
        # its keyed state is found by key group either way, so a checkpoint or savepoint of
        # one restores in the other (tests/integration/test_flink.py).
        j_keyed = jvm.org.apache.flink.streaming.api.datastream.DataStreamUtils \
            .reinterpretAsKeyedStream(stream._j_data_stream, selector, key_type)  # noqa: SLF001
    else:
        j_keyed = stream._j_data_stream.keyBy(selector, key_type)  # noqa: SLF001
    keyed = KeyedStream(j_keyed, INPUT_TYPE, stream)
    processed = (keyed.process(SessionFunction(settings, dev_key=options.embedded),
                               output_type=_BYTES)
                 .uid("sessions").name("session machine"))
    records = DataStream(processed._j_data_stream.flatMap(jvm.io.eddies.flink.OutputBatch()))  # noqa: SLF001
    records.uid("records").name("records")
    # What the next hop waits for (requests: an executor; outputs: the app's consumers) goes
    # through a sink of its own that lingers ``linger_ms``; the history and the journal, most
    # of the records, through one that lingers ``flink_linger_ms`` (see the option's note).
    waited = f"{names.requests},{names.output}"
    bulk = DataStream(records._j_data_stream.filter(jvm.io.eddies.flink.TopicFilter(waited, False)))  # noqa: SLF001
    bulk.uid("history and journal").name("history and journal").sink_to(
        _sink(settings, options, kafka, "out")).uid("sink").name("events, journal")
    soon = DataStream(records._j_data_stream.filter(jvm.io.eddies.flink.TopicFilter(waited, True)))  # noqa: SLF001
    soon.uid("requests and output").name("requests and output").sink_to(
        _sink(settings, options, kafka, "waited", settings.linger_ms)).uid("sink-waited").name(
        "requests, output")
    dead = _sink(settings, options, kafka, "dlq")
    processed.get_side_output(DLQ_TAG).sink_to(dead).uid("dlq").name(names.dlq)
    return env


def _sink(settings: Settings, options: FlinkOptions, kafka: dict[str, str], what: str,
          linger_ms: int | None = None) -> Any:
    builder = (KafkaSink.builder()
               .set_bootstrap_servers(settings.bootstrap_servers)
               .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE if settings.exactly_once
                                       else DeliveryGuarantee.AT_LEAST_ONCE)
               .set_property("linger.ms", str(settings.flink_linger_ms if linger_ms is None
                                              else linger_ms))
               .set_property("max.request.size", str(settings.write_limit)))
    if settings.exactly_once:
        builder.set_transactional_id_prefix(f"{settings.app}.flink.{what}")
    for k, v in kafka.items():
        builder.set_property(k, v)
    writer = get_gateway().jvm.io.eddies.flink.KafkaRecordWriter()
    builder._j_builder.setRecordSerializer(writer)  # noqa: SLF001
    return builder.build()
