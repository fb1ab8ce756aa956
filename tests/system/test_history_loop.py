"""History, gate and accept over real runs of a real loop device, before and after a change made to it
(``historyloop`` says which and what is checked). Throttled IOPS need a quiet machine: ``alone``.

The database these runs make is the recorded data of tests/cli/test_history_loop.py (the same checks,
in-process): ``IOLAB_RECORD=1`` writes it anew (``historydata.LOOP_RUNS``)."""

from __future__ import annotations

import lzma
from collections.abc import Iterator
from pathlib import Path

import pytest

import cgroup
import historydata
from clirun import iolab
from fakefio import RECORD
from historyloop import AFTER, BEFORE, CAP_IOPS, USUAL_IOPS, check_accept, check_gate, check_history
from loopdev import MiB, loop_device, loop_unavailable_reason


@pytest.fixture(scope="session")  # built once: the alone tests of other files run between these
def runs(request, tmp_path_factory) -> Iterator[Path]:
    """``BEFORE`` runs of a 4k random-read suite on a loop device (scheduler none, throttled at
    ``USUAL_IOPS``), then ``AFTER`` with the scheduler mq-deadline and the throttle at ``CAP_IOPS``; the
    database. With ``IOLAB_RECORD=1`` it becomes the recorded data when the checks on it have passed."""
    reason = cgroup.unavailable_reason() or loop_unavailable_reason()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("loop-history")
    suite = tmp / "nightly.yaml"
    suite.write_text("name: nightly\ndefaults: {ioengine: libaio, direct: 1, size: 16m, time_based: 1, runtime: 1s}\n"
                     "workloads:\n  - {name: randread-4k, rw: randread, bs: 4k, iodepth: 4}\n")
    db = tmp / "iolab.db"
    with loop_device(tmp, size_bytes=32 * MiB) as loop:
        scheduler = Path(f"/sys/block/{loop.name}/queue/scheduler")
        for name, cap, count in (("none", USUAL_IOPS, BEFORE), ("mq-deadline", CAP_IOPS, AFTER)):
            scheduler.write_text(name)
            with cgroup.throttled(loop.path, iops=cap) as group:
                for _ in range(count):
                    done = iolab("run", str(suite), "--target", f"loop={loop.path}", "--label", "nightly",
                                 "--tag", f"blkio=read_iops {cap}", db=db, cwd=tmp, wrapper=group.wrapper())
                    assert done.returncode == 0, done.stderr
    failed = request.session.testsfailed
    yield db
    if RECORD and request.session.testsfailed == failed:  # the recorded data of tests/cli/test_history_loop.py
        historydata.LOOP_RUNS.write_bytes(lzma.compress(db.read_bytes(), preset=9 | lzma.PRESET_EXTREME))


@pytest.mark.serial
def test_history_finds_the_change_and_what_changed(runs):
    check_history(iolab, runs)


@pytest.mark.serial
def test_gate_passes_a_usual_run_fails_the_first_throttled_one_and_wants_history(runs):
    check_gate(iolab, runs)


@pytest.mark.serial
def test_a_regression_fails_every_run_until_accepted(runs, tmp_path):
    check_accept(iolab, runs, tmp_path)
