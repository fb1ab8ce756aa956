"""`iolab lint`: its JSON, its text and its exit codes (fio's checks replayed)."""

from __future__ import annotations

import json
from pathlib import Path

from inprocess import iolab


def test_lint_cli_json_and_exit_codes(tmp_path: Path) -> None:
    good = tmp_path / "good.fio"
    good.write_text("[j]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\niodepth=8\nsize=16m\ntime_based\n"
                    "runtime=120s\nramp_time=10s\nrandrepeat=0\n")
    db = tmp_path / "db.sqlite"
    proc = iolab("lint", str(good), "--target", f"d={tmp_path}/f.bin", "--format", "json", db=db)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "iolab.lint/1" and doc["suite"] == "good" and {f["id"] for f in doc["findings"]} == {"P1"}
    bad = tmp_path / "bad.fio"
    bad.write_text("[j]\nrw=randwrite\nverify=md5\nnorandommap\nioengine=libaio\niodepth=16\nsize=16m\n")
    proc = iolab("lint", str(bad), "--target", f"d={tmp_path}/f.bin", db=db)
    assert proc.returncode == 0, proc.stdout  # warnings only
    assert "P14 warning" in proc.stdout and "Remedy: drop norandommap" in proc.stdout
    assert "Traceback" not in proc.stderr
