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

.PHONY: install install-flink demo test lint typecheck pytest bench bench-kafka bench-worker-cpu bench-rebalance bench-flink bench-waiting clean

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

demo: install
	$(BIN)/eddies demo

test: install install-flink lint typecheck pytest

lint: install
	$(BIN)/ruff check .

typecheck: install install-flink
	bash tools/typecheck.sh

pytest: install install-flink
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python bench/engine.py

bench-kafka: install
	$(BIN)/python bench/kafka.py

bench-worker-cpu: install
	$(BIN)/python bench/worker_cpu.py

bench-rebalance: install
	$(BIN)/python bench/rebalance.py

bench-flink: install-flink
	$(BIN)/python bench/flink.py

bench-waiting: install
	$(BIN)/python bench/waiting.py

clean:
	rm -rf $(VENV) .typecheck .pytest_cache .mypy_cache .ruff_cache
