"""History and gate, the commands in-process, over outputs of a real fio run (recorded once:
``historydata.recorded_output``) imported as months of runs (totals scaled consistently, ``historydata``),
each file with its own timestamp. The statistics on their own: tests/unit/analyze/test_history.py."""

from __future__ import annotations

import json
import random
import re
import sqlite3
from pathlib import Path

import pytest

import historydata
from inprocess import iolab
from iolab.analyze import changepoints
from iolab.report.table import read_csv

DAY = 86_400
T0 = 1_780_000_000  # 2026-05-28


# --- imported histories ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base() -> dict:
    return historydata.recorded_output()


def history_files(base: dict, directory: Path, runs: int = 40, step_at: int = 25) -> list[Path]:
    """``runs`` outputs a day apart: ``steady`` (3 % noise), ``slows`` (10 % fewer I/Os from run ``step_at``,
    where fio's version changes too) and ``deeper`` (iodepth 1, then 4 from run 20: not comparable)."""
    rng = random.Random(5)
    docs = []
    for i in range(runs):
        jobs = {"steady": (rng.gauss(1, 0.03), {}),
                "slows": (rng.gauss(1, 0.03) * (0.9 if i >= step_at else 1), {}),
                "deeper": (rng.gauss(1, 0.03), {"iodepth": "4" if i >= 20 else "1"})}
        docs.append(historydata.output(base, jobs, T0 + i * DAY, "fio-3.36" if i >= step_at else "fio-3.33"))
    return historydata.write_runs(directory, docs)


@pytest.fixture(scope="module")
def imported(base, tmp_path_factory) -> tuple[Path, dict[int, int]]:
    """The 40 outputs imported in shuffled order, a run each: the database and file index -> run id."""
    tmp = tmp_path_factory.mktemp("history")
    paths = history_files(base, tmp / "out")
    order = list(range(len(paths)))
    random.Random(8).shuffle(order)
    done = iolab("import", *(str(paths[i]) for i in order), "--format", "json", db=tmp / "h.db")
    assert done.returncode == 0, done.stderr
    ids = {Path(s["path"]).name: s["run_id"] for s in json.loads(done.stdout)["sources"]}
    return tmp / "h.db", {i: ids[p.name] for i, p in enumerate(paths)}


def test_history_json_has_the_issues_shape_and_finds_the_step(imported):
    db, run_of = imported
    done = iolab("history", "--metric", "iops", "--format", "json", db=db)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    by_name = {(s["workload"], s["part"]): s for s in doc["series"]}
    assert set(by_name) == {("steady", 1), ("slows", 1), ("deeper", 1), ("deeper", 2)}
    slows = by_name[("slows", 1)]
    assert {"target", "workload", "metric", "points", "change_points"} <= slows.keys()
    assert [p["run"] for p in slows["points"]] == [run_of[i] for i in range(40)]  # fio's timestamps, not import order
    assert all({"run", "time", "value"} <= p.keys() for p in slows["points"])
    assert slows["points"][0]["time"].startswith("2026-05-28")
    (change,) = slows["change_points"]
    assert {"run", "before", "after", "change_pct", "p_value", "what_changed"} <= change.keys()
    assert (change["run"], change["previous_run"]) == (run_of[25], run_of[24])  # the data are seeded
    assert change["change_pct"] == pytest.approx(-10, abs=3)
    assert change["p_value"] <= changepoints.ALPHA
    assert change["what_changed"] == [{"what": "fio version", "before": "3.33", "after": "3.36"}]
    assert by_name[("steady", 1)]["change_points"] == []
    second = by_name[("deeper", 2)]
    assert second["started_by"] == [{"option": "iodepth", "before": "1", "after": "4"}]
    assert [p["run"] for p in second["points"]] == [run_of[i] for i in range(20, 40)]
    assert by_name[("deeper", 1)]["change_points"] == [] and second["change_points"] == []


def test_history_table_csv_and_markdown_show_the_same_change(imported):
    db, run_of = imported
    table = iolab("history", "--workload", "slows", "--metric", "iops,clat_mean", db=db)
    assert table.returncode == 0, table.stderr
    assert "change points" in table.stdout and "slows (read)" in table.stdout
    assert any(ch in table.stdout for ch in history_report_sparks())
    csv_tables = dict(read_csv(iolab("history", "--workload", "slows", "--metric", "iops,clat_mean",
                                     "--format", "csv", db=db).stderr))  # the levels on stdout, the rest here
    header, *rows = csv_tables["change points"]
    changes = [dict(zip(header, row, strict=True)) for row in rows]
    assert {c["metric"] for c in changes} == {"iops", "clat_mean"}
    for c in changes:
        assert int(c["run"]) == run_of[25]
        assert float(c["change_pct"]) == pytest.approx(-10 if c["metric"] == "iops" else 11, abs=4)
    markdown = iolab("history", "--workload", "slows", "--format", "markdown", db=db).stdout
    assert "### change points" in markdown and "| slows (read) |" in markdown


