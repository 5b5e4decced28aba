# namesrv-fleet: `make run` serves, `make test` runs the whole suite. Both install what they need.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS ?= dev,pipeline

.PHONY: help install run test lint format typecheck clean bench-pipeline  ## (targets)

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
	$(BIN)/ruff check service tests
	$(BIN)/ruff format --check service tests
	$(BIN)/mypy

bench-pipeline: install  ## Route-history pipeline: 10M synthetic events end to end on local[2], and partition scaling
	$(BIN)/python bench/pipeline_bench.py $(BENCH_ARGS)

format: install  ## Format the code with ruff
	$(BIN)/ruff format service tests
	$(BIN)/ruff check --fix service tests

clean:  ## Remove the virtualenv, caches and the embedded Redis data
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .data build dist
