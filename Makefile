# namesrv-fleet: `make run` serves, `make test` runs the whole suite. Both install what they need.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS ?= dev,pipeline

.PHONY: help install run test test-unit lint format config clean bench bench-smoke bench-pipeline lock image image-test  ## (targets)

help:  ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 14

# constraints.lock (exported from uv.lock) pins every package, so nothing floats to a new release.
$(STAMP): pyproject.toml constraints.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.lock -e '.[$(EXTRAS)]'
	@touch $(STAMP)

install: $(STAMP)  ## Create .venv (idempotent) and install the service with its dev tools

run: install  ## Start the service (embedded Redis unless REDIS_URL/NAMESRV_REDIS_URL is set)
	$(BIN)/namesrv

test: install  ## Run the whole test suite (starts its own Redis servers)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-unit: install  ## The fast tier alone: codec, dialects, config, Lua contract, route cache rules (no servers)
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

LUACHECK ?= luacheck

lint: install  ## ruff + mypy + luacheck (Lua skipped, with a message, when luacheck is absent)
	$(BIN)/ruff check service tests bench
	$(BIN)/ruff format --check service tests bench
	$(BIN)/mypy
	$(BIN)/mypy --strict bench
	@if command -v $(LUACHECK) >/dev/null; then \
		echo "$(LUACHECK) lua/"; $(LUACHECK) --config .luacheckrc --formatter plain lua/; \
	else \
		echo "lint: luacheck not found, lua/ NOT linted (Debian/Ubuntu: apt-get install lua-check)"; \
	fi

lock:  ## Resolve uv.lock again (after a dependency change); export requirements.lock and constraints.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv
	$(BIN)/uv lock $(LOCK_ARGS)
	$(BIN)/uv export --quiet --frozen --no-dev --no-emit-project --format requirements-txt -o requirements.lock
	$(BIN)/uv export --quiet --frozen --all-extras --no-dev --no-emit-project --no-hashes --format requirements-txt -o constraints.lock

image:  ## Build the container image (tag <version>-<git sha>; BASE_IMAGE=... to choose the base) and print its size
	docker/build-image.sh

image-test: install  ## Build the image and run it against a loopback Redis (skipped when no Docker engine answers)
	$(BIN)/python -m pytest tests/image $(PYTEST_ARGS)

# BENCH_ARGS passes flags through, e.g. make bench BENCH_ARGS="--duration 10 --wait-quiet 120"
BENCH_ARGS ?=

bench: install  ## Benchmark the fleet against its targets: one table (+ JSON in bench/results/), a few minutes
	$(BIN)/python -m bench $(BENCH_ARGS)

bench-smoke: install  ## The benchmark at tiny sizes (~40 s): checks the harness works, numbers mean nothing
	$(BIN)/python -m bench --smoke $(BENCH_ARGS)

bench-pipeline: install  ## Route-history pipeline: 10M synthetic events end to end on local[2], and partition scaling
	$(BIN)/python bench/pipeline_bench.py $(PIPELINE_BENCH_ARGS)

.PHONY: faults
faults: install  ## Fault suite at full length (Redis restarts, SIGSTOP, Sentinel, proxy faults): a Markdown table
	$(BIN)/python -m tests.faults $(FAULTS_ARGS)

format: install  ## Format the code with ruff
	$(BIN)/ruff format service tests bench
	$(BIN)/ruff check --fix service tests bench

config: install  ## Regenerate config/default.toml from the Settings dataclass
	$(BIN)/python -c "from namesrv.config import render_default_toml as r; open('config/default.toml', 'w').write(r())"

clean:  ## Remove the virtualenv, caches and the embedded Redis data
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .data build dist
