"""Curating stored runs: selectors with ranges and lists, ``label``, ``tag``, ``delete`` (a run in
progress refused; its results, fio logs, observers' samples, spool go with it, nothing of other runs).
In-process, real SQLite: the recorded loop-device history (``historydata.LOOP_RUNS``)."""

from __future__ import annotations

import json
import lzma
import sqlite3
from pathlib import Path

import pytest

import historydata
from inprocess import iolab
from iolab.facts.owner import owner_record
from iolab.run.spool import Spool
from iolab.store.database import Store
from paths import FIO

SAMPLE = FIO / "fio-3.33_randrw_libaio.json"


@pytest.fixture
def runs(tmp_path) -> Path:
    db = tmp_path / "iolab.db"
    db.write_bytes(lzma.decompress(historydata.LOOP_RUNS.read_bytes()))
    return db


def _ids(proc) -> list[int]:
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    return [d["run"]["id"] for d in (document["runs"] if document["schema"] == "iolab.run-set/1" else [document])]


def test_selectors_take_ranges_and_lists(runs):
    assert _ids(iolab("show", "3-7", "--format", "json", db=runs)) == [3, 4, 5, 6, 7]
    assert _ids(iolab("show", "3,5,9", "--format", "json", db=runs)) == [3, 5, 9]
    assert _ids(iolab("show", "14-20,2", "--format", "json", db=runs)) == [14, 15, 16, 2]
    backwards = iolab("show", "7-3", db=runs)
    assert backwards.returncode == 2 and "Error: run range '7-3' runs backwards" in backwards.stderr
    missing = iolab("show", "3,99", db=runs)
    assert missing.returncode == 2 and "Error: no run matches '99' (in '3,99')" in missing.stderr
    assert iolab("show", "20-30", db=runs).returncode == 2
    compared = iolab("compare", "1-8", "9-16", db=runs)  # each side pools its runs as repetitions
    assert compared.returncode == 0, compared.stderr
    assert "1-8 (runs 1–8) → 9-16 (runs 9–16)" in compared.stdout and "8/8" in compared.stdout


def test_label_and_tag_change_what_selectors_find(runs):
    assert iolab("label", "3-5", "before-throttle", db=runs).stdout == "runs 3, 4, 5: labelled before-throttle\n"
    assert _ids(iolab("show", "before-throttle", "--format", "json", db=runs)) == [3, 4, 5]
    assert iolab("label", "16", "--remove", db=runs).stdout == "run 16: no label\n"
    assert iolab("label", "16", db=runs).returncode == 2
    tagged = iolab("tag", "9,10", "disk=loop0", "blkio=x", db=runs)
    assert tagged.stdout == "runs 9, 10: disk=loop0, blkio=x\n", tagged.stderr
    assert _ids(iolab("show", "disk=loop0", "--format", "json", db=runs)) == [9, 10]
    assert iolab("tag", "9", "--remove", "blkio", db=runs).returncode == 0
    listed = {r["id"]: r for r in json.loads(iolab("runs", "--format", "json", db=runs).stdout)["runs"]}
    assert listed[9]["tags"] == {"disk": "loop0"} and listed[10]["tags"] == {"blkio": "x", "disk": "loop0"}
    assert listed[3]["label"] == "before-throttle" and listed[16]["label"] is None
    assert listed[11]["tags"] == {"blkio": "read_iops 300"}  # runs not selected are left as they were
    typo = iolab("tag", "9", "--remove", "dsik", db=runs)
    assert typo.returncode == 2 and "Error: no run of 9 has the tag 'dsik'" in typo.stderr


def _counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("runs", "results", "time_series", "host_samples", "run_tags", "result_figures")}


def test_delete_takes_the_runs_with_what_is_theirs_and_nothing_else(runs, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    before = _counts(runs)
    asked = iolab("delete", "1,2", db=runs)
    assert asked.returncode == 2
    assert "Error: nothing was deleted\nHint: to delete them: the same command with --yes" in asked.stderr
    assert asked.stdout.startswith("Would delete run 1 (nightly): 1 result, 5 fio logs, 1 host sample set, 0 traces")
    assert _counts(runs) == before
    store = Store(str(runs))
    spooled = Spool(store.display_url, 2, store.get_run(2).info.created_at).path
    spooled.mkdir(parents=True)
    (spooled / "fio.log").write_text("left by a killed run\n")
    store.close()
    done = iolab("delete", "1-2", "--yes", db=runs)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Deleted run 1 (nightly): 1 result, 5 fio logs, 1 host sample set, 0 traces",
                                        "Deleted run 2 (nightly): 1 result, 3 fio logs, 1 host sample set, 0 traces"]
    after = _counts(runs)
    assert after == {"runs": before["runs"] - 2, "results": before["results"] - 2,
                     "time_series": before["time_series"] - 8, "host_samples": before["host_samples"] - 2,
                     "run_tags": before["run_tags"] - 2, "result_figures": before["result_figures"] - 2}
    assert not spooled.exists()
    assert iolab("show", "1", db=runs).returncode == 2
    assert _ids(iolab("show", "3-16", "--format", "json", db=runs)) == list(range(3, 17))


def test_delete_refuses_a_run_in_progress_and_takes_one_whose_process_is_gone(tmp_path):
    db = tmp_path / "iolab.db"
    store = Store(str(db))
    alive = store.create_run(suite_name="s", suite_text="", options={"owner": owner_record()})
    gone = store.create_run(suite_name="s", suite_text="", options={"owner": {**owner_record(), "pid": 2**22 + 7}})
    store.close()
    refused = iolab("delete", f"{alive},{gone}", "--yes", db=db)
    assert refused.returncode == 2 and f"Error: run {alive} is in progress; nothing was deleted" in refused.stderr
    assert _counts(db)["runs"] == 2
    assert iolab("delete", str(gone), "--yes", db=db).returncode == 0
    assert _counts(db)["runs"] == 1


def test_an_imported_file_can_be_imported_again_once_its_run_is_deleted(tmp_path):
    db = tmp_path / "iolab.db"
    assert iolab("import", str(SAMPLE), db=db).returncode == 0
    assert "already imported in run 1" in iolab("import", str(SAMPLE), db=db).stderr
    assert iolab("delete", "latest", "--yes", db=db).returncode == 0
    again = iolab("import", str(SAMPLE), db=db)
    assert again.returncode == 0 and "Imported" in again.stdout + again.stderr and "already" not in again.stderr, again


def test_csv_starts_with_its_header_and_says_what_it_is_of_on_stderr(runs):
    import csv
    import io
    compared = iolab("compare", "1", "9", "--format", "csv", db=runs)
    assert compared.returncode == 0, compared.stderr
    assert compared.stdout.startswith("workload,direction,metric,unit,n,a_mean,")  # as pandas.read_csv reads it
    assert "#" not in compared.stdout and compared.stderr.startswith("# 1 → 9\n\n# Summary: geometric mean of 9 / 1")
    header, *rows = list(csv.reader(io.StringIO(compared.stdout)))
    assert len(rows) == 8 and all(len(r) == len(header) for r in rows)
    shown = iolab("show", "3-4", "--format", "csv", db=runs)  # a table per run: one, under a column naming each
    header, *rows = list(csv.reader(io.StringIO(shown.stdout)))
    assert header[:3] == ["table", "target", "workload"]
    assert [r[0] for r in rows] == ["run 3: nightly [nightly] (complete)", "run 4: nightly [nightly] (complete)"]
