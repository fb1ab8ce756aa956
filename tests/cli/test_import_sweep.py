"""`iolab import DIR`: a real fio sweep laid out as bench-fio lays it out (tests/support/benchfio.py,
recorded in tests/data/bench-fio) is one run; its logs, which later runs overwrote, are attached only
where they belong, and every attribution rule has a case that fails it; sweeps show as grids. A sweep
real fio runs is imported in tests/integration/test_import_sweep.py, two compared in
tests/system/test_import_sweep.py."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import benchfio
from importchecks import KINDS, attached, check_sweep_import, said
from inprocess import iolab
from iolab.report.table import read_csv
from iolab.store.database import Store
from iolab.workflows.importer.plan import device_of


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    """The recorded sweep (tests/data/bench-fio/ssd, ``benchfio.sweep``'s whole grid run by real fio), copied
    here with its files' times; conftest's ``sweep_dir`` runs fio (tests/integration/test_import_sweep.py)."""
    return benchfio.recorded("ssd", tmp_path / "sweep" / "ssd")


def test_a_sweep_directory_is_one_run_with_each_log_where_it_belongs(sweep_dir, tmp_path):
    db = tmp_path / "iolab.db"
    proc = iolab("import", str(sweep_dir), "--label", "ssd", db=db)
    check_sweep_import(proc, db, sweep_dir)


def test_show_names_rows_by_the_options_that_vary_and_draws_grids(sweep_dir, tmp_path):
    db = tmp_path / "iolab.db"
    assert iolab("import", str(sweep_dir), db=db).returncode == 0
    shown = iolab("show", "1", db=db).stdout
    header = next(line for line in shown.splitlines() if "iodepth" in line and "IOPS" in line).split()
    assert header[:5] == ["target", "rw", "iodepth", "numjobs", "dir"]
    (target,) = {r.target for r in Store(f"sqlite:///{db}").get_run(1).results}
    assert target not in ("local", "") and target == device_of(Store(f"sqlite:///{db}").get_run(1).results[0].report
                                                              .disk_util)  # named from fio's disk statistics
    first = next(line for line in shown.splitlines() if line.strip().startswith(target))
    assert first.split()[:4] == [target, "randread", "1", "1"]  # in option order, not file order
    assert "every row: 4k" in shown
    for title in ("IOPS · randread 4k", "clat p99 · randwrite 4k"):
        assert title in shown
    grid = shown.split("IOPS · randread 4k")[1]
    assert re.search(r"iodepth \\ numjobs\s+1\s+2", grid) and re.search(r"\n\s+16\s+[\d.]+\s+[\d.]+", grid)
    shown_csv = iolab("show", "1", "--format", "csv", db=db)  # the results; their title, then the grids: stderr
    tables = read_csv(shown_csv.stderr)
    assert tables[0][0] == "run 1: ssd (complete)" and tables[1][0] == "IOPS · randread 4k"
    assert shown_csv.stdout.startswith("target,rw,iodepth,numjobs,direction,repeats,iops,iops_cv_pct")
    doc = json.loads(iolab("show", "1", "--format", "json", db=db).stdout)
    row = doc["summary"][0]
    assert row["options"]["iodepth"] == "1" and row["options"]["rw"] == "randread" and row["workload"].startswith(
        "randread 4k QD")


def tamper(log: Path, times: float = 1.0, values: float = 1.0) -> None:
    rows = np.loadtxt(log, delimiter=",", dtype=np.int64, ndmin=2)
    rows[:, 0] = (rows[:, 0] * times).astype(np.int64)
    rows[:, 1] = (rows[:, 1] * values).astype(np.int64)
    np.savetxt(log, rows, fmt="%d", delimiter=", ")


def test_each_attribution_rule_refuses_logs_that_break_it(sweep_dir, tmp_path):
    """Rules 2 (thread) and 3 (direction) fail in the sweep itself; here the others: 1 (name), 4
    (time span) and 5 (values), on copies of the real logs."""
    copy = tmp_path / "tampered"
    shutil.copytree(sweep_dir, copy)
    for kind in KINDS:  # rule 4: depth 4's logs cover ten times the job's runtime
        for n in (1, 2):
            tamper(copy / f"random-read-depth-4_{kind}.{n}.log", times=10)
    for kind in ("iops", "bw"):  # rule 5: depth 16's rates are a fiftieth of the job's
        for n in (1, 2):
            tamper(copy / f"random-read-depth-16_{kind}.{n}.log", values=0.02)
    # rule 1: the right name for another host (a fio --client log), and another prefix
    shutil.copy(copy / "random-read-depth-1_iops.1.log", copy / "random-read-depth-1_iops.1.log.10.9.9.9")
    shutil.copy(copy / "random-read-depth-1_iops.1.log", copy / "other-prefix_iops.1.log")
    db = tmp_path / "iolab.db"
    proc = iolab("import", str(copy), db=db)
    assert proc.returncode == 0, proc.stderr
    text = said(proc)
    logs = attached(db)
    assert {name for name, found in logs.items() if found} == {"randwrite-1-2.json"}
    assert logs["randwrite-1-2.json"] == sorted(f"random-read-depth-1_{k}.{n}.log" for k in KINDS for n in (1, 2))
    assert re.search(r"randwrite-4-2\.json \(randwrite 4k QD4 ×2\): 10 log file\(s\) named like its own not "
                     r"attached: 10 ending at a time that does not fit its runtime "
                     r"\(random-read-depth-4_\w+\.[12]\.log ends at [\d.]+ s, it ran 1(\.\d+)? s\)", text), text
    assert re.search(r"randwrite-16-2\.json \(randwrite 4k QD16 ×2\): 10 log file\(s\) named like its own not "
                     r"attached: 10 averaging more than 3x off its rate \(2 thread\(s\) logged [\d,.]+ IOPS write, "
                     r"it did [\d,.]+\)", text), text


def test_importing_again_skips_what_is_stored_and_a_bad_file_is_named(sweep_dir, tmp_path):
    db = tmp_path / "iolab.db"
    assert iolab("import", str(sweep_dir), db=db).returncode == 0
    again = iolab("import", str(sweep_dir), db=db)
    assert again.returncode == 0, again.stderr
    assert said(again).count("already imported in run 1") == 12 and "Imported" not in again.stderr
    grown = tmp_path / "grown"
    shutil.copytree(sweep_dir, grown)
    (grown / "run-2").mkdir()
    extra = json.loads((sweep_dir / "randread-1-1.json").read_text())
    extra["timestamp"] += 60  # a second repetition of one workload, in bench-fio's run-N layout
    (grown / "run-2" / "randread-1-1.json").write_text(json.dumps(extra))
    (grown / "broken.json").write_text('{"fio version" : "fio-3.33", "jobs" : [ {"jobname" : ')
    (grown / "README.md").write_text("# notes\n")
    (grown / "bench.fio").write_text("[x]\nrw=read\n")
    proc = iolab("import", str(grown), "--format", "json", db=db)
    assert proc.returncode == 1  # a fio output that cannot be read
    assert f"Error: {grown / 'broken.json'}" in said(proc)
    assert said(proc).count("already imported in run 1") == 12
    doc = json.loads(proc.stdout)
    (source,) = doc["sources"]
    assert (source["run_id"], source["files"], source["results"]) == (2, 1, 1)
    assert source["passed_over"] == 2  # README.md, bench.fio (its logs are counted as logs)
    assert source["logs_attached"] == 0 and source["logs_not_attached"] == 30
    statuses = sorted({n["status"] for n in source["files_not_stored"]})
    assert statuses == ["failed", "skipped"]


def test_nested_layout_and_log_prefixes_from_another_machine(sweep_dir, tmp_path):
    """bench-fio's newer layout: ``<device>/<bs>/<rw>-<iodepth>-<numjobs>.json`` with logs named
    per job by an absolute prefix on the machine that ran it; here, copied elsewhere."""
    nested = tmp_path / "bench" / "sdb" / "4k"
    nested.mkdir(parents=True)
    for out in sweep_dir.glob("*.json"):
        rw, depth, n = out.stem.split("-")
        doc = json.loads(out.read_text())
        prefix = f"/gone/bench/sdb/4k/{rw}-iodepth-{depth}-numjobs-{n}"
        for option in ("write_bw_log", "write_iops_log", "write_lat_log"):
            doc["jobs"][0]["job options"][option] = prefix
        (nested / out.name).write_text(json.dumps(doc, indent=2))
    for log in sweep_dir.glob("random-read-depth-*_*.log"):  # the logs that are the randwrite numjobs=2 runs'
        depth = log.name.split("-")[3].split("_")[0]
        shutil.copy(log, nested / log.name.replace(f"random-read-depth-{depth}",
                                                    f"randwrite-iodepth-{depth}-numjobs-2"))
    db = tmp_path / "iolab.db"
    proc = iolab("import", str(tmp_path / "bench"), db=db)
    assert proc.returncode == 0, proc.stderr
    assert "(12 file(s): json, fio 3.33, 12 result(s); logs: 30 attached" in said(proc)
    logs = attached(db)
    assert {name for name, found in logs.items() if found} == {f"randwrite-{d}-2.json" for d in benchfio.DEPTHS}


def test_a_suite_sweep_shows_and_draws_as_an_imported_one(tmp_path):
    """The same iodepth x numjobs grid run by an iolab suite and by a bench-fio style script and
    imported: the same option columns, grids and sweep charts."""
    suite = tmp_path / "grid.yaml"
    suite.write_text("name: grid\ndefaults: {ioengine: libaio, direct: 1, size: 16m, time_based: 1, runtime: 1s}\n"
                     "workloads:\n  - {rw: randread, bs: 4k, iodepth: [1, 4, 16], numjobs: [1, 2]}\n")
    db = tmp_path / "iolab.db"
    ran = iolab("run", str(suite), "--target", f"file={tmp_path / 'data.bin'}", "--no-observe", db=db,
                cwd=tmp_path)  # an import has no host-cost table to show beside its results
    assert ran.returncode == 0, ran.stderr
    benchfio.recorded("randread", tmp_path / "script")  # a randread-only sweep real fio ran
    assert iolab("import", str(tmp_path / "script"), db=db).returncode == 0

    def shown(run: str) -> tuple[list[str], list[str], list[tuple[str, str]]]:
        text = iolab("show", run, db=db).stdout
        header = next(line for line in text.splitlines() if "IOPS" in line and "dir" in line).split()[1:]
        titles = [line.strip() for line in text.splitlines() if line.startswith(("IOPS ·", "clat p99 ·"))]
        imported = Store(f"sqlite:///{db}").get_run(2).results[0].target  # named from fio's disk statistics
        rows = [tuple(line.split()[1:3]) for line in text.splitlines() if line.strip().startswith(("file", imported))]
        return header, titles, rows

    assert shown("1") == shown("2")
    header, titles, rows = shown("1")
    assert header[:3] == ["iodepth", "numjobs", "dir"] and titles == ["IOPS · randread 4k", "clat p99 · randread 4k"]
    assert rows == [("1", "1"), ("1", "2"), ("4", "1"), ("4", "2"), ("16", "1"), ("16", "2")]
    for run in ("1", "2"):
        out = tmp_path / f"r{run}.html"
        assert iolab("report", run, "-o", str(out), db=db).returncode == 0
        charts = re.findall(r'data-chart="([^"]+)"', out.read_text())
        assert [c for c in charts if c.startswith("sweep-")] == [
            "sweep-iops-iodepth", "sweep-iops-numjobs", "sweep-p99-iodepth", "sweep-p99-numjobs", "sweep-heatmap",
            "sweep-saturation"], charts


def test_directories_imported_together_store_what_they_store_one_at_a_time(sweep_dir, tmp_path):
    """Two directories or more are read in worker processes (``importer._ahead``), each run made
    there; a directory with files stored already gets its run made again, of the new files only."""
    copy, grown = tmp_path / "copy", tmp_path / "grown"
    shutil.copytree(sweep_dir, copy)
    (copy / "randread-1-1.json").unlink()
    shutil.copytree(sweep_dir, grown)
    extra = json.loads((sweep_dir / "randread-1-1.json").read_text())
    extra["timestamp"] += 60
    (grown / "run-2").mkdir()
    (grown / "run-2" / "randread-1-1.json").write_text(json.dumps(extra))

    def stored(db: Path) -> list[list[tuple[object, ...]]]:
        store = Store(f"sqlite:///{db}")
        runs = [(store.get_run(i), store.time_series(i)) for i in sorted(r.id for r in store.list_runs())]
        return [[(Path(r.extra["source"]["path"]).name, r.workload, r.report, r.extra.get("log_files"),
                  sorted((s.job_index, s.metric, s.t_ms, s.values) for s in series.get(r.id, ())))
                 for r in run.results] for run, series in runs]

    alone, together = tmp_path / "alone.db", tmp_path / "together.db"
    for order in ((copy,), (sweep_dir,), (grown,)):
        assert iolab("import", *map(str, order), db=alone).returncode == 0
    proc = iolab("import", str(copy), str(sweep_dir), str(grown), db=together)
    assert proc.returncode == 0, proc.stderr
    assert said(proc).count("already imported in run") == 11 + 12  # sweep_dir's 11; grown's 11 and its copy
    runs = stored(together)
    assert [len(r) for r in runs] == [11, 1, 1] and runs == stored(alone)
    assert sum(bool(r[3]) for r in runs[0]) == 3  # the logs went where they go alone: 3 results' worth
