"""Output fitted to the terminal, as printed: at 80 columns ``compare`` and ``gate`` keep every
identifying value whole (target, workload, direction, metric, verdict), wrapped or listed row by row,
never dropped or cut; piped output honours ``COLUMNS``; a long workload name is whole at any width; an
error is wrapped to the terminal, one line when piped.

The runs are real: the recorded loop-device history (``historydata.LOOP_RUNS``)."""

from __future__ import annotations

import contextlib
import lzma
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

import historydata
from inprocess import iolab
from iolab.store.database import Store
from storedruns import store_run

METRICS = ("IOPS", "bw MiB/s", "clat mean", "clat p50", "clat p99", "clat p99.9", "lat mean", "slat mean")


@pytest.fixture
def runs(tmp_path) -> Path:
    db = tmp_path / "iolab.db"
    db.write_bytes(lzma.decompress(historydata.LOOP_RUNS.read_bytes()))
    return db


def _fits(text: str, width: int) -> None:
    assert max(map(len, text.splitlines())) <= width, text


@pytest.mark.parametrize("width", [80, 100, 120])
def test_compare_keeps_workload_direction_metric_and_verdict_whole(runs, width):
    proc = iolab("compare", "1", "9", env={"COLUMNS": str(width)}, db=runs)
    assert proc.returncode == 0, proc.stderr
    _fits(proc.stdout, width)
    text = proc.stdout
    for metric in METRICS:  # every row: its metric, and beside it its workload, direction and verdict
        assert re.search(rf"\b{re.escape(metric)}\b", text), metric
    assert text.count("randread-4k") >= len(METRICS) and text.count("worse (untested)") >= len(METRICS)
    assert len(re.findall(r"\bread\b", text)) >= len(METRICS)


@pytest.mark.parametrize("width", [80, 120])
def test_gate_keeps_target_workload_metric_and_verdict_whole(runs, width):
    proc = iolab("gate", "12", env={"COLUMNS": str(width)}, db=runs)
    assert proc.returncode == 3, proc.stderr
    _fits(proc.stdout, width)
    for metric in ("iops", "bw", "clat_mean", "clat_p99", "cpu_us_per_io"):
        assert re.search(rf"\b{metric}\b", proc.stdout), metric
    assert proc.stdout.count("randread-4k (read)") == 5 and proc.stdout.count("regression") >= 4
    assert len(re.findall(r"\bloop\b", proc.stdout)) == 5


def test_piped_output_honours_columns_else_is_160_wide(runs):
    for width in (72, 100, 140):
        _fits(iolab("compare", "1", "9", env={"COLUMNS": str(width)}, db=runs).stdout, width)
    unset = iolab("compare", "1", "9", env={"COLUMNS": ""}, db=runs).stdout
    _fits(unset, 160)
    assert "━━━" in unset  # a grid: 160 columns hold it


def test_a_long_workload_name_is_never_cut(tmp_path):
    db = tmp_path / "iolab.db"
    name = "randread-4k-qd32-numjobs4-rate_iops1000-sched_mq-deadline-ra128-ceph-rbd"  # 70 characters
    store = Store(f"sqlite:///{db}")
    store_run(store, "a", {name: [(1000, 1e5)]})
    store_run(store, "b", {name: [(1200, 1e5)]})
    store.close()
    for width in ("80", "160"):
        for args in (("show", "a"), ("compare", "a", "b")):
            proc = iolab(*args, env={"COLUMNS": width}, db=db)
            assert proc.returncode == 0 and name in proc.stdout, (args, width, proc.stdout)
            _fits(proc.stdout, int(width))


def test_an_error_is_wrapped_to_the_terminal_and_one_line_when_piped(runs):
    """The gate's error names five metrics and the run's history: on an 80-column terminal it is wrapped
    and continued under its text; piped (scripts grep it) it stays one line."""
    argv = [sys.executable, "-m", "iolab", "--db", str(runs), "gate", "9", "--all", "--max-regression", "30%"]
    env = {**os.environ, "COLUMNS": "80"}
    terminal, tty = pty.openpty()
    with open(terminal, "rb", buffering=0) as reader:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=tty, env=env,
                              check=False, timeout=120)
        os.close(tty)
        shown = b""
        with contextlib.suppress(OSError):  # EIO: the other end closed
            while chunk := reader.read(65536):
                shown += chunk
    assert done.returncode == 3
    lines = shown.decode().replace("\r\n", "\n").splitlines()
    error = [line for line in lines if line.startswith("Error: ")]
    assert error and max(map(len, lines)) <= 80, lines
    at = lines.index(error[0])
    assert lines[at + 1].startswith(" " * len("Error: ")) and not lines[at + 1].startswith(" " * 8), lines
    hint = next(i for i in range(at, len(lines)) if lines[i].startswith("Hint: "))
    piped = iolab("gate", "9", "--all", "--max-regression", "30%", env={"COLUMNS": "80"}, db=runs)
    assert piped.stderr.splitlines()[0] == " ".join(line.strip() for line in lines[at:hint])


def test_a_multiline_error_keeps_its_lines_and_their_indents_when_wrapped():
    from iolab.cli import wrapped

    text = "target t: preflight failed for 1 of 1 host(s):\n  10.0.0.2:8765: " + "the server closed " * 5
    lines = wrapped("Error", text, 60)
    assert lines[0] == "Error: target t: preflight failed for 1 of 1 host(s):"
    assert lines[1].startswith("  10.0.0.2:8765: the server") and len(lines) == 3
    assert all(line.startswith("  ") and len(line) <= 60 for line in lines[1:])
    assert " ".join(" ".join(lines).split()) == " ".join(f"Error: {text}".split())
