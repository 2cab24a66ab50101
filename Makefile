# Two entry points, both self-contained: a local virtualenv in .venv, no root, no system Redis.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.demo-installed

.PHONY: demo test quick dist docs docs-serve bench bench-compare bench-exactness bench-failover bench-unique bench-vs-prometheus clean
CODE := src tests benchmarks examples tools
# pytest keeps the test modules it rewrote (and Python the modules it compiled) in __pycache__:
# an environment with PYTHONDONTWRITEBYTECODE set rewrote ~500 modules at every start, 7 s of
# each xdist worker's collection.
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest
# The docs site: --strict turns a broken link or anchor, or a stale generated reference page,
# into an error (never --quiet: it hides the warnings strict mode counts). ~2 s.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs

# What the demo runs and nothing more (slicecount[demo]: no test or lint tools, no browser).
demo: $(DEMO_STAMP)
	$(BIN)/slicecount demo

# Everything, with coverage: what .ci/run and the README run. The tests run on every core
# (pytest-xdist; each worker starts its own servers on free ports). The 25 slowest are listed
# at the end: where to cut first when the run grows.
test: $(STAMP)
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)
	$(BIN)/mypy
	$(MKDOCS) build --strict
	$(PYTEST) -n auto --cov --cov-report= --durations=25
	$(BIN)/coverage report

# The inner loop (under a minute): the same checks, minus the tests marked slow. mypy runs
# beside the tests (a cold mypy takes ~20 s) and reports after them. The fuzzing module is all
# slow, and only collecting it builds a test per endpoint: 3 s of each worker, so not collected.
QUICK_SKIPS := --ignore=tests/datasource/test_schemathesis.py
quick: $(STAMP)
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)
	$(MKDOCS) build --strict
	@types=$$(mktemp); $(BIN)/mypy >$$types 2>&1 & mypy=$$!; \
	echo "$(BIN)/mypy (in the background) and $(PYTEST) -q -n auto -m 'not slow' $(QUICK_SKIPS)"; \
	$(PYTEST) -q -n auto -m "not slow" $(QUICK_SKIPS); tests=$$?; \
	wait $$mypy; typed=$$?; cat $$types; rm -f $$types; \
	test $$tests -eq 0 && test $$typed -eq 0

# The reference pages (configuration, CLI) written again from the code, then the site in site/
docs: $(STAMP)
	$(BIN)/python tools/docs_reference.py
	$(MKDOCS) build --strict

docs-serve: $(STAMP)
	$(BIN)/python tools/docs_reference.py
	$(MKDOCS) serve

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_recorder.py
	$(BIN)/python benchmarks/bench_middleware.py
	$(BIN)/python benchmarks/bench_exemplars.py
	$(BIN)/python benchmarks/bench_django.py
	$(BIN)/python benchmarks/bench_throttle.py
	$(BIN)/python benchmarks/bench_datasource.py
	$(BIN)/python benchmarks/bench_datasource_load.py
	$(BIN)/python benchmarks/bench_prometheus.py
	$(BIN)/python benchmarks/bench_cleaner.py
	$(BIN)/python benchmarks/bench_cluster.py
	$(BIN)/python benchmarks/bench_vs_prometheus.py

# Unique counts (issue 15): add_unique() rate, flush cost and Redis memory, then how a flush
# should encode the values (PFADD per value / per slice / an in-process HyperLogLog), a few minutes
bench-unique: $(STAMP)
	$(BIN)/python benchmarks/bench_unique.py $(ARGS)
	$(BIN)/python benchmarks/bench_unique_encoding.py --skip-naive

# slicecount and a real Prometheus (Debian's) count the same known traffic (a few minutes)
bench-exactness: $(STAMP)
	$(BIN)/python benchmarks/bench_prometheus_exactness.py $(ARGS)

# slicecount beside Debian's Prometheus on the same seeded 2 h of traffic (40 and 80 routes):
# dashboard refreshes, bytes, accuracy (issue 24's baseline; ARGS=--quick for a small run)
bench-vs-prometheus: $(STAMP)
	$(BIN)/python benchmarks/bench_vs_prometheus.py $(ARGS)

# What a failover loses: writers through a master's SIGKILL, cluster and Sentinel (minutes)
bench-failover: $(STAMP)
	$(BIN)/python benchmarks/bench_failover.py $(ARGS)

# Before/after: make bench-compare BEFORE=main (any git revision; ARGS=--quick for small sizes)
BEFORE ?= HEAD
bench-compare: $(STAMP)
	$(BIN)/python benchmarks/compare.py --before $(BEFORE) $(ARGS)

# The release files in dist/, checked as PyPI would check them (make test does the same in
# tests/test_packaging.py, in a temporary folder).
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# $(call install,EXTRA): the virtualenv with slicecount (editable) and EXTRA, then the stamp
define install
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "slicecount needs Python >= 3.10")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[$(1)]'
	touch $@
endef

$(STAMP): pyproject.toml
	$(call install,dev)

$(DEMO_STAMP): pyproject.toml
	$(call install,demo)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .coverage build dist site
