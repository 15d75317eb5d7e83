# engram — every target sets up what it needs; CI (.ci/run) calls the same targets.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.engram-installed

.DEFAULT_GOAL := help
.PHONY: help install model run test coverage test-ops lint format fmt-check ruff typecheck arch bench bench-smoke bench-peers clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-installs only when pyproject.toml changes; a present, current .venv costs nothing.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

install: $(STAMP)  ## create .venv and install engram with its dev tools

model: $(STAMP)  ## assemble the offline embedding model directory (a quick check when present)
	@$(BIN)/engram prepare-model

run: model  ## start the kernel on the embedded Postgres (Ctrl-C stops it)
	$(BIN)/engram serve

# Two pytest processes, each with its own embedded PostgreSQL and model, a test file to one
# process at a time: the suite waits on the database and on child processes much of the
# time, and took 817 s this way against 1,346 s in one process (2 cores, ADR-023).
TEST_WORKERS ?= 2

test: model  ## run the whole test suite against the embedded Postgres (TEST_WORKERS processes)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# Line and branch coverage of src/engram over the whole suite, child processes (the CLI, the
# served app) included; timing tests may fail under the tracer's slowdown.
coverage: model  ## the test suite with coverage (report in the terminal and .coverage.json)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --cov=engram \
		--cov-report=term:skip-covered --cov-report=json:.coverage.json

# Debian's prometheus package brings prometheus and promtool; installed only when missing.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

test-ops: model  ## the dashboard and alerts against a real engram + Prometheus (installs prometheus)
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || { \
		echo "installing Debian's prometheus package (prometheus, promtool)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
	ENGRAM_OPS_TESTS=1 $(BIN)/python -m pytest tests/ops -s

fmt-check: $(STAMP)
	$(BIN)/ruff format --check src tests benchmarks tools

ruff: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools

typecheck: $(STAMP)  ## mypy --strict on src/ and benchmarks/
	$(BIN)/mypy --strict src benchmarks

arch: $(STAMP)  ## import boundaries (.importlinter)
	$(BIN)/lint-imports

lint: fmt-check ruff typecheck arch  ## ruff format --check, ruff check, mypy --strict, lint-imports

format: $(STAMP)  ## rewrite files with ruff format and safe fixes
	$(BIN)/ruff format src tests benchmarks tools
	$(BIN)/ruff check --fix src tests benchmarks tools

# Every script in benchmarks/ but the peer comparisons (agent_text, harness, seed_versions and
# stats are their helpers; peers/ holds the peer comparisons' drivers).
BENCHMARKS := cold_start pii_eval conflict_eval conflict_stream gate_bench write_cpu_budget temporal_bench \
	search_bench http_write_bench audit_append_bench consolidation_eval consolidation_bench \
	scheduler_bench advisor_eval advisor_rl cli_startup recall_floor_eval retrieval_eval \
	relevance_calibration

bench: model  ## run the benchmarks (each prints one JSON object; several minutes)
	@set -e; for b in $(BENCHMARKS); do $(BIN)/python -m benchmarks.$$b; done

bench-smoke: model  ## run each benchmark once at a tiny size; each must print one JSON object
	$(BIN)/python -m benchmarks.smoke $(BENCHMARKS)

# Mem0 goes into its own virtualenv (.peers/, from PyPI on first use), never into $(VENV).
bench-peers: model  ## engram beside Mem0 in one run: speed and RSS, then relevance (~17 min)
	$(BIN)/python -m benchmarks.peer_mem0
	$(BIN)/python -m benchmarks.peer_relevance

clean:  ## remove the virtualenv and caches (keeps the data dir .engram)
	rm -rf $(VENV) .peers .pytest_cache .mypy_cache .ruff_cache
