"""What `iolab import` said and stored, for the import tests of every tier: its messages on one line,
the logs and time series stored per result, and the checks of a bench-fio sweep imported as one run
(the same on the recorded sweep in the fast tier and on a sweep real fio runs in integration)."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import benchfio
from iolab.store.database import Store

#: The kinds of log a bench-fio job writes (``write_bw_log``, ``write_lat_log``, ``write_iops_log``).
KINDS = ("bw", "iops", "lat", "clat", "slat")


def said(proc: subprocess.CompletedProcess[str]) -> str:
    """stderr on one line (rich wraps long lines)."""
    return " ".join(proc.stderr.split())


def attached(db: Path, run_id: int = 1) -> dict[str, list[str]]:
    """Per result (its JSON file's name): the names of the log files stored with it."""
    run = Store(f"sqlite:///{db}").get_run(run_id)
    return {Path(r.extra["source"]["path"]).name: sorted(Path(p).name for p in r.extra.get("log_files", ()))
            for r in run.results}


def series_of(db: Path, run_id: int = 1) -> dict[tuple[str, int, str | None, str, str], tuple[float, ...]]:
    """The run's time series by (job, job index, host, direction, metric): their values."""
    store = Store(f"sqlite:///{db}")
    return {(s.job, s.job_index, s.hostname, s.direction, s.metric): s.values
            for ss in store.time_series(run_id).values() for s in ss}


def check_sweep_import(proc: subprocess.CompletedProcess[str], db: Path, sweep_dir: Path) -> None:
    """``iolab import SWEEP_DIR --label ssd`` (``proc``, into ``db``) of a bench-fio sweep
    (``benchfio.sweep``'s whole grid) made one run with each log where it belongs."""
    assert proc.returncode == 0, proc.stderr
    text = said(proc)
    # 3 depths: the last run at each (randwrite, numjobs=2) wrote 2 threads x 5 logs, overwriting the others
    assert f"Imported {sweep_dir} as run 1 (12 file(s): json, fio 3.33, 12 result(s); logs: 30 attached" in text
    logs = attached(db)
    for depth in benchfio.DEPTHS:
        assert logs[f"randwrite-{depth}-2.json"] == sorted(f"random-read-depth-{depth}_{k}.{n}.log"
                                                           for k in KINDS for n in (1, 2))
    assert {name for name, found in logs.items() if found} == {f"randwrite-{d}-2.json" for d in benchfio.DEPTHS}
    # one line per result that did not get logs named like its own, saying why (rules 2 and 3)
    line = text.split("randread-4-1.json (randread 4k QD4 ×1): ")[1].split(" logs: ")[0]
    assert line.startswith("10 log file(s) named like its own not attached: ")
    assert "5 with write I/O while it did read (random-read-depth-4_" in line
    assert re.search(r"5 numbered beyond its 1 thread \(random-read-depth-4_\w+\.2\.log\)", line), line
    assert "randwrite-16-1.json (randwrite 4k QD16 ×1): 10 log file(s) named like its own not attached" in text
    run = Store(f"sqlite:///{db}").get_run(1)
    assert (run.info.origin, run.info.label, run.info.source["format"], run.info.source["files"]) == (
        "imported", "ssd", "directory", "12")
    assert len(run.results) == 12 and {r.repeat for r in run.results} == {0}
    for r in run.results:  # provenance per result
        source = Path(r.extra["source"]["path"])
        assert source.parent == sweep_dir and r.extra["source"]["sha256"] == hashlib.sha256(
            source.read_bytes()).hexdigest()
    # every job is named random-read: the workloads are named by the options they vary
    assert sorted(r.workload for r in run.results)[:2] == ["randread 4k QD1 ×1", "randread 4k QD1 ×2"]
    series = Store(f"sqlite:///{db}").time_series(1)
    by_result = {r.id: Path(r.extra["source"]["path"]).name for r in run.results}
    assert {by_result[i] for i in series} == {f"randwrite-{d}-2.json" for d in benchfio.DEPTHS}
    assert all(s.direction == "write" and s.job == "random-read" for ss in series.values() for s in ss)
