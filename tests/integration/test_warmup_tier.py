"""A tier that is the target itself (direct reads of a loop device named as its own origin): the hit ratio
with and without ramp_time, in the table, its CSV and the curve."""

from __future__ import annotations

import pytest

from clirun import iolab
from iolab.analyze import warmup
from iolab.report import warmup as warmup_report
from iolab.report.table import read_csv, to_csv
from iolab.store.database import Store
from loopdev import MiB, loop_device, requires_loop


@requires_loop
@pytest.mark.root
def test_the_hit_ratio_of_a_tier_that_is_the_target_itself(tmp_path):
    """The issue's command: direct reads of a loop device named as its own origin. With ramp_time the
    device counts the ramp and fio does not: no hit ratio, and the cell says why (it printed −4.7 %,
    −50.7 %, −80.4 % before). Without ramp_time every I/O fio issued reached the device: 0 %."""
    db = tmp_path / "db.sqlite"
    job = tmp_path / "warm.fio"
    with loop_device(tmp_path, 16 * MiB) as loop:
        for ramp in ("1s", "0"):
            job.write_text(f"[global]\nioengine=libaio\ndirect=1\nramp_time={ramp}\nruntime=1s\ntime_based=1\n"
                           "size=8m\nrandrepeat=0\n[warm]\nrw=randread\nbs=4k\niodepth=4\n")
            proc = iolab("run", str(job), "--target", f"dev={loop.path}", "--destroy", loop.path, "--passes", "3",
                         "--tier", f"origin={loop.path}", "--label", f"ramp{ramp}", db=db)
            assert proc.returncode == 0, proc.stderr
    store = Store(f"sqlite:///{db}")
    (curve,) = warmup.curves([store.get_run(1)])
    assert all(p.hit_ratio is None and p.hit_problems == ("ramp_time counted by the device, not by fio",)
               for p in curve.points)
    table = warmup_report.warmup_table(store.get_run(1))
    assert table is not None and table.columns[6].title == "hit ratio"
    assert {row[6].text for row in table.rows} == {"n/a: ramp_time counted by the device, not by fio"}
    (_, (header, *rows)), = read_csv(to_csv([table]))  # CSV: no number, and the reason in its own column
    assert {(r[header.index("hit_ratio")], r[header.index("hit_ratio_problem")]) for r in rows} == {
        ("", "ramp_time counted by the device, not by fio")}
    (itself,) = warmup.curves([store.get_run(2)])
    for p in itself.points:  # udev or another reader may add a few I/Os to the device: then n/a, never < 0
        assert (p.hit_ratio is not None and 0 <= p.hit_ratio <= 0.001) or p.hit_problems, p
