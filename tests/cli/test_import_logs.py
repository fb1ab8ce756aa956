"""`iolab import` with fio's time-series logs beside the output: the sample logs in tests/data/fio,
stored and drawn by `iolab report`. The logs of real fio runs (local and through a loopback fio server):
tests/integration/test_import_logs.py."""

from __future__ import annotations

import json
import shutil

from importchecks import said, series_of
from inprocess import iolab
from paths import FIO as DATA


def test_the_sample_logs_named_by_json_options_or_by_the_file_name(tmp_path):
    for log in DATA.glob("avg_*.1.log"):
        shutil.copy(log, tmp_path)
    text = (DATA / "fio-3.33_randrw_libaio.json").read_text().replace(  # as if the job had asked for them
        '"iodepth" : "16"', '"iodepth" : "16", "write_bw_log" : "avg", "write_iops_log" : "avg", '
        '"write_lat_log" : "avg", "log_avg_msec" : "1000"')
    (tmp_path / "named.json").write_text(text)
    shutil.copy(DATA / "fio-3.33_randrw_libaio.normal.txt", tmp_path / "avg.txt")  # normal output names no logs
    db = tmp_path / "iolab.db"
    proc = iolab("import", str(tmp_path / "named.json"), str(tmp_path / "avg.txt"), db=db)
    assert proc.returncode == 0, proc.stderr
    assert said(proc).count("logs: 5 attached (10 time series), 0 not attached") == 2  # 5 logs x read, write
    for run_id in (1, 2):
        series = series_of(db, run_id)
        # two read rows at 3000 in the clat log: the window and the remnant fio flushes; the window stays
        assert series[("randrw", 1, None, "read", "clat_ns")] == (71565, 69598, 67256)
        assert series[("randrw", 1, None, "write", "iops")] == (49136, 51018)
    drawn = iolab("report", "1", "-o", str(tmp_path / "r.html"), db=db)
    assert drawn.returncode == 0 and 'data-chart="timeseries-iops"' in (tmp_path / "r.html").read_text()


def test_a_log_that_is_not_fios_is_a_note_not_a_failure(tmp_path):
    shutil.copy(DATA / "fio-3.33_randrw_libaio.normal.txt", tmp_path / "run.txt")
    (tmp_path / "run_iops.1.log").write_text("1000, 5, 0, 0, 0\nnot, a, log\n")
    db = tmp_path / "iolab.db"
    proc = iolab("import", str(tmp_path / "run.txt"), db=db)
    assert proc.returncode == 0, proc.stderr
    assert "logs: 0 attached (0 time series), 1 not attached" in said(proc)
    assert "1 not readable as fio logs" in said(proc) and "run_iops.1.log:2: expected" in said(proc)
    doc = json.loads(iolab("show", "1", "--format", "json", db=db).stdout)
    assert "run_iops.1.log:2: expected" in doc["results"][0]["extra"]["logs_not_attached"]
