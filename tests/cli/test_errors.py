"""No command ends in a traceback: unexpected exceptions are one error line and a hint (the traceback
only with --debug); a stored run that cannot be read is reported and the command goes on with the
others; a damaged file is refused whole while the others import."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from inprocess import iolab
from iolab import cli
from iolab.cli import show as cli_show
from iolab.store.database import Store
from iolab.store.schema import results
from paths import FIO as DATA

GOOD = [DATA / n for n in ("fio-3.33_randrw_libaio.json", "fio-3.33_randrw_posixaio.json",
                           "fio-3.16_randrw_posixaio.json")]


def boom(*_args, **_kwargs):
    raise RuntimeError("boom\n  on two lines")


def test_an_unexpected_exception_is_one_line_and_a_hint(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli_show, "store_of", boom)
    with pytest.raises(SystemExit) as caught:
        cli.main(["--db", str(tmp_path / "t.db"), "runs"])
    assert caught.value.code == 1
    assert capsys.readouterr().err == (
        "Error: internal error: RuntimeError: boom on two lines\n"
        "Hint: this is a bug in iolab; please report it with the output of the same command run with --debug "
        "(iolab --debug …)\n")


def test_debug_shows_the_traceback(tmp_path, monkeypatch):
    monkeypatch.setattr(cli_show, "store_of", boom)
    with pytest.raises(RuntimeError, match="boom"):
        cli.main(["--debug", "--db", str(tmp_path / "t.db"), "runs"])


@pytest.fixture(scope="module")
def damaged_db(tmp_path_factory):
    """Runs 1-3 imported; run 2's stored report then holds what an older iolab stored for an infinity."""
    db = tmp_path_factory.mktemp("cli") / "t.db"
    assert iolab("import", *map(str, GOOD), "--label", "all", db=db).returncode == 0
    store = Store(str(db))
    with store.engine.begin() as conn:
        report = conn.execute(sa.select(results.c.report).where(results.c.run_id == 2)).scalar()
        report["jobs"][0]["latency_dist_pct"]["2000ms"] = None
        conn.execute(results.update().where(results.c.run_id == 2).values(report=report))
    store.close()
    return db


UNREADABLE = ("Error: run 2 cannot be read: result 0 (vda / randrw): report: jobs.0.latency_dist_pct.2000ms: "
              "Input should be a valid number, got None\n")


def test_show_reports_the_unreadable_run_and_shows_the_others(damaged_db):
    proc = iolab("show", "1", "2", "3", "--format", "json", db=damaged_db)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(UNREADABLE)
    assert [d["run"]["id"] for d in json.loads(proc.stdout)["runs"]] == [1, 3]  # iolab.run-set/1


def test_runs_lists_every_run(damaged_db):
    proc = iolab("runs", "--format", "csv", db=damaged_db)
    assert proc.returncode == 0, proc.stderr  # the listing itself reads run 2's row without its results
    assert [line.split(",")[0] for line in proc.stdout.splitlines()[1:]] == ["3", "2", "1"]


def test_compare_and_report_go_on_without_the_unreadable_run(damaged_db, tmp_path):
    proc = iolab("compare", "1", "2", "3", "--format", "csv", db=damaged_db)
    assert proc.returncode == 1 and proc.stderr.startswith(UNREADABLE) and "'2' is left out" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout.count("randrw") > 4
    proc = iolab("compare", "all", "3", db=damaged_db)  # run 2 is one of the label's runs
    assert proc.returncode == 1 and "clat p99" in proc.stdout
    proc = iolab("compare", "1", "2", db=damaged_db)
    assert proc.returncode == 2 and "only one side left to compare" in proc.stderr
    proc = iolab("report", "all", "-o", str(tmp_path / "r.html"), db=damaged_db)
    assert proc.returncode == 1 and (tmp_path / "r.html").exists() and "runs 1, 3" in proc.stderr


def test_a_damaged_file_is_refused_whole_and_the_others_import(tmp_path):
    bad = tmp_path / "negated.json"
    bad.write_text(GOOD[0].read_text().replace('"mean" : 144298.934345', '"mean" : -144298.934345'))
    proc = iolab("import", str(GOOD[1]), str(bad), str(GOOD[2]), db=tmp_path / "t.db")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"Error: {bad}: jobs[0].read.clat_ns.mean = -144298.934345: cannot be negative\n" in proc.stderr
    assert proc.stderr.count("Imported ") == 2
    assert len(Store(str(tmp_path / "t.db")).list_runs()) == 2


def test_a_file_whose_path_is_not_utf8_is_refused_and_the_others_import(tmp_path):
    bad = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xffname.json"))
    bad.write_bytes(GOOD[0].read_bytes())
    proc = iolab("import", str(bad), str(GOOD[1]), db=tmp_path / "t.db")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "bad\\xffname.json: the file's path is not UTF-8 text" in proc.stderr
    assert proc.stderr.count("Imported ") == 1
