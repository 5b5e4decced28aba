# namesrv-fleet: `make run` serves, `make test` runs the whole suite. Both install what they need.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS ?= dev,pipeline

.PHONY: help install run test lint format config clean bench bench-smoke bench-pipeline  ## (targets)

help:  ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 14

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	@touch $(STAMP)

install: $(STAMP)  ## Create .venv (idempotent) and install the service with its dev tools

run: install  ## Start the service (embedded Redis unless REDIS_URL/NAMESRV_REDIS_URL is set)
	$(BIN)/namesrv

test: install  ## Run the whole test suite (starts its own Redis servers)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install  ## ruff + mypy
	$(BIN)/ruff check service tests bench
	$(BIN)/ruff format --check service tests bench
	$(BIN)/mypy
	$(BIN)/mypy --strict bench

# BENCH_ARGS passes flags through, e.g. make bench BENCH_ARGS="--duration 10 --wait-quiet 120"
BENCH_ARGS ?=

bench: install  ## Benchmark the fleet against its targets: one table (+ JSON in bench/results/), a few minutes
	$(BIN)/python -m bench $(BENCH_ARGS)

bench-smoke: install  ## The benchmark at tiny sizes (~40 s): checks the harness works, numbers mean nothing
	$(BIN)/python -m bench --smoke $(BENCH_ARGS)

bench-pipeline: install  ## Route-history pipeline: 10M synthetic events end to end on local[2], and partition scaling
	$(BIN)/python bench/pipeline_bench.py $(PIPELINE_BENCH_ARGS)

format: install  ## Format the code with ruff
	$(BIN)/ruff format service tests bench
	$(BIN)/ruff check --fix service tests bench

config: install  ## Regenerate config/default.toml from the Settings dataclass
	$(BIN)/python -c "from namesrv.config import render_default_toml as r; open('config/default.toml', 'w').write(r())"

clean:  ## Remove the virtualenv, caches and the embedded Redis data
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .data build dist
