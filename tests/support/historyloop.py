"""The checks of a nightly history on a loop device before and after a change made to it: its I/O scheduler
switched (a fact iolab records) and its blkio throttle lowered tenfold (recorded by the team as a tag, as one
records what iolab cannot see). The runs before are throttled too, so that their IOPS are the throttle's and
not this shared machine's: a CI machine's neighbours once made a usual run 42 % slower than its history, and
the gate rightly failed it.

Run on fresh real runs by tests/system/test_history_loop.py and on the database it recorded
(``historydata.LOOP_RUNS``) in-process by tests/cli/test_history_loop.py: ``iolab`` is the runner each uses
(``clirun.iolab`` or ``inprocess.iolab``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

BEFORE = AFTER = 8
USUAL_IOPS, CAP_IOPS = 3000, 300
Iolab = Callable[..., subprocess.CompletedProcess[str]]


def check_history(iolab: Iolab, db: Path) -> None:
    done = iolab("history", "nightly", "--metric", "iops,clat_mean", "--format", "json", db=db)
    assert done.returncode == 0, done.stderr
    series = {s["metric"]: s for s in json.loads(done.stdout)["series"]}
    assert set(series) == {"iops", "clat_mean"}
    for name, s in series.items():
        assert (s["target"], s["workload"], s["direction"]) == ("loop", "randread-4k", "read")
        assert [p["run"] for p in s["points"]] == list(range(1, BEFORE + AFTER + 1))
        assert len(s["change_points"]) == 1, (name, [p["value"] for p in s["points"]], s["change_points"])
        (change,) = s["change_points"]
        assert (change["run"], change["previous_run"]) == (BEFORE + 1, BEFORE), name
        assert change["p_value"] <= 0.005 and change["confirmed"]
        assert change["verdict"] == "worse"
        what = {w["what"]: (w["before"], w["after"]) for w in change["what_changed"]}
        assert what["scheduler"] == ("none", "mq-deadline")
        assert what["tag blkio"] == (f"read_iops {USUAL_IOPS}", f"read_iops {CAP_IOPS}")
    iops = series["iops"]["change_points"][0]
    assert iops["after"] < CAP_IOPS * 1.05 and USUAL_IOPS * 0.8 < iops["before"] < USUAL_IOPS * 1.05
    table = iolab("history", "nightly", "--metric", "iops", db=db)
    assert "run 9: -" in table.stdout and "scheduler none →" in table.stdout and "mq-deadline;" in table.stdout


def check_gate(iolab: Iolab, db: Path) -> None:
    # a usual run's IOPS are its throttle's; its p99 is still this shared machine's (a scheduling hiccup
    # is a tail event), so the usual run is judged on IOPS and bandwidth; the change is 10x on every metric
    usual = iolab("gate", str(BEFORE), "--max-regression", "30%", "--metric", "iops", "--metric", "bw", db=db)
    assert usual.returncode == 0, usual.stdout + usual.stderr
    assert f"run {BEFORE}: no regression in" in usual.stderr
    throttled = iolab("gate", str(BEFORE + 1), "--max-regression", "30%", "--all", db=db)
    assert throttled.returncode == 3, throttled.stdout + throttled.stderr
    assert throttled.stderr.startswith(f"Error: run {BEFORE + 1} is worse than its history in ")
    rows = {line.split()[3]: line for line in throttled.stdout.splitlines() if "randread-4k" in line}
    assert set(rows) == {"iops", "bw", "clat_mean", "clat_p99", "cpu_us_per_io"}, throttled.stdout
    assert all("scheduler none →" in line for line in rows.values())
    # a blkio throttle releases I/O in time slices, so under either cap the p99 is about a slice (~0.1 s)
    assert all("regression" in line for metric, line in rows.items() if metric != "clat_p99"), throttled.stdout
    assert throttled.stdout.count("mq-deadline; nr_requests") == 5  # the table wraps what changed
    early = iolab("gate", "3", db=db)
    assert early.returncode == 2
    assert "Error: no history to judge run 3 against: its series have at most 2 comparable run(s)" in early.stderr
    several = iolab("gate", "nightly", db=db)
    assert several.returncode == 2 and f"matches {BEFORE + AFTER} runs" in several.stderr


def check_accept(iolab: Iolab, db: Path, tmp_path: Path) -> None:
    """The gate fails every run at the slower level (it passed the second and third before: the first had
    joined the baseline, its spread excusing the rest) until the change is accepted; then a run at the new
    level passes. On a copy of ``db``."""
    db = Path(shutil.copy(db, tmp_path / "accepted.db"))
    judged = ("--max-regression", "30%", "--metric", "iops,bw")
    assert [iolab("gate", str(run), *judged, db=db).returncode for run in (9, 10, 11)] == [3, 3, 3]
    accepted = iolab("accept", "11", "--reason", "the disk is throttled tenfold on purpose", db=db)
    assert accepted.returncode == 0, accepted.stderr
    later = iolab("gate", str(BEFORE + AFTER), *judged, "--format", "json", db=db)
    assert later.returncode == 0, later.stdout + later.stderr
    for row in json.loads(later.stdout)["rows"]:
        assert row["verdict"] == "ok" and row["baseline"]["runs"] == list(range(BEFORE + 1, BEFORE + AFTER))
        assert row["baseline"]["accepted"]["reason"] == "the disk is throttled tenfold on purpose"
