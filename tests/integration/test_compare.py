"""`iolab compare` of two real fio runs, end to end through the command (the fast tier's comparisons
are in tests/cli/test_compare.py and tests/unit/analyze/test_compare.py)."""

from __future__ import annotations

import json
import math

from clirun import iolab
from iolab.analyze import compare as cmp


def test_two_real_runs_end_to_end(tmp_path):
    """Two short real fio runs (ioengine=null) compared through the CLI."""
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
