"""`iolab report` in-process: HTML, PNG and Markdown of real fio runs (replayed from recordings) stored
under hostile names (tests/support/reportrun.py), the comparison at its top as `iolab compare` prints
it, and its errors."""

from __future__ import annotations

import pytest

import reportrun
from inprocess import iolab


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return reportrun.replayed_hostile_runs(tmp_path_factory.getbasetemp())


def test_cli_report_writes_html_png_and_markdown(hostile, tmp_path):
    proc = iolab("report", *map(str, hostile.run_ids), "-o", str(tmp_path / "r.html"), "--markdown",
                 str(tmp_path / "r.md"), db=hostile.db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r.html").stat().st_size > 500_000  # the JavaScript is inline
    assert sorted(p.name for p in (tmp_path / "r_files").iterdir())[:2] == ["bandwidth-bars.png", "bandwidth-bars.svg"]
    assert "r_files/iops-bars.png" in (tmp_path / "r.md").read_text()
    assert f"{tmp_path / 'r.html'}  (HTML, 9 charts)" in proc.stdout
    compared = iolab("compare", *map(str, hostile.run_ids), "--metric", "iops,clat_p99", "--threshold", "3%",
                     "--format", "markdown", db=hostile.db, cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    chosen = iolab("report", *map(str, hostile.run_ids), "-o", str(tmp_path / "c.html"), "--markdown",
                   str(tmp_path / "c.md"), "--metric", "iops,clat_p99", "--threshold", "3%", db=hostile.db,
                   cwd=tmp_path)
    assert chosen.returncode == 0, chosen.stderr
    markdown_text = (tmp_path / "c.md").read_text()
    tables = [t for t in compared.stdout.split("### ") if t]
    assert len(tables) == 3 and "threshold ±3%" in compared.stdout and "| clat p99 |" in compared.stdout
    assert tables[2].startswith("Why results do not pair")  # run 2 lacks a target
    for table in tables:  # exactly the rows compare prints, at the top of the report
        assert "### " + table.rstrip() in markdown_text.split("## Throughput")[0]
    bad = iolab("report", *map(str, hostile.run_ids), "--metric", "speed", db=hostile.db, cwd=tmp_path)
    assert bad.returncode == 2 and "Error: unknown metric 'speed'" in bad.stderr
    missing = iolab("report", "999", db=hostile.db, cwd=tmp_path)
    assert missing.returncode == 2 and "Error: no run matches '999'" in missing.stderr
    (tmp_path / "file").write_text("")
    blocked = iolab("report", "1", "-o", str(tmp_path / "file" / "r.html"), db=hostile.db, cwd=tmp_path)
    assert blocked.returncode == 2 and "Error: cannot write" in blocked.stderr and "Traceback" not in blocked.stderr
