# Neens — `make help` lists the targets.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.DEFAULT_GOAL := help

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml sdk/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ./sdk/python -e ".[dev]"
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install Neens, the SDK and the dev tools

serve: install ## Run the server on the embedded SQLite database (http://127.0.0.1:8000)
	$(BIN)/neens serve

test: install ## Run the whole test suite on SQLite and PostgreSQL
	$(BIN)/pytest $(PYTEST_ARGS)

check: install ## Lint and type-check (ruff + mypy --strict)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install ## Apply ruff's formatting and import order
	$(BIN)/ruff check --fix --select I .
	$(BIN)/ruff format .

openapi: install ## Write the OpenAPI contract to schemas/openapi.json
	$(BIN)/python -m neens.api.openapi_dump > schemas/openapi.json

bench: install ## Run the benchmarks (each prints a ratio against its baseline)
	$(BIN)/python bench/otlp_ingest.py
	$(BIN)/python bench/push_run.py

.PHONY: help install serve test check format openapi bench
