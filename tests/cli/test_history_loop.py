"""History, gate and accept, in-process, over real runs of a real loop device before and after a change
made to it (``historyloop`` says which and what is checked).

The runs are recorded: the database that tests/system/test_history_loop.py made with real fio on a
throttled loop device (``historydata.LOOP_RUNS``; ``tests/data/history/README.md``), where the same checks
run on fresh runs."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

import historydata
from historyloop import check_accept, check_gate, check_history
from inprocess import iolab


@pytest.fixture
def runs(tmp_path) -> Path:
    """A copy of the recorded database (``historyloop``: 8 runs, then 8 after the change)."""
    db = tmp_path / "iolab.db"
    db.write_bytes(lzma.decompress(historydata.LOOP_RUNS.read_bytes()))
    return db


def test_history_finds_the_change_and_what_changed(runs):
    check_history(iolab, runs)


def test_gate_passes_a_usual_run_fails_the_first_throttled_one_and_wants_history(runs):
    check_gate(iolab, runs)


def test_a_regression_fails_every_run_until_accepted(runs, tmp_path):
    check_accept(iolab, runs, tmp_path)
