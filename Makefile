# Neens — `make help` lists the targets.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Test-only packages installed without their declared dependencies (what they need is in
# pyproject's dev extras): traceloop-sdk declares every OpenLLMetry instrumentation (about forty
# packages, minutes to resolve), and opentelemetry-instrumentation-threading (which it imports)
# has no 0.66b2 release, while each release pins its own OpenTelemetry: resolved, it would
# downgrade the OpenTelemetry every other suite uses.
NO_DEPS_DEV := traceloop-sdk==0.62.4 opentelemetry-instrumentation-threading==0.66b1
# The browser tests' screenshots that docs/pages.md shows.
DOC_SCREENSHOTS := preprod-evals preprod-new preprod-run preprod-run-expanded compare \
	compare-trajectory datasets dataset-items sessions session insights sweeps sweep sweep-void \
	sweep-compare sweep-regressions share

.DEFAULT_GOAL := help

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml sdk/pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ./sdk -e ".[dev]"
	$(BIN)/pip install --quiet --no-deps $(NO_DEPS_DEV)
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install Neens, the SDK and the dev tools

demo: install ## Seed the worked example (simulated models, a real sweep) and serve it on :8000
	$(BIN)/neens demo --reset $(DEMO_ARGS)

demo-stack: demo ## The same as `make demo`: server, simulated models and the seeded sweep

serve: install ## Run the server on the embedded SQLite database (http://127.0.0.1:8000)
	$(BIN)/neens serve

# Two test processes per core (pytest-xdist): every test has its own databases and temp dir, so
# they run side by side, and many spend much of their time waiting (on the CLI, servers and
# workers they start, on PostgreSQL), which one process per core left idle: on 2 cores, 4
# processes ran the suite in 12.5 minutes where 2 took 16.5, with less CPU in all. Tests marked
# `alone` (they kill workers and servers and time leases and restarts, which a loaded machine
# would make late) run after the rest, one at a time.
# A module whose tests share one seeded server (tests/web) is an `xdist_group`, kept in one
# process by `--dist loadgroup`. `make test TEST_WORKERS=0` runs everything in this process, one
# at a time.
TEST_WORKERS ?= $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN) * 2 )))

# The suite starts hundreds of Python processes (the CLI, servers, workers): let them reuse
# compiled modules even where the machine sets PYTHONDONTWRITEBYTECODE (an empty value is unset).
test: export PYTHONDONTWRITEBYTECODE :=
# logfire (a test dependency) registers a pydantic plugin that every process importing pydantic
# would load with it: hundreds of server and CLI processes of the suite have no use for it.
test: export PYDANTIC_DISABLE_PLUGINS := logfire-plugin

# The `alone` run collects only the files that mark tests `alone` (collecting the whole suite
# again takes a quarter of a minute); `-m alone` still picks the tests.
ALONE_FILES = $(shell grep -rl --include='*.py' 'mark\.alone' tests sdk)

test: install test-ts ## Run the whole test suite on SQLite and PostgreSQL, and the TypeScript SDK's
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup -m "not alone" $(PYTEST_ARGS)
	$(BIN)/pytest -m alone $(PYTEST_ARGS) $(ALONE_FILES)

# The TypeScript SDK (sdk/typescript) with the machine's Node (20 or later) and npm: `npm ci` from
# its lockfile, then its build and node:test suite, the conformance table included.
test-ts: ## Build the TypeScript SDK and run its tests
	cd sdk/typescript && npm ci --no-audit --no-fund && npm test

check: install ## Lint and type-check (ruff + mypy --strict)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install ## Apply ruff's formatting and import order
	$(BIN)/ruff check --fix --select I .
	$(BIN)/ruff format .

openapi: install ## Write the OpenAPI contract to schemas/openapi.json
	$(BIN)/python -m neens.api.openapi_dump > schemas/openapi.json

screenshots: install ## Refresh docs/screenshots from the browser tests (needs chromium)
	NEENS_REQUIRE_BROWSER=1 $(BIN)/pytest -q -p no:cacheprovider tests/web/test_browser.py \
		tests/web/test_sweep_browser.py
	mkdir -p docs/screenshots
	for name in $(DOC_SCREENSHOTS); do \
		cp test-artifacts/screenshots/$$name.png docs/screenshots/; done

bench: install ## Run the benchmarks (each prints a ratio against its baseline)
	$(BIN)/python bench/otlp_ingest.py --reference
	$(BIN)/python bench/push_run.py
	$(BIN)/python bench/reads.py
	$(BIN)/python bench/sweep.py
	$(BIN)/python bench/decision.py
	$(BIN)/python bench/exp_compare.py
	$(BIN)/python bench/exp_run.py

.PHONY: help install demo demo-stack serve test test-ts check format openapi screenshots bench
