"""Seeded fuzzing: damaged fio outputs through the real import path into a real SQLite store (0
tracebacks, 0 unreadable runs, 0 impossible values). The long run is scripts/fuzz-import; damaged
suites: tests/unit/describe/test_fuzz_suites.py.

The outputs are tests/data/fio's, the lab's shared samples and fio 3.33's json+ reports of the
hostile report runs, as recorded for the fake fio (tests/data/fio-runs/support/reportrun.jsonl.xz):
no fio runs here. ``IOLAB_FUZZ_COUNT`` changes the number of fio outputs (default 2500),
``IOLAB_FUZZ_SEED`` the seed.
"""

from __future__ import annotations

import os

import pytest

import fuzzing
import reportrun
from iolab.store.database import Store

COUNT = int(os.environ.get("IOLAB_FUZZ_COUNT", "2500"))
SEED = int(os.environ.get("IOLAB_FUZZ_SEED", "15"))


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    """Outputs real fio wrote (json+ of two clones, the job names hostile), to fuzz beside the samples."""
    return fuzzing.recorded_outputs(reportrun.BOOK)


def test_fuzzed_fio_outputs_import_or_are_refused_and_every_stored_run_reads_back(tmp_path, generated):
    store = Store(f"sqlite:///{tmp_path}/fuzz.db")
    (tmp_path / "in").mkdir()
    tally = fuzzing.run(store, tmp_path / "in", COUNT, SEED, extra=generated)
    print(tally.summary())
    assert tally.inputs == COUNT >= 2000 or COUNT < 2000
    assert not tally.tracebacks, tally.tracebacks[0]
    assert not tally.unreadable, tally.unreadable[:5]
    assert not tally.impossible, tally.impossible[:5]
    # both outcomes are exercised, and every kind of damage was made
    assert tally.imported > COUNT / 10 and sum(tally.refused.values()) > COUNT / 3
    assert set(tally.mutations) == set(fuzzing._WEIGHTS)


def test_the_fuzzer_is_deterministic():
    sources = fuzzing.seeds()
    first = [(n, k, d) for _, n, k, d in fuzzing.inputs(50, 7, sources)]
    assert first == [(n, k, d) for _, n, k, d in fuzzing.inputs(50, 7, sources)]
