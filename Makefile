# The README's two commands live here: `make run` (the main job) and `make test`.
# Both work on a fresh Debian machine: they create .venv, install iolab, and install the Debian
# packages they need (as root; otherwise they print the exact apt-get command and stop).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test setup setup-dev bench clean

run: setup
	$(BIN)/iolab run quick

test: setup-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/pytest

setup: $(VENV)/.installed
	scripts/system-packages run

setup-dev: $(VENV)/.installed-dev
	scripts/system-packages test

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

bench: setup
	$(BIN)/python benchmarks/overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
