# Two commands set everything up on a machine that has only Python 3.11+:
#   make demo     - create .venv, install planner, load the demo data (once) and start the dashboard
#   make test     - create/update .venv with the dev extras, then lint, type-check and test
#   make demo-cli - the same data walked through with the `planner` command
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_HOME ?= .planner
DEMO_SAMPLE := data/samples/azure_llm_conv_2023.csv.gz

.PHONY: demo demo-data demo-cli test lint typecheck bench profiles clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Re-install only when the project's metadata changed, or the replica loop and step formula that
# setup.py compiles (an edited engine.py or step.py runs as pure Python until it is rebuilt).
COMPILED := setup.py planner/simulate/engine.py planner/latency/step.py
$(VENV)/.installed: pyproject.toml $(COMPILED) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(COMPILED) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@ $(VENV)/.installed

# The demo store (sample log, price snapshot, a forecast, a recommendation), loaded once; then the
# dashboard over it. DEMO_PORT picks the port; DEMO_DATA_ARGS=--quick a smaller search (tests).
DEMO_PORT ?= 8501
DEMO_DATA_ARGS ?=
demo: demo-data
	PLANNER_HOME=$(DEMO_HOME) $(BIN)/planner dashboard --port $(DEMO_PORT)

demo-data: $(VENV)/.installed
	PLANNER_HOME=$(DEMO_HOME) $(BIN)/python -m planner.demo $(DEMO_DATA_ARGS)

demo-cli: $(VENV)/.installed
	PLANNER_HOME=$(DEMO_HOME) $(BIN)/planner ingest $(DEMO_SAMPLE) --name demo-azure-conv
	PLANNER_HOME=$(DEMO_HOME) $(BIN)/planner datasets show demo-azure-conv
	PLANNER_HOME=$(DEMO_HOME) $(BIN)/planner latency --gpu H100-SXM --model llama-3.1-8b \
		--precision fp8 --batch 32 --input 1155 --output 211
	PLANNER_HOME=$(DEMO_HOME) $(BIN)/planner simulate --dataset demo-azure-conv --gpu H100-SXM \
		--model llama-3.1-8b --precision fp8 --replicas 1 --slo-ttft 2s --slo-tpot 100ms \
		--price-per-hour 4.0
	PLANNER_HOME=$(DEMO_HOME) $(BIN)/planner prices compare --gpu H100 --option all
	PLANNER_HOME=$(DEMO_HOME) $(BIN)/planner forecast --series data/samples/servegen_rates_10min.csv \
		--model m-small --horizon 7d --demand-out $(DEMO_HOME)/demand.csv \
		--plot $(DEMO_HOME)/forecast.html
	PLANNER_HOME=$(DEMO_HOME) $(BIN)/planner recommend --demand $(DEMO_HOME)/demand.csv \
		--tokens-from demo-azure-conv --load-scale 0.01 --model llama-3.1-8b \
		--slo-ttft-p99 2s --slo-tpot-p99 200ms

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/ingest_bench.py
	$(BIN)/python benchmarks/latency_bench.py
	$(BIN)/python benchmarks/simulate_bench.py --week
	$(BIN)/python benchmarks/forecast_bench.py

# Refit the bundled default calibration profiles: first on the published offline measurements
# (each engine's own; the operator timings, measured on NVIDIA GPUs, join the NVIDIA fits), then
# TensorRT-LLM's and vLLM's under load, by replaying the bundled serving runs (anchored by those
# offline points), with their held-out folds, docs/accuracy.md and accuracy.json (about half an
# hour on two cores; see docs/accuracy.md).
REFERENCE := data/reference/published_latency.csv
OPERATORS := --operators data/reference/operator_timings.csv
CALIBRATE := PLANNER_HOME=$$(mktemp -d) $(BIN)/planner calibrate $(REFERENCE) --force \
	--export data/calibration/profiles.json
profiles: $(VENV)/.installed
	rm -f data/calibration/profiles.json
	$(CALIBRATE) --name trtllm-default --engine trtllm $(OPERATORS)
	$(CALIBRATE) --name vllm-default --engine vllm --vendor NVIDIA --holdout 0 $(OPERATORS)
	$(CALIBRATE) --name vllm-mi300x --engine vllm --gpu MI300X
	$(CALIBRATE) --name sglang-default --engine sglang $(OPERATORS)
	$(BIN)/python benchmarks/accuracy.py --refit --write-json --write-doc

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build planner/simulate/*.so
