# Two commands set everything up on a machine that has only Python 3.11+:
#   make demo   - create .venv, install planner, load the bundled sample and summarise it
#   make test   - create/update .venv with the dev extras, then lint, type-check and test
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_HOME ?= .planner
DEMO_SAMPLE := data/samples/azure_llm_conv_2023.csv.gz

.PHONY: demo test lint typecheck unit bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Re-install only when the project's metadata changed.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	PLANNER_HOME=$(DEMO_HOME) $(BIN)/planner ingest $(DEMO_SAMPLE) --name demo-azure-conv
	PLANNER_HOME=$(DEMO_HOME) $(BIN)/planner datasets show demo-azure-conv

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/ingest_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
