"""Compare inside a run (``compare RUN --by AXIS``, ``RUN:TARGET``) on runs of recorded fio output (the
fake fio): the field reports' shape — two storage paths in one suite (a file on ext4 beside one on the
/dev/shm tmpfs), an iodepth axis, two pin modes — weighed with the same statistics as two runs.
tests/integration/test_compare_within.py runs the two paths with real fio."""

from __future__ import annotations

import json
import os
import shutil
import statistics
from pathlib import Path

import pytest

import fakefio
from inprocess import iolab
from iolab.run import plan
from paths import TESTS

JOB = "defaults: {ioengine: psync, time_based: 1, runtime: 1s}\nrepeat: 2\n"


@pytest.fixture(scope="module")
def paths(request, tmp_path_factory) -> Path:
    """A run of two workloads on two targets, labelled ``esxi`` (fio replayed); the database."""
    tmp = tmp_path_factory.mktemp("within")
    shm = Path("/dev/shm", f"iolab-within-{os.getpid()}")
    shm.mkdir()
    roots = {str(tmp): "@TMP@", str(shm): "@SHM@", str(tmp_path_factory.getbasetemp()): "@BASE@"}
    plan._verdict.cache_clear()  # fio's verdicts are this file's recordings
    try:
        (tmp / "two.yaml").write_text(
            f"name: two-paths\ntargets:\n  virtual: {{path: {tmp}/virtual.bin, size: 16m}}\n"
            f"  directpath: {{path: {shm}/directpath.bin, size: 16m}}\n{JOB}"
            "workloads:\n  - {name: randwrite-4k, rw: randwrite, bs: 4k}\n  - {name: randread-4k, rw: randread, "
            "bs: 4k}\n")
        with fakefio.replayed(str(request.path.resolve().relative_to(TESTS).with_suffix("")), roots):
            done = iolab("run", str(tmp / "two.yaml"), "--label", "esxi", "--no-observe", "-q", db=tmp / "db",
                         cwd=tmp, env={"XDG_STATE_HOME": str(tmp / "state")})
        assert done.returncode == 0, done.stderr
    finally:
        shutil.rmtree(shm)
    return tmp / "db"


def _json(*args: str, db: Path) -> dict:
    done = iolab("compare", *args, "--metric", "iops,clat_mean", "--format", "json", db=db)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_by_target_weighs_the_targets_of_one_run_as_the_run_measured_them(paths):
    doc = _json("esxi", "--by", "target", db=paths)
    assert [s["selector"] for s in doc["sides"]] == ["esxi:virtual", "esxi:directpath"]
    (c,) = doc["comparisons"]
    assert [(p["label"], p["comparable"]) for p in c["pairs"]] == [("randwrite-4k", True), ("randread-4k", True)]
    shown = json.loads(iolab("show", "esxi", "--format", "json", db=paths).stdout)
    iops = {}
    for r in shown["results"]:
        (d,) = [d for name, d in r["summary"].items() if name in ("read", "write")]
        iops.setdefault((r["target"], r["workload"]), []).append(d["iops"])
    for pair in c["pairs"]:
        row = next(m for m in pair["metrics"] if m["metric"] == "iops")
        a, b = (statistics.mean(iops[(t, pair["label"])]) for t in ("virtual", "directpath"))
        assert (row["a"]["n"], row["b"]["n"]) == (2, 2)
        assert row["ratio"] == pytest.approx(b / a, rel=1e-9) and row["p_value"] is not None
    # RUN:TARGET selectors name the same sides; --baseline turns the comparison round
    assert _json("esxi:virtual", "esxi:directpath", db=paths)["comparisons"] == doc["comparisons"]
    turned = _json("esxi", "--by", "target", "--baseline", "directpath", db=paths)
    assert [s["selector"] for s in turned["sides"]] == ["esxi:directpath", "esxi:virtual"]
    table = iolab("compare", "esxi", "--by", "target", db=paths).stdout
    assert "esxi:virtual (run 1) → esxi:directpath (run 1)" in table
    assert "virtual / directpath" not in table  # the sides' names say the targets: no target column


def test_mistakes_are_named(paths):
    alone = iolab("compare", "esxi", db=paths)
    assert alone.returncode == 2 and "iolab compare esxi --by target" in alone.stderr
    nosuch = iolab("compare", "esxi:nosuch", "esxi:virtual", db=paths)
    assert nosuch.returncode == 2
    assert "'esxi:nosuch': no result on target 'nosuch'" in nosuch.stderr and "directpath, virtual" in nosuch.stderr
    flat = iolab("compare", "esxi", "--by", "iodepth", db=paths)
    assert flat.returncode == 2 and "1 value(s) of iodepth (1)" in flat.stderr
    assert iolab("compare", "esxi", "esxi", "--by", "target", db=paths).returncode == 2
    assert "--baseline goes with --by" in iolab("compare", "esxi", "1", "--baseline", "x", db=paths).stderr


def test_report_by_target_writes_the_comparison_of_the_run(paths, tmp_path):
    out = tmp_path / "esxi.html"
    done = iolab("report", "esxi", "--by", "target", "-o", str(out), db=paths)
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    assert "esxi:virtual" in html and "esxi:directpath" in html


def test_by_a_fio_option_ignores_it_and_by_pin_splits_runs(tmp_path):
    (tmp_path / "qd.yaml").write_text(f"name: qd\ntargets:\n  data: {{path: {tmp_path}/qd.bin, size: 16m}}\n"
                                      f"{JOB.replace('psync', 'libaio')}"
                                      "workloads:\n  - {name: rr, rw: randread, bs: 4k, direct: 1, iodepth: [1, 8]}\n")
    db = tmp_path / "db"
    for pin in ((), ("--pin", "mq")):
        done = iolab("run", str(tmp_path / "qd.yaml"), "--label", "qd", "--no-observe", "-q", *pin, db=db,
                     cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    depth = _json("qd", "--by", "iodepth", db=db)
    assert [s["selector"] for s in depth["sides"]] == ["iodepth=1", "iodepth=8"]
    assert depth["ignored_options"] == ["iodepth"]
    (pair,) = depth["comparisons"][0]["pairs"]
    assert pair["comparable"] and pair["metrics"][0]["a"]["n"] == 4  # both runs pooled: 2 repeats each
    pinned = _json("qd", "--by", "pin", db=db)
    assert [(s["selector"], s["run_ids"]) for s in pinned["sides"]] == [("pin=none", [1]), ("pin=mq", [2])]
    assert [p["comparable"] for p in pinned["comparisons"][0]["pairs"]] == [True, True]