def history_report_sparks() -> str:
    from iolab.report.history import SPARKS
    return SPARKS


def test_since_target_and_host_narrow_the_history(imported):
    db, _ = imported
    done = iolab("history", "--since", "2026-06-27", "--target", "vda", "--metric", "iops", "--format", "json",
                 db=db)  # an imported result's target: the device its disk statistics name
    assert done.returncode == 0, done.stderr
    series = json.loads(done.stdout)["series"]
    assert all(p["time"] >= "2026-06-27" for s in series for p in s["points"])
    assert {len(s["points"]) for s in series if s["workload"] == "slows"} == {10}
    assert iolab("history", "--target", "nvme0", db=db).returncode == 2
    missing = iolab("history", "--host", "elsewhere", db=db)
    assert missing.returncode == 2 and "no stored result makes a series" in missing.stderr
    typo = iolab("history", "--metric", "iopz", db=db)
    assert typo.returncode == 2 and "unknown metric 'iopz'" in typo.stderr
    bad_date = iolab("history", "--since", "yesterday", db=db)
    assert bad_date.returncode == 2 and "--since 'yesterday'" in bad_date.stderr


def test_gate_exits_2_without_history_0_for_a_usual_run_and_3_for_a_slow_one(base, tmp_path):
    paths = history_files(base, tmp_path / "out", runs=24, step_at=99)
    db = tmp_path / "g.db"
    few = iolab("import", *map(str, paths[:4]), db=db)
    assert few.returncode == 0, few.stderr
    early = iolab("gate", "latest", db=db)
    assert early.returncode == 2, early.stderr
    assert "Error: no history to judge run 4 against: its series have at most 3 comparable run(s) at their " \
           "level, and the gate needs 5" in early.stderr
    assert "no history" in early.stdout
    assert iolab("import", *map(str, paths[4:]), db=db).returncode == 0
    usual = iolab("gate", "latest", "--format", "json", db=db)
    assert usual.returncode == 0, usual.stdout + usual.stderr
    verdicts = json.loads(usual.stdout)
    assert verdicts["regressions"] == 0
    assert {r["verdict"] for r in verdicts["rows"] if r["workload"] != "deeper"} <= {"ok", "worse", "better"}
    # deeper's iodepth changed at run 21: its new series has 3 runs before this one
    assert {(r["verdict"], len(r["baseline"]["runs"])) for r in verdicts["rows"] if r["workload"] == "deeper"} == {
        ("no history", 3)}
    slow = historydata.output(base, {"steady": (0.8, {}), "slows": (1.0, {}), "deeper": (1.0, {"iodepth": "4"})},
                              T0 + 30 * DAY)
    (slow_path,) = historydata.write_runs(tmp_path / "slow", [slow])
    assert iolab("import", str(slow_path), "--tag", "build=4711", db=db).returncode == 0
    failed = iolab("gate", "latest", "--metric", "iops", db=db)
    assert failed.returncode == 3, failed.stdout + failed.stderr
    # 0.8 of the output's IOPS against its baseline's mean (3 % noise, the runs off the level by 5 % left out)
    assert re.search(r"Error: run 25 is worse than its history in 1 series \(first: steady \(read\) on vda, iops "
                     r"-(19|20)\.\d %\)", failed.stderr), failed.stderr
    row = next(line for line in failed.stdout.splitlines() if "steady" in line)
    assert "regression" in row and "tag build (not set) → 4711" in row
    several = iolab("gate", "2", db=db)
    assert several.returncode == 2 and "no history to judge run 2" in several.stderr


def test_a_run_whose_stored_report_does_not_load_is_named_and_the_rest_shown(imported, tmp_path):
    db, run_of = imported
    copy = tmp_path / "damaged.db"
    copy.write_bytes(db.read_bytes())
    with sqlite3.connect(copy) as conn:  # without its figures, as 0007 leaves a report that does not load
        conn.execute("UPDATE results SET report = '{\"source_format\": \"json\", \"jobs\": 5}' WHERE run_id = ?",
                     (run_of[3],))
        conn.execute("DELETE FROM result_figures WHERE result_id IN (SELECT id FROM results WHERE run_id = ?)",
                     (run_of[3],))
    done = iolab("history", "--workload", "steady", "--metric", "iops", "--format", "json", db=copy)
    assert done.returncode == 1
    assert done.stderr.startswith(f"Error: run {run_of[3]} cannot be read: result ")
    assert "report: TypeError" in done.stderr
    (series,) = json.loads(done.stdout)["series"]
    assert [p["run"] for p in series["points"]] == [run_of[i] for i in range(40) if i != 3]
