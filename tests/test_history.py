"""History and gate: the statistics on their own, then the command over outputs of a real fio run imported
as months of runs (totals scaled consistently, ``historydata``), each file with its own timestamp."""

from __future__ import annotations

import json
import random
import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

import historydata
from clirun import iolab
from iolab.analyze import changepoints, gate, history
from iolab.analyze.metrics import metric
from iolab.errors import ParseError
from iolab.fio import parse_output
from iolab.fio.merge import by_job
from iolab.model import to_jsonable
from iolab.report.table import read_csv
from paths import FIO as DATA

DAY = 86_400
T0 = 1_780_000_000  # 2026-05-28


# --- the statistics ----------------------------------------------------------------------------------------------


def test_max_f_is_the_one_way_anova_f_of_the_best_split():
    rng = np.random.default_rng(3)
    w = rng.normal(0, 1, 17)
    w[9:] += 1.5
    best = max(sps.f_oneway(w[:s], w[s:]).statistic
               for s in range(changepoints.MIN_SEGMENT, len(w) - changepoints.MIN_SEGMENT + 1))
    assert changepoints.max_f(w) == pytest.approx(best, rel=1e-9)
    batch = np.stack([w, w[::-1], np.sort(w)])
    assert np.allclose(changepoints.max_f(batch), [changepoints.max_f(b) for b in batch])


def test_a_step_is_found_where_it_is_and_flat_noise_gets_none():
    rng = np.random.default_rng(11)
    steady = rng.normal(10_000, 300, 40)
    assert changepoints.detect(steady) == []
    stepped = np.concatenate([rng.normal(10_000, 300, 30), rng.normal(9_000, 270, 30)])
    found = changepoints.detect(stepped)
    assert len(found) == 1 and abs(found[0].index - 30) <= 2 and found[0].p_value <= changepoints.ALPHA
    assert changepoints.detect([5.0] * 20) == []


def test_six_runs_cannot_show_a_significant_change():
    """3 + 3 values have 20 orderings: the smallest p-value a permutation test can give is 1/20."""
    assert changepoints.permutation_p([1.0, 1.0, 1.0, 2.0, 2.0, 2.0]) >= 1 / 20
    assert changepoints.detect([1.0, 1.0, 1.0, 2.0, 2.0, 2.0]) == []


def test_holm_adjustment():
    assert gate.holm([0.01, 0.04, None, 0.03]) == [pytest.approx(0.03), pytest.approx(0.06), None,
                                                   pytest.approx(0.06)]


def test_prediction_p_is_one_sided_at_the_prediction_interval():
    values = [100.0, 104.0, 97.0, 101.0, 99.0, 102.0]
    logs = np.log(values)
    n, mean, sd = len(logs), logs.mean(), logs.std(ddof=1)
    lower = float(np.exp(mean - sps.t.ppf(0.95, n - 1) * sd * np.sqrt(1 + 1 / n)))  # 90 % two-sided bound
    assert gate.prediction_p(values, lower, higher_is_better=True) == pytest.approx(0.05)
    assert gate.prediction_p(values, lower, higher_is_better=False) == pytest.approx(0.95)


def test_light_reports_give_the_figures_compare_gives():
    """History reads reports without validating them into the model (``history.light_report``); every
    metric of every sample must come out as ``compare`` computes it from the validated report."""
    names = ("iops", "bw", "clat_mean", "clat_p99", "clat_p50", "clat_max", "lat_mean", "slat_mean", "lat_p99.9")
    checked = 0
    for path in sorted(DATA.glob("fio-*")):
        try:
            report = parse_output(path.read_text(errors="replace"), path.name)
        except ParseError:
            continue
        full, light = by_job(report), by_job(history.light_report(to_jsonable(report)))
        assert full.keys() == light.keys(), path.name
        for key, stats in full.items():
            for name in names:
                assert metric(name).value(light[key]) == metric(name).value(stats), (path.name, key, name)
        checked += 1
    assert checked >= 15


# --- imported histories ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict:
    return historydata.real_output(tmp_path_factory.mktemp("fio"))


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
                                     "--format", "csv", db=db).stdout))
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
    assert "Error: no history to judge run 4 against: its series have at most 3 comparable run(s) since their last " \
           "change, and the gate needs 5" in early.stderr
    assert "no history" in early.stdout
    assert iolab("import", *map(str, paths[4:]), db=db).returncode == 0
    usual = iolab("gate", "latest", "--format", "json", db=db)
    assert usual.returncode == 0, usual.stdout + usual.stderr
    verdicts = json.loads(usual.stdout)
    assert verdicts["regressions"] == 0
    assert {r["verdict"] for r in verdicts["rows"] if r["workload"] != "deeper"} <= {"ok", "worse", "better"}
    # deeper's iodepth changed at run 21: its new series has 3 runs before this one
    assert {(r["verdict"], r["segment"]["runs"]) for r in verdicts["rows"] if r["workload"] == "deeper"} == {
        ("no history", 3)}
    slow = historydata.output(base, {"steady": (0.8, {}), "slows": (1.0, {}), "deeper": (1.0, {"iodepth": "4"})},
                              T0 + 30 * DAY)
    (slow_path,) = historydata.write_runs(tmp_path / "slow", [slow])
    assert iolab("import", str(slow_path), "--tag", "build=4711", db=db).returncode == 0
    failed = iolab("gate", "latest", "--metric", "iops", db=db)
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert "Error: run 25 is worse than its history in 1 series (first: steady (read) on vda, iops -20." \
           in failed.stderr
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


def test_a_firmware_update_is_what_changed(fake_sysfs):
    """NVMe controllers show ``firmware_rev``, SCSI/ATA disks ``rev``; both become the device's ``firmware``,
    and a different one between two runs is a change (``analyze.changes``)."""
    from datetime import UTC, datetime

    from iolab.analyze import changes
    from iolab.facts.targets import block_device_facts
    from iolab.model import RunInfo, TargetFacts
    from iolab.store.history import HistoryResult

    fake_sysfs.disk("nvme0n1", devnum="259:0", device={"model": "Acme NVMe", "firmware_rev": "1.0.3"})
    fake_sysfs.disk("sda", devnum="8:0", device={"model": "Disk", "rev": "GX02"})
    nvme = block_device_facts("nvme0n1", sysfs=str(fake_sysfs.root))
    assert (nvme.firmware, block_device_facts("sda", sysfs=str(fake_sysfs.root)).firmware) == ("1.0.3", "GX02")

    def facts(device):  # type: ignore[no-untyped-def]
        run = RunInfo(id=1, created_at=datetime.now(UTC), status="complete", origin="run", suite_name="s")
        result = HistoryResult(1, 1, "nvme", "w", "[w]\n", None, {}, TargetFacts("/dev/nvme0n1", "block",
                                                                                 device=device), {})
        return changes.facts(run, result)

    updated = replace(nvme, firmware="1.0.4")
    assert changes.between(facts(nvme), facts(updated)) == (changes.Change("firmware", "1.0.3", "1.0.4"),)
