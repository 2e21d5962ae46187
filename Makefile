# The newcomer path: `make run` (the whole product with demo data) and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
# `make run HOST=0.0.0.0 PORT=9000 DASHBOARD_PORT=9501`, or any `coremem run` options in ARGS (they come last and win).
HOST ?= 127.0.0.1
PORT ?= 8000
DASHBOARD_PORT ?= 8501
ARGS ?=
# `make test` leaves out the long variants marked `slow` (the battery's big example counts); `.ci/run` runs them
# with `make test PYTEST_ARGS=`.
PYTEST_ARGS ?= -m "not slow"
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck pytest run serve migrate bench bench-search bench-injection bench-export bench-http \
	bench-turns bench-embed bench-extraction eval-search clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,local]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy backend shared dashboard

pytest: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

test: lint typecheck pytest

run: $(STAMP)
	$(BIN)/coremem run --host $(HOST) --port $(PORT) --dashboard-port $(DASHBOARD_PORT) $(ARGS)

serve: $(STAMP)
	$(BIN)/coremem serve

migrate: $(STAMP)
	$(BIN)/coremem migrate

# Benchmarks are not part of `make test`; results go to bench/results/.
bench-search: $(STAMP)
	$(BIN)/python -m bench.search

bench-injection: $(STAMP)
	$(BIN)/python -m bench.injection

bench-export: $(STAMP)
	$(BIN)/python -m bench.export

bench-http: $(STAMP)
	$(BIN)/python -m bench.http

bench-embed: $(STAMP)
	$(BIN)/python -m bench.embed

# Search quality on the labelled development set (tests/quality): full text only, hashing and local.
eval-search: $(STAMP)
	$(BIN)/python -m tests.quality.evaluate

bench-turns: $(STAMP)
	$(BIN)/python -m bench.turns

# Windows per second through the job queue (1 and 2 workers), time per window, the plan pass over 100k threads.
bench-extraction: $(STAMP)
	$(BIN)/python -m bench.extraction

bench: bench-search bench-injection bench-export bench-http bench-turns bench-embed bench-extraction

clean:
	rm -rf $(VENV) .coremem .pytest_cache .mypy_cache .ruff_cache
