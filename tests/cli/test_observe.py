"""This host's observer in a run, in-process on recorded fio: what it says of a job too short to measure.
Runs whose cost figures need time really passing while fio runs: tests/integration/test_observe_local.py."""

from __future__ import annotations

import json
from pathlib import Path

from inprocess import iolab


def test_a_job_shorter_than_the_sampling_is_not_measured(tmp_path: Path):
    """A job of a few ms (one 4k I/O, as a crash-test cut can be): no figure from scrapes a second
    apart (it had shown 851 % CPU busy), the reason said, and no share anywhere over 100 %."""
    (tmp_path / "job.fio").write_text("[one]\nrw=read\nbs=4k\nsize=4k\n")
    db = tmp_path / "db.sqlite"
    proc = iolab("run", "job.fio", "--target", f"d={tmp_path}", db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    document = json.loads(iolab("show", "latest", "--format", "json", db=db).stdout)
    (observed,) = document["results"][0]["extra"]["observed"]
    assert observed["window_s"] is None and observed["error"].startswith("not measured (window ")
    assert observed["error"].endswith(" < 1 s sampling)")
    assert "local during d/job: not measured (window" in " ".join(proc.stdout.split())  # the workload: the file
    (cost,) = document["results"][0]["host_costs"]
    assert cost["cpu_busy_pct"] is None and cost["cpu_us_per_io"] is None
