# Everything installs into .venv; only Python 3.11+ (and Java, for later Flink/Kafka work)
# must be on the machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export LITELLM_LOCAL_MODEL_COST_MAP := True
export LITELLM_OFFLINE_MODE := true

.PHONY: install demo test lint typecheck pytest bench bench-kafka bench-worker-cpu bench-rebalance clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/eddies demo

test: install lint typecheck pytest

lint: install
	$(BIN)/ruff check .

typecheck: install
	bash tools/typecheck.sh

pytest: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python bench/engine.py

bench-kafka: install
	$(BIN)/python bench/kafka.py

bench-worker-cpu: install
	$(BIN)/python bench/worker_cpu.py

bench-rebalance: install
	$(BIN)/python bench/rebalance.py

clean:
	rm -rf $(VENV) .typecheck .pytest_cache .mypy_cache .ruff_cache
