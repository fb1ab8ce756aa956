"""`iolab import` of field reports as their authors pasted them: one result per fio output in one run, each
target named after the devices its disk statistics name, and texts without an output refused with the reason.

The figures expected below were read from the reports by hand (``tests/unit/fio/test_pasted.py`` says how).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from inprocess import iolab
from iolab.store.database import Store
from paths import FIELD, FIELD_REPORTS
from paths import FIO as DATA

ESXI = next(FIELD_REPORTS.glob("000_*.txt"))
KVM = next(FIELD_REPORTS.glob("001_*.txt"))


def said(proc) -> str:
    """stderr on one line (rich wraps long lines)."""
    return " ".join(proc.stderr.split())


def runs_stored(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("select count(*) from runs").fetchone()[0]


def test_the_esxi_report_imports_as_one_result_per_output_never_summed(tmp_path):
    db = tmp_path / "iolab.db"
    proc = iolab("import", str(ESXI), db=db)
    assert proc.returncode == 0, proc.stderr
    assert f"Imported {ESXI} as run 1 (normal, fio 3.7, 2 result(s) from 2 outputs, 2 warning(s))" in said(proc)
    rows = [line.split() for line in proc.stdout.splitlines() if " randwrite " in line]
    assert [row[:5] for row in rows] == [["nvme0n1", "randwrite", "read", "1", "26015.1"],
                                         ["nvme0n1", "randwrite", "write", "1", "25991.6"],
                                         ["sdb", "randwrite", "read", "1", "20405.3"],
                                         ["sdb", "randwrite", "write", "1", "20386.6"]]
    assert "46420" not in proc.stdout  # 26015 + 20405: the sum of two runs is no result
    assert [row[6:] for row in rows] == [["113.6", "us", "1.3", "ms"], ["27.4", "us", "39.2", "us"],
                                         ["134.4", "us", "1.2", "ms"], ["44.9", "us", "57.0", "us"]]

    run = Store(f"sqlite:///{db}").get_run(1)
    assert [(r.target, r.workload, r.repeat) for r in run.results] == [("nvme0n1", "randwrite", 0),
                                                                       ("sdb", "randwrite", 0)]
    for result, total, lines in zip(run.results, (7804560, 6121601), ([66, 116], [127, 177]), strict=True):
        (job,) = result.report.jobs
        read = job.directions["read"]
        assert read.total_ios == total and read.iops == total * 1000 / 300001 and read.clat.mean_ns
        assert result.job_text.count("[randwrite]") == 1  # its own job options, one output's
        assert "bs=4k" in result.job_text and "numjobs=4" in result.job_text
        assert result.extra["source"]["output"] == run.results.index(result) + 1
        assert result.extra["source"]["lines"] == lines
    assert "the same job ran on different devices (nvme0n1; sdb in fio's disk statistics): stored as one target " \
           "each, not as repetitions of one" in run.info.warnings
    assert any(w.startswith("output 1 (lines 66–116): job 'randwrite' write: printed IOPS=25.0k") for w in
               run.info.warnings)


def test_the_kvm_report_with_numbered_lines_imports_its_three_outputs(tmp_path):
    db = tmp_path / "iolab.db"
    proc = iolab("import", str(KVM), "--format", "json", db=db)
    assert proc.returncode == 0, proc.stderr
    assert f"Imported {KVM} as run 1 (normal, fio 3.16, 3 result(s) from 3 outputs, 3 warning(s))" in said(proc)
    doc = json.loads(proc.stdout)
    rows = [(r["target"], r["workload"], r["direction"], r["iops"]["mean"]) for r in doc["summary"]]
    assert rows == [("vda#1", "test", "write", 71936 * 1000 / 60071), ("vda#2", "test", "write", 288149 * 1000 / 60015),
                    ("nvme0n1", "test", "write", 492339 * 1000 / 60187)]
    clat = [(r["jobs"][0]["directions"]["write"]["clat"]["mean_ns"],
             r["jobs"][0]["directions"]["write"]["clat"]["percentiles_ns"]["99"]) for r in doc["results"]]
    assert clat == [(pytest.approx(106.80e6), 180e6), (pytest.approx(26.42e6), 317e6),
                    (pytest.approx(15375574.09), 308282e3)]
    bw = [r["bw_bytes_s"]["mean"] for r in doc["summary"]]
    assert bw == [4790 * 1024, pytest.approx(18.8 * 2**20), 33.5e6]  # fio's display (no block size in the text)
    assert any("outputs 1 and 2 of" in w and "stored as vda#1, vda#2, not as repetitions of one" in w
               for w in doc["run"]["warnings"])


@pytest.mark.parametrize(("number", "holds"), [
    ("002", "it holds 2 fio commands (line 196: 'fio --rw=randread --bs=8k"),
    ("003", "it holds 2 fio commands (line 22: 'fio --ioengine=libaio --runtime=30s"),
    ("004", "it holds 4 fio commands (line 225: 'fio -readonly -name=rr -rw=randread -bs=4k"),
])
def test_field_reports_without_output_are_refused_with_the_reason(tmp_path, number, holds):
    path = next(FIELD_REPORTS.glob(f"{number}_*.txt"))
    db = tmp_path / "iolab.db"
    proc = iolab("import", str(path), db=db)
    assert proc.returncode == 1 and proc.stdout == ""
    assert f"Error: {path}: not a fio output: {holds}" in said(proc)
    assert "but nothing fio printed for them" in said(proc) and "Hint: import what fio printed" in said(proc)
    assert runs_stored(db) == 0


def test_a_text_with_no_readable_output_exits_1_naming_why(tmp_path):
    """An output quoted as Markdown (``> `` before each line): its job line is found, its lines are not fio's."""
    text = (FIELD / "directpath-fio37.txt").read_text()
    path = tmp_path / "quoted.md"
    path.write_text("".join(f"> {line}\n" for line in text.splitlines()))
    db = tmp_path / "iolab.db"
    proc = iolab("import", str(path), db=db)
    assert proc.returncode == 1
    assert f"Error: {path}, line 10: the job line '> randwrite: (groupid=0, jobs=4)" in said(proc)
    assert "is followed by none of the lines fio prints under it" in said(proc)
    assert runs_stored(db) == 0


@pytest.mark.parametrize(("path", "target"), [
    (FIELD / "directpath-fio37.txt", "nvme0n1"),  # normal output: dm-2 over nvme0n1
    (DATA / "fio-3.33_randrw_libaio.json", "vda"),  # JSON: disk_util
    (DATA / "fio-3.33_randrw_libaio.terse-v3.txt", "vda"),  # terse v3: its disk fields
], ids=lambda value: getattr(value, "name", value))
def test_an_imported_output_is_named_after_its_disk_statistics(tmp_path, path, target):
    db = tmp_path / "iolab.db"
    assert iolab("import", str(path), db=db).returncode == 0
    assert [r.target for r in Store(f"sqlite:///{db}").get_run(1).results] == [target]
