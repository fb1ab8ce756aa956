"""Compare inside a run (``compare RUN --by target``) on a real fio run: two storage paths in one suite,
a file on ext4 beside one on the /dev/shm tmpfs, which fenced fio must reach, writing and reading; the
targets weighed with the same statistics as two runs (the rest of ``--by``, ``RUN:TARGET`` and their
mistakes: tests/cli/test_compare_within.py, on recorded fio output)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
from pathlib import Path

import pytest

from clirun import iolab

JOB = "defaults: {ioengine: psync, time_based: 1, runtime: 1s}\nrepeat: 2\n"


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> Path:
    """A run of two workloads on two targets, labelled ``esxi``; the database."""
    tmp = tmp_path_factory.mktemp("within")
    shm = Path("/dev/shm", f"iolab-within-{os.getpid()}")
    shm.mkdir()
    try:
        (tmp / "two.yaml").write_text(
            f"name: two-paths\ntargets:\n  virtual: {{path: {tmp}/virtual.bin, size: 16m}}\n"
            f"  directpath: {{path: {shm}/directpath.bin, size: 16m}}\n{JOB}"
            "workloads:\n  - {name: randwrite-4k, rw: randwrite, bs: 4k}\n  - {name: randread-4k, rw: randread, "
            "bs: 4k}\n")
        done = iolab("run", str(tmp / "two.yaml"), "--label", "esxi", "--no-observe", "-q", db=tmp / "db", cwd=tmp)
        assert done.returncode == 0, done.stderr  # a target in /dev/shm: fenced fio reaches it, writing and reading
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
