"""The local runner against real fio: small files, short runtimes. (What needs no fio: ``tests/unit/runner``.)"""

import json
import signal
import threading
import time
from pathlib import Path

import pytest

from iolab.runner import local


def job(tmp_path: Path, **extra: str) -> str:
    options = {"filename": str(tmp_path / "data"), "size": "16m", "rw": "randread", "bs": "4k",
               "ioengine": "libaio", "direct": "1", "iodepth": "8", "time_based": "1", "runtime": "2", **extra}
    return "[t]\n" + "".join(f"{k}={v}\n" for k, v in options.items())


def test_ok_run_has_exact_iops_and_live_status(tmp_path):
    seen = []
    outcome = local.run(job(tmp_path), tmp_path / "w", on_status=seen.append)
    assert outcome.status == "ok", outcome.error
    assert outcome.report is not None and outcome.report.source_format == "json+"
    (j,) = outcome.report.jobs
    read = j.directions["read"]
    assert read.iops == pytest.approx(read.total_ios * 1000 / read.runtime_ms, rel=1e-12)
    assert read.clat is not None and read.clat.bins_ns and sum(read.clat.bins_ns.values()) == read.clat.samples
    assert 1 <= len(seen) <= 4 and all(s.iops and s.iops > 0 for s in seen)
    assert json.loads(outcome.raw_json)["jobs"][0]["read"]["total_ios"] == read.total_ios  # the final report only


def test_a_run_returns_when_fio_exits_without_sleeping(tmp_path, monkeypatch):
    """``Popen.wait(timeout=…)`` sleeps in steps of up to 50 ms, which the end of every job waited
    out; the runner waits on a pidfd and sleeps never."""
    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"slept {seconds} s")

    seen = []
    monkeypatch.setattr(time, "sleep", no_sleep)
    outcome = local.run(job(tmp_path, runtime="1"), tmp_path / "w", on_status=seen.append)
    monkeypatch.undo()
    assert outcome.status == "ok", outcome.error
    assert seen and outcome.time_series


def test_a_failing_job_is_reported_with_fios_message(tmp_path):
    outcome = local.run(job(tmp_path, ioengine="no_such_engine"), tmp_path / "w")
    assert outcome.status == "failed"
    assert "no_such_engine" in outcome.error


def test_a_job_error_errno_fails_the_outcome(tmp_path):
    # O_DIRECT with a block size that is not a multiple of the logical block size: EINVAL per I/O
    outcome = local.run(job(tmp_path, bs="1000", time_based="0", runtime="1"), tmp_path / "w")
    assert outcome.status == "failed"
    assert "errno 22" in outcome.error and "Invalid argument" in outcome.error


def test_check_job_quotes_fio(tmp_path):
    assert local.check_job(job(tmp_path), tmp_path) is None
    problem = local.check_job(job(tmp_path, iodepht="4"), tmp_path)
    assert "Bad option <iodepht=4>" in problem and "Did you mean iodepth?" in problem


def test_timeout_stops_fio(tmp_path):
    outcome = local.run(job(tmp_path, runtime="30"), tmp_path / "w", timeout_s=2)
    assert outcome.status == "failed" and "time bound" in outcome.error
    assert (outcome.ended_at - outcome.started_at).total_seconds() < 10


def test_keyboard_interrupt_stops_fio_and_propagates(tmp_path):
    # Python's own SIGINT handler, whatever an earlier test in this worker left installed (the
    # in-process CLI's defers a signal that lands in logging): once, in CI, no KeyboardInterrupt came
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.5, lambda: signal.raise_signal(signal.SIGINT))
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            local.run(job(tmp_path, runtime="30"), tmp_path / "w")
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 10


def test_fio_version_is_asked_once_per_binary(tmp_path):
    """A run asks fio's version from several threads; a different binary at the same path (an upgrade
    between two runs of a workflow) is asked anew."""
    fake, ran = tmp_path / "fio", tmp_path / "ran"
    fake.write_text(f"#!/bin/sh\necho x >> {ran}\necho fio-3.33\n")
    fake.chmod(0o755)
    assert local.fio_version(str(fake)) == local.fio_version(str(fake)) == "3.33"
    assert len(ran.read_text().splitlines()) == 1
    fake.write_text(f"#!/bin/sh\necho x >> {ran}\necho fio-3.41.1\n")  # another size: another binary
    assert local.fio_version(str(fake)) == "3.41.1"
    assert len(ran.read_text().splitlines()) == 2
