"""History and gate over real runs of a real loop device, before and after a change made to it: its I/O
scheduler switched (a fact iolab records) and its blkio throttle lowered tenfold (recorded by the team
as a tag, as one records what iolab cannot see). The runs before are throttled too, so that their
IOPS are the throttle's and not this shared machine's: a CI machine's neighbours once made a usual
run 42 % slower than its history, and the gate rightly failed it. Throttled IOPS need a quiet machine:
``alone``.

The database these runs make is the recorded data of tests/cli/test_history_loop.py (the same checks,
in-process): ``IOLAB_RECORD=1`` writes it anew (``historydata.LOOP_RUNS``)."""

from __future__ import annotations

import json
import lzma
from collections.abc import Iterator
from pathlib import Path

import pytest

import cgroup
import historydata
from clirun import iolab
from fakefio import RECORD
from loopdev import MiB, loop_device, loop_unavailable_reason

BEFORE = AFTER = 8
USUAL_IOPS, CAP_IOPS = 3000, 300


@pytest.fixture(scope="session")  # built once: the alone tests of other files run between these two
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


@pytest.mark.alone
def test_history_finds_the_change_and_what_changed(runs):
    done = iolab("history", "nightly", "--metric", "iops,clat_mean", "--format", "json", db=runs)
    assert done.returncode == 0, done.stderr
    series = {s["metric"]: s for s in json.loads(done.stdout)["series"]}
    assert set(series) == {"iops", "clat_mean"}
    for name, s in series.items():
        assert (s["target"], s["workload"], s["direction"]) == ("loop", "randread-4k", "read")
        assert [p["run"] for p in s["points"]] == list(range(1, BEFORE + AFTER + 1))
        (change,) = s["change_points"]
        assert (change["run"], change["previous_run"]) == (BEFORE + 1, BEFORE), name
        assert change["p_value"] <= 0.005
        assert change["verdict"] == "worse"
        what = {w["what"]: (w["before"], w["after"]) for w in change["what_changed"]}
        assert what["scheduler"] == ("none", "mq-deadline")
        assert what["tag blkio"] == (f"read_iops {USUAL_IOPS}", f"read_iops {CAP_IOPS}")
    iops = series["iops"]["change_points"][0]
    assert iops["after"] < CAP_IOPS * 1.05 and USUAL_IOPS * 0.8 < iops["before"] < USUAL_IOPS * 1.05
    table = iolab("history", "nightly", "--metric", "iops", db=runs)
    assert "run 9: -" in table.stdout and "scheduler none →" in table.stdout and "mq-deadline;" in table.stdout


@pytest.mark.alone
def test_gate_passes_a_usual_run_fails_the_first_throttled_one_and_wants_history(runs):
    # a usual run's IOPS are its throttle's; its p99 is still this shared machine's (a scheduling hiccup
    # is a tail event), so the usual run is judged on IOPS and bandwidth; the change is 10x on every metric
    usual = iolab("gate", str(BEFORE), "--max-regression", "30%", "--metric", "iops", "--metric", "bw", db=runs)
    assert usual.returncode == 0, usual.stdout + usual.stderr
    assert f"run {BEFORE}: no regression in" in usual.stderr
    throttled = iolab("gate", str(BEFORE + 1), "--max-regression", "30%", db=runs)
    assert throttled.returncode == 3, throttled.stdout + throttled.stderr
    assert throttled.stderr.startswith(f"Error: run {BEFORE + 1} is worse than its history in ")
    rows = {line.split()[3]: line for line in throttled.stdout.splitlines() if "randread-4k" in line}
    assert set(rows) == {"iops", "bw", "clat_mean", "clat_p99", "cpu_us_per_io"}, throttled.stdout
    assert all("scheduler none →" in line for line in rows.values())
    # a blkio throttle releases I/O in time slices, so under either cap the p99 is about a slice (~0.1 s)
    assert all("regression" in line for metric, line in rows.items() if metric != "clat_p99"), throttled.stdout
    assert throttled.stdout.count("mq-deadline; nr_requests") == 5  # the table wraps what changed
    early = iolab("gate", "3", db=runs)
    assert early.returncode == 2
    assert "Error: no history to judge run 3 against: its series have at most 2 comparable run(s)" in early.stderr
    several = iolab("gate", "nightly", db=runs)
    assert several.returncode == 2 and f"matches {BEFORE + AFTER} runs" in several.stderr
