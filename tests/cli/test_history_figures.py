"""What history reads at scale: the figures stored with each result (``result_figures``, written with the
result and filled on upgrade by migration 0007) and the change points kept between calls
(``change_points``). Real fio outputs (recorded), the command in-process, real SQLite. PostgreSQL's
upgrade: tests/system/test_history_figures.py; that a history shown again imports none of the
detection's libraries (a fresh process): tests/integration/test_history_figures.py."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

import historydata
from figuresdata import downgraded_to_0006, expected, reports, stored_figures
from inprocess import iolab
from iolab.analyze import changepoints
from iolab.describe.suite import load_yaml
from iolab.errors import ParseError
from iolab.fio import parse_output
from iolab.fio.merge import job_ios
from iolab.run import pipeline
from iolab.run.plan import RunOptions
from iolab.store.database import Store
from paths import FIO as DATA

T0 = 1_780_000_000


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    """Every sample fio output that parses, imported with the real command (one run each)."""
    paths = []
    for path in sorted(DATA.glob("fio-*")):
        try:
            parse_output(path.read_text(errors="replace"), path.name)
        except ParseError:
            continue
        paths.append(path)
    db = tmp_path_factory.mktemp("samples") / "s.db"
    done = iolab("import", *map(str, paths), db=db)
    assert done.returncode == 0, done.stderr
    return db


def test_imported_results_store_the_figures_their_reports_give(samples):
    store = Store(f"sqlite:///{samples}")
    found, stored = stored_figures(store), reports(store)
    assert len(stored) >= 15 and found.keys() == stored.keys()
    for rid, report in stored.items():
        assert found[rid] == expected(report), rid
    store.close()


def test_a_run_stores_the_figures_of_its_result(tmp_path):
    suite = load_yaml(f"name: s\ntargets:\n  t: {{path: {tmp_path}/f, size: 1m}}\n"
                      "workloads:\n  - {rw: randrw, bs: 4k, ioengine: psync, runtime: 1, time_based: 1}\n", "s.yaml")
    run = pipeline.run(lambda: Store(f"sqlite:///{tmp_path}/t.db"), suite, RunOptions(), label="figures")
    store = Store(f"sqlite:///{tmp_path}/t.db")
    ((rid, report),) = reports(store).items()
    figures = stored_figures(store)[rid]
    assert figures == expected(report) and [row[1] for row in figures["jobs"]] == ["read", "write"]
    assert figures["ios"] == job_ios(run.results[0].report) > 0
    store.save_result(rid, status="failed", error="again")  # a result that ends otherwise has none
    assert stored_figures(store) == {}
    store.close()


def test_an_older_database_gets_the_figures_of_its_results_on_upgrade(tmp_path, base):
    url = f"sqlite:///{tmp_path}/old.db"
    paths = historydata.write_runs(tmp_path / "out", [historydata.output(
        base, {"a": (1.0, {}), "b": (0.5, {"iodepth": "4"})}, T0 + i * 86_400) for i in range(3)])
    done = iolab("import", *map(str, paths), db=tmp_path / "unused.db", env={"IOLAB_DB": url})
    assert done.returncode == 0, done.stderr
    store = Store(url)
    written = stored_figures(store)
    assert len(written) == 3 and all(len(f["jobs"]) == 2 for f in written.values())
    downgraded_to_0006(store)  # no figures, no change points
    store.close()
    upgraded = Store(url)
    assert stored_figures(upgraded) == written
    upgraded.close()


@pytest.fixture(scope="module")
def base() -> dict:
    return historydata.recorded_output()


@pytest.fixture(scope="module")
def imported(base, tmp_path_factory) -> Path:
    """30 outputs a day apart, imported: ``steady`` and ``slows`` (20 % fewer I/Os from run 15)."""
    tmp = tmp_path_factory.mktemp("nightly")
    docs = [historydata.output(base, {"steady": (1 + 0.02 * (i % 3), {}),
                                      "slows": ((1 + 0.02 * (i % 3)) * (0.8 if i >= 15 else 1), {})}, T0 + i * 86_400)
            for i in range(30)]
    done = iolab("import", *map(str, historydata.write_runs(tmp / "out", docs)), db=tmp / "h.db")
    assert done.returncode == 0, done.stderr
    return tmp / "h.db"


@pytest.fixture()
def nightly(imported, tmp_path) -> Path:
    """A copy of the imported database, this test's own to change."""
    shutil.copyfile(imported, tmp_path / "h.db")
    return tmp_path / "h.db"


@pytest.mark.parametrize("fmt", ["json", "csv", "markdown"])
def test_history_from_the_figures_is_history_from_the_reports(nightly, fmt):
    from_figures = iolab("history", "--format", fmt, db=nightly)
    assert from_figures.returncode == 0, from_figures.stderr
    with sqlite3.connect(nightly) as conn:  # as a database whose figures were never written
        conn.execute("DELETE FROM result_figures")
        conn.execute("DELETE FROM change_points")
    from_reports = iolab("history", "--format", fmt, db=nightly)
    assert from_reports.returncode == 0, from_reports.stderr
    assert from_figures.stdout == from_reports.stdout
    if fmt == "json":
        (slows,) = [s for s in json.loads(from_figures.stdout)["series"]
                    if s["workload"] == "slows" and s["metric"] == "iops"]
        assert len(slows["change_points"]) == 1


def test_a_history_shown_again_runs_no_detection_until_its_data_change(nightly, base, tmp_path, monkeypatch):
    first = iolab("history", "--format", "json", db=nightly)
    assert first.returncode == 0, first.stderr
    with sqlite3.connect(nightly) as conn:
        kept = conn.execute("SELECT count(*) FROM change_points").fetchone()[0]
    assert kept == len(json.loads(first.stdout)["series"])  # every series' content differs

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("the detection ran")

    monkeypatch.setattr(changepoints, "detect", refuse)
    again = iolab("history", "--format", "json", db=nightly)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == first.stdout.strip()  # the same change points, segments and p-values
    (path,) = historydata.write_runs(tmp_path / "more", [historydata.output(base, {"steady": (1.0, {})},
                                                                             T0 + 40 * 86_400)])
    assert iolab("import", str(path), db=nightly).returncode == 0
    changed = iolab("history", "--format", "json", db=nightly)  # steady has a new point: detected again
    assert changed.returncode != 0 and "the detection ran" in changed.stderr
