# Everything installs into .venv; only Python 3.11+ and Java (a JDK: the Flink runner builds
# a small helper jar with javac once) must be on the machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export LITELLM_LOCAL_MODEL_COST_MAP := True
export LITELLM_OFFLINE_MODE := true

FLINK_STAMP := $(VENV)/.flink-installed
# The Kafka connector jars and the helper jar, outside PyFlink's own lib directory.
FLINK_JARS := $(VENV)/share/eddies/flink

# Apache Flink Agents, the reference for bench/engine.py's speed-ups, in a venv of its own
# (its pins, e.g. pydantic==2.11.4, are not ours). Its local runner imports PyFlink, which
# flink-agents does not declare: the same apache-flink as eddies[flink]. Its sdist's build
# fetches the jars for running on a Flink cluster from Maven Central; the local runner
# loads none, so that download is skipped.
FLINK_AGENTS_VENV := .venv-flink-agents
FLINK_AGENTS_STAMP := $(FLINK_AGENTS_VENV)/.installed

.PHONY: install install-flink chromium demo test docs lint typecheck pytest bench bench-kafka bench-worker-cpu bench-rebalance bench-flink bench-flink-agents bench-instructions bench-guard bench-waiting bench-restore bench-retrieval bench-eval bench-providers bench-provider-limits bench-streaming chaos clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# PyFlink (~850 MB) and the jars: only for the Flink runner and its tests, not the demo.
$(FLINK_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,flink]'
	$(BIN)/python -m eddies.connectors.flink.jars $(FLINK_JARS)
	touch $(FLINK_STAMP)

install-flink: $(FLINK_STAMP)

# Debian's chromium, for the web view's test (Playwright drives it; `playwright install` is
# never run). Installed as root where it is missing; otherwise that test skips, saying why.
CHROMIUM := /usr/bin/chromium

chromium:
	@test -x $(CHROMIUM) || if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q chromium || { apt-get update -q && apt-get install -y -q chromium; }; \
	else \
		echo "$(CHROMIUM) is missing (apt-get install chromium, as root): the web view's test will skip"; \
	fi

demo: install
	$(BIN)/eddies demo

test: install install-flink chromium lint typecheck pytest

# The docs site (mkdocs.yml, docs/) into site/; strict: a broken link or anchor, or a page
# left out of the nav, fails it. NO_MKDOCS_2_WARNING silences Material's end-of-life banner.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: install
	$(BIN)/ruff check .

typecheck: install install-flink
	bash tools/typecheck.sh

# Two pytest processes, a test file each at a time: the integration tests mostly wait (on
# brokers, timeouts, slow providers), so two halve the wall time on two cores. More only
# where there are more cores (PYTEST_WORKERS=4): each starts its own broker. The tests
# marked serial (rates measured, faults on a schedule) then run alone: beside another
# test file they saw the machine's load, not the engine's. The slowest tests are listed
# at the end, to see where the time goes.
PYTEST_WORKERS ?= 2
pytest: install install-flink chromium
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=15 -m "not serial"
	$(BIN)/python -m pytest -q --durations=5 -m serial

bench: install
	$(BIN)/python bench/engine.py

# The chaos campaign (tools/chaos): workers killed, paused past their session timeout and
# cut off the broker (as root) under traffic; three rounds of two minutes by default (the
# third with a slow provider: hundreds of model calls in flight), about 10 minutes;
# CHAOS_ARGS="--rounds 5 --round-seconds 240 --seed 1512 --layouts all,split" is the run in
# bench/RESULTS.md.
chaos: install
	PYTHONPATH=tools $(BIN)/python -m chaos $(CHAOS_ARGS)

bench-kafka: install
	$(BIN)/python bench/kafka.py

bench-worker-cpu: install
	$(BIN)/python bench/worker_cpu.py

bench-rebalance: install
	$(BIN)/python bench/rebalance.py

bench-flink: install-flink
	$(BIN)/python bench/flink.py

$(FLINK_AGENTS_STAMP):
	test -x $(FLINK_AGENTS_VENV)/bin/python || $(PYTHON) -m venv $(FLINK_AGENTS_VENV)
	$(FLINK_AGENTS_VENV)/bin/python -m pip install -q --upgrade pip
	FLINK_AGENTS_SKIP_JAR_DOWNLOAD=1 $(FLINK_AGENTS_VENV)/bin/python -m pip install -q \
		flink-agents==0.3.1 apache-flink==2.3.0
	touch $(FLINK_AGENTS_STAMP)

# Flink Agents 0.3.1's local runner on bench/engine.py's workloads (which, once this venv
# exists, measures it in its own runs too).
bench-flink-agents: $(FLINK_AGENTS_STAMP)
	$(FLINK_AGENTS_VENV)/bin/python bench/flink_agents.py

# bench/engine.py's workloads in instructions per input (callgrind), against Flink Agents.
bench-instructions: install $(FLINK_AGENTS_STAMP)
	$(BIN)/python bench/instructions.py

# The hot paths' instructions against bench/baseline.json (CI runs it through make test).
bench-guard: install
	$(BIN)/python bench/guard.py

bench-waiting: install
	$(BIN)/python bench/waiting.py

bench-restore: install
	$(BIN)/python bench/restore.py

bench-retrieval: install
	$(BIN)/python bench/retrieval.py

bench-eval: install
	$(BIN)/python bench/eval.py

# One worker against a local provider that answers after 1 s, next to a plain litellm asyncio
# loop (bench/providers.py); a worker workload stops after 60 s (--timeout), so a few
# minutes at most. PROVIDERS_ARGS="--sessions 400" is the run in bench/RESULTS.md.
bench-providers: install
	$(BIN)/python bench/providers.py $(PROVIDERS_ARGS)

# How soon a streamed token reaches a reader of APP.stream and of eddies serve, against the
# floor (litellm -> a raw producer), and what streaming costs per token (bench/streaming.py).
bench-streaming: install
	$(BIN)/python bench/streaming.py $(STREAMING_ARGS)

bench-provider-limits: install
	$(BIN)/python bench/provider_limits.py $(PROVIDER_LIMITS_ARGS)

clean:
	rm -rf $(VENV) $(FLINK_AGENTS_VENV) .typecheck .pytest_cache .mypy_cache .ruff_cache
