"""`iolab compare` in-process: the seed files of the issue, --fail-on-regression's exit code and formats,
and two runs made through the fake fio (tests/integration/test_compare.py compares two real runs)."""

from __future__ import annotations

import json
import math

import pytest

from inprocess import iolab
from iolab.analyze import compare as cmp
from iolab.report.table import read_csv
from iolab.store.database import Store
from paths import FIO as DATA
from storedruns import store_run


def test_issue_done_when_seed_files(tmp_path):
    db = tmp_path / "iolab.db"
    for name, label in (("seed001_local_ssd_fio316.txt", "local-ssd"), ("seed001_ceph_rbd_fio316.txt", "ceph-rbd")):
        assert iolab("import", str(DATA / name), "--label", label, db=db).returncode == 0
    proc = iolab("compare", "local-ssd", "ceph-rbd", "--format", "markdown", db=db)
    assert proc.returncode == 0, proc.stderr
    md = proc.stdout
    assert "### local-ssd (run 1) → ceph-rbd (run 2)" in md
    assert "| test | write | IOPS | 1/1 | 1197.5 | 4801.3 | +3603.8 (+300.9%) | ×4.01 | – | better (untested) |" in md
    assert "| test | write | clat p99 | 1/1 | 180.0 ms | 317.0 ms | +137.0 ms (+76.1%) | ×1.76 |" in md
    assert "job options: all 1 pair(s) comparable, no option differs" in md
    assert "Option differences" not in md
    doc = json.loads(iolab("compare", "local-ssd", "ceph-rbd", "--format", "json", db=db).stdout)
    pair = doc["comparisons"][0]["pairs"][0]
    assert pair["comparable"] and pair["a"]["options"] == {"iodepth": "32", "numjobs": "4", "size": "2g"}
    iops = next(m for m in pair["metrics"] if m["metric"] == "iops")
    assert iops["a"]["values"] == [71936 * 1000 / 60071] and iops["b"]["values"] == [288149 * 1000 / 60015]
    assert iops["ratio"] == pytest.approx(4.00937, abs=1e-5) and iops["p_value"] is None
    # the pasted outputs lack the job header line, so no block size makes the bandwidth exact: fio's printed
    # values (4790KiB/s, 18.8MiB/s) are compared, marked as rounded, rather than "missing"
    bw = next(m for m in pair["metrics"] if m["metric"] == "bw")
    assert bw["rounded"] and bw["a"]["values"] == [4790 * 1024] and bw["b"]["values"] == [18.8 * 2**20]
    assert "| test | write | bw MiB/s | 1/1 | ≈4.68 | ≈18.80 |" in md
    assert "≈: compared from fio's printed values, rounded to 3–4 significant figures" in md
    shown = iolab("show", "ceph-rbd", db=db).stdout
    assert "≈18.80" in shown and "≈: fio's printed value, rounded" in shown


def test_fail_on_regression_exits_3(tmp_path):
    db = tmp_path / "iolab.db"
    store = Store(f"sqlite:///{db}")
    store_run(store, "old", {"w": [(1000, 1e5), (1010, 1e5), (990, 1e5)]})
    store_run(store, "new", {"w": [(800, 1e5), (810, 1e5), (790, 1e5)]})
    store.close()
    proc = iolab("compare", "old", "new", "--metric", "iops,clat_p99", "--fail-on-regression", db=db)
    assert proc.returncode == 3 and "1 significant regression(s)" in proc.stderr
    assert " worse " in proc.stdout and "Welch" in proc.stdout
    assert iolab("compare", "old", "new", db=db).returncode == 0  # reported, but no --fail-on-regression
    assert iolab("compare", "old", "new", "--threshold", "25%", "--fail-on-regression", db=db).returncode == 0
    csv = iolab("compare", "old", "new", "--metric", "iops", "--format", "csv", db=db)
    (_, rows), = read_csv(csv.stdout)  # one table, its header first; what it is of, and the others: stderr
    (title, _), (summary, _) = read_csv(csv.stderr)[:2]
    assert title == "old (run 1) → new (run 2)" and summary.startswith("Summary")
    assert rows[0][:8] == ["workload", "direction", "metric", "unit", "n", "a_mean", "a_ci95_half", "b_mean"]
    assert rows[1][2:4] == ["iops", "IOPS"] and rows[1][-1] == "worse"
    bad = iolab("compare", "old", "--metric", "iops", db=db)
    assert bad.returncode == 2 and "at least two" in bad.stderr
    assert iolab("compare", "old", "new", "--metric", "cpu", db=db).returncode == 2
    assert iolab("compare", "old", "nosuchlabel", db=db).returncode == 2


def test_two_runs_end_to_end(tmp_path):
    """Two short runs (ioengine=null, fio replayed) compared through the CLI. Every repeat replays the same
    recording, so the sides' values are equal here; tests/integration/test_compare.py has real spreads."""
    db = tmp_path / "iolab.db"
    suite = tmp_path / "null.yaml"
    suite.write_text("name: null\ntargets:\n  none: {path: " + str(tmp_path / "f") + "}\n"
                     "defaults: {ioengine: 'null', size: 16m, time_based: 1, runtime: 1s}\nrepeat: 2\n"
                     "workloads:\n  - {rw: randread, bs: 4k, iodepth: 1}\n  - {rw: write, bs: 64k, iodepth: 1}\n")
    for label in ("first", "second"):
        proc = iolab("run", str(suite), "--label", label, db=db, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    proc = iolab("compare", "first", "second", "--format", "json", db=db)
    assert proc.returncode == 0, proc.stderr
    (c,) = json.loads(proc.stdout)["comparisons"]
    assert [(p["label"], p["direction"], p["comparable"]) for p in c["pairs"]] == [
        ("randread-4k-qd1", "read", True), ("write-64k-qd1", "write", True)]
    assert all(p["unchecked"] == [] and p["differences"] == [] for p in c["pairs"])
    iops = next(m for m in c["pairs"][0]["metrics"] if m["metric"] == "iops")
    assert iops["tested"] and iops["method"].startswith("Welch") and len(iops["a"]["values"]) == 2
    assert 0 <= iops["p_value"] <= 1 and iops["verdict"] in cmp.WORDS
    assert math.isclose(iops["ratio"], iops["b"]["mean"] / iops["a"]["mean"])
    table = iolab("compare", "first", "second", db=db).stdout
    assert "first (run 1) → second (run 2)" in table and "randread-4k-qd1   read    IOPS" in table
