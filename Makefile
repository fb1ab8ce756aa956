# The README's two commands live here: `make run` (the main job) and `make test`.
# Both work on a fresh Debian machine: they create .venv, install iolab, and install the Debian
# packages they need (as root; otherwise they print the exact apt-get command and stop).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# The tiers (tests/conftest.py): `make test-fast` is lint, types and the fast tier (unit + cli: in-process, fio
# replayed from recordings, no fio started); `make test` is that, then the integration and system tiers in
# parallel (those marked `serial` one after another in one worker), then those that measure CPU time or
# sub-second timing (marker `alone`) one at a time with nothing beside them. Both phases run; either fails it.
WORKERS ?= 5

.PHONY: run test test-fast test-slow record docs setup setup-dev bench clean

run: setup
	$(BIN)/iolab run quick

test: test-fast test-slow

# The fast tier starts no fio, in its fixtures either: a fio first on PATH notes any call, and one fails it.
test-fast: setup-dev
	$(BIN)/ruff check src tests benchmarks docs/hooks
	$(BIN)/mypy
	rm -f .nofio.log
	PATH="$(CURDIR)/tests/support/nofio:$$PATH" IOLAB_NOFIO_LOG="$(CURDIR)/.nofio.log" $(BIN)/pytest -n 2 tests/unit tests/cli
	@if [ -s .nofio.log ]; then echo "the fast tier started fio:"; cat .nofio.log; exit 1; fi

test-slow: setup-dev
	rc=0; \
	$(BIN)/pytest -n $(WORKERS) --dist loadgroup -m "not alone" tests/integration tests/system || rc=$$?; \
	$(BIN)/pytest -p no:xdist -m alone tests/integration tests/system || rc=$$?; \
	exit $$rc

# Record with real fio what the fast tier's tests ask of fio and no recording holds yet (tests/data/fio-runs).
record: setup-dev
	IOLAB_RECORD=1 $(BIN)/pytest -p no:xdist tests/unit tests/cli

# The manual (mkdocs.yml; docs/): strict, so a broken link or a reference page the code cannot fill fails it.
docs: setup-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

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
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
