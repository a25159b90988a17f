# Two commands on a fresh machine: `make serve` and `make test`.
# Both create .venv and install the project into it the first time (or when pyproject changes).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test lint openapi sdk bench fuzz

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/loopwright serve

lint: $(STAMP)
	$(BIN)/ruff check app tests bench migrations sdk
	$(BIN)/ruff format --check app tests bench migrations sdk
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	$(BIN)/pytest

openapi: $(STAMP)
	$(BIN)/loopwright openapi --output openapi/openapi.json

# The Python SDK, generated from the OpenAPI document (not committed); fails on a generator warning.
sdk: $(STAMP)
	$(BIN)/python sdk/generate.py build/sdk/loopwright-client

bench: $(STAMP)
	$(BIN)/python bench/task_engine.py
	$(BIN)/python bench/agent_loop.py
	$(BIN)/python bench/sse_fanout.py

# Schemathesis against a live server on a scratch database: fails on any server error.
# Bounded (fixed seed, examples per operation, a time limit); not part of `make test`.
fuzz: $(STAMP)
	$(BIN)/python bench/fuzz.py
