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
# The suite runs in two processes (pytest-xdist), each with its own embedded PostgreSQL; a test file stays in one
# process, so its module fixtures are built once. `make test PYTEST_WORKERS=0` runs it in this process alone.
PYTEST_WORKERS ?= 2
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck pytest run serve migrate bench bench-search bench-injection bench-export bench-http \
	bench-turns bench-embed bench-dashboard bench-rls bench-packing bench-writes bench-extraction bench-admin \
	bench-vector eval-search clean

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
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

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

# Issue 16 goal 2: the block's packing over 10,000 random (person, budget) cases of the injection data set.
bench-packing: $(STAMP)
	$(BIN)/python -m bench.packing

bench-http: $(STAMP)
	$(BIN)/python -m bench.http

# Issue 16 goal 3: vector search as one person over 1M 384-dimension vectors, recall and speed.
bench-vector: $(STAMP)
	$(BIN)/python -m bench.vector

# Issue 16 goal 5: POST /memory/batch against COPY, POST /memory against a hand-written transaction.
bench-writes: $(STAMP)
	$(BIN)/python -m bench.writes

bench-embed: $(STAMP)
	$(BIN)/python -m bench.embed

bench-dashboard: $(STAMP)
	$(BIN)/python -m bench.dashboard

# Row-level security's cost per statement, on bench-http's data set (build it with `make bench-http` first).
bench-rls: $(STAMP)
	$(BIN)/python -m bench.rls

# Search quality on the labelled development set (tests/quality): full text only, hashing and local.
eval-search: $(STAMP)
	$(BIN)/python -m tests.quality.evaluate

bench-turns: $(STAMP)
	$(BIN)/python -m bench.turns

# Windows per second through the job queue (1 and 2 workers), time per window, the plan pass over 100k threads.
bench-extraction: $(STAMP)
	$(BIN)/python -m bench.extraction

# Issue 16 goal 7: GET /memory/stats and every dashboard page's first render (headless Chromium) at 1M records, on
# bench-injection's data set (built first when missing).
bench-admin: $(STAMP)
	$(BIN)/python -m bench.admin

# Every benchmark in turn, each printing PASS or FAIL per goal with its numbers (docs/performance.md); a failing goal
# does not stop the run, a benchmark that breaks does (after the others ran). Then the goals table of all reports,
# bench/results/summary.md.
BENCHES := injection packing vector search writes export http turns embed dashboard rls extraction admin
bench: $(STAMP)
	@broken=""; for name in $(BENCHES); do $(MAKE) --no-print-directory bench-$$name || broken="$$broken $$name"; \
	done; $(BIN)/python -m bench.summary $(BENCHES); \
	if [ -n "$$broken" ]; then echo "benchmarks that broke:$$broken"; exit 1; fi

clean:
	rm -rf $(VENV) .coremem .pytest_cache .mypy_cache .ruff_cache
