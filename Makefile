# Two entry points, both self-contained: a local virtualenv in .venv, no root, no system Redis.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

demo: $(STAMP)
	$(BIN)/slicecount demo

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/coverage run -m pytest
	$(BIN)/coverage report

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_recorder.py
	$(BIN)/python benchmarks/bench_middleware.py
	$(BIN)/python benchmarks/bench_datasource.py
	$(BIN)/python benchmarks/bench_cleaner.py

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "slicecount needs Python >= 3.10")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .coverage build dist
