# noisyloop: the two Quick start commands are `make serve` and `make test`.
# Both create the virtual environment in .venv on first use (Python 3.11+).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# `make test` runs the suite in this many pytest processes (pytest-xdist), each test file
# whole in one of them (its module fixtures, servers and Redis start once); 1 runs it in one.
TEST_WORKERS ?= 2

.PHONY: install serve test test-fast test-mutants lint bench-learners bench-service fuzz-long soak clean

# The server, its extras and the client (clients/python, distribution noisyloop-client, from
# the checkout: it is on no index): everything the tests need.
$(STAMP): pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e './clients/python[fast]' -e '.[lab,dev,bench,parquet,spark,peer,personalizer]'
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/noisyloop serve

test: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The edit-test loop's environment: the service and the test runner (the `test` extra), none
# of the extras only the full suite needs (torch, Spark, the browser, Kafka, the SDKs).  The
# venv's own pip does (it installs editable projects), and --no-compile leaves the bytecode
# to the modules the tests import: on a fresh clone the install took 12 s of CPU instead of 36.
FAST_STAMP := $(VENV)/.fast-stamp
$(FAST_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --no-compile -e '.[test]'
	touch $(FAST_STAMP)

# The edit-test loop (README, "Tests"): the learners' unit and contract tests with their
# doctests, the store, the API's basics (models, predict and feedback, errors, admin, routing,
# tasks) and the layer, import-cycle and docs checks; none marked slow.
FAST_TESTS := tests/learners app/learners tests/store app/store \
  tests/api/test_models.py tests/api/test_predict_feedback.py tests/api/test_error_messages.py \
  tests/api/test_admin.py tests/api/test_routing.py tests/api/test_tasks.py \
  tests/tasks/test_registry.py tests/test_layers.py tests/test_import_cycles.py tests/test_docs.py
test-fast: $(FAST_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(BIN)/pytest -m "not slow" $(FAST_TESTS) $(PYTEST_ARGS)

# The truth suite against plausible bugs (tests/mutants.py: each put in a copy of the tree,
# each must make a truth test fail); a few minutes, so not part of `make test`.
test-mutants: $(STAMP)
	$(BIN)/python -m tests.mutants --json bench/results/mutants.json

# Both tools read what to check and how strictly from pyproject.toml (tests/test_lint.py runs
# the same two commands inside `make test`).
lint: $(STAMP)
	$(BIN)/ruff check
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# Reliability: the long fuzz run (CI runs 20 examples per operation) and the soak test.
FUZZ_EXAMPLES ?= 200
fuzz-long: $(STAMP)
	NOISYLOOP_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) NOISYLOOP_FUZZ_REPORT=fuzz-report.json \
	  OPENBLAS_NUM_THREADS=1 $(BIN)/pytest -q -s -p no:cacheprovider \
	  tests/reliability/test_fuzz.py tests/reliability/test_fuzz_messages.py \
	  tests/reliability/test_fuzz_extremes.py

SOAK_MINUTES ?= 10
soak: $(STAMP)
	$(BIN)/python bench/soak.py --minutes $(SOAK_MINUTES) --json soak.json

# Benchmarks: the figures of docs/benchmarks/*.md; raw outputs go to bench/results/. The
# learners' same-run reference is Vowpal Wabbit, the `bench` extra, which `make install`
# installs with `dev` (PyPI has binary wheels, CPython 3.11 on Linux x86_64 included).
bench-learners: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(BIN)/noisyloop bench learners --json bench/results/learners.json

bench-service: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(BIN)/noisyloop bench service \
	  --json bench/results/service-full-1worker.json
	OPENBLAS_NUM_THREADS=1 $(BIN)/noisyloop bench service --api-workers 2 \
	  --json bench/results/service-full-2workers.json
