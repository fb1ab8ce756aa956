"""`iolab compare` of two imported bench-fio sweeps: the recorded one of a file (tests/data/bench-fio)
against one real fio runs here on a loop device throttled to 400 IOPS (a cgroup), as ratio grids."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import benchfio
import cgroup
from clirun import iolab
from loopdev import loop_device, requires_loop


@pytest.mark.root
@requires_loop
def test_comparing_two_sweeps_prints_ratio_grids(tmp_path):
    if cgroup.unavailable_reason():
        pytest.skip(cgroup.unavailable_reason() or "")
    sweep_dir = benchfio.recorded("ssd", tmp_path / "ssd")
    with loop_device(tmp_path, size_bytes=32 * 1024**2) as loop, cgroup.throttled(loop.path, iops=400) as group:
        benchfio.sweep(tmp_path / "hdd", Path(loop.path), rws=("randread",), wrapper=group.wrapper())
    db = tmp_path / "iolab.db"
    for path, label in ((sweep_dir, "ssd"), (tmp_path / "hdd", "hdd")):
        assert iolab("import", str(path), "--label", label, db=db).returncode == 0
    proc = iolab("compare", "ssd", "hdd", db=db)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    table = out.split("ssd (run 1) → hdd (run 2)")[1]
    assert re.search(r"rw\s+iodepth\s+numjobs\s+dir\s+metric", table)
    grid = out.split("IOPS ratio hdd / ssd · randread 4k")[1]
    ratios = [float(x) for x in re.findall(r"×([\d.e+-]+)", grid.split("geometric mean")[0])]
    assert len(ratios) == 6 and all(r < 1 for r in ratios), grid  # capped at 400 IOPS: slower everywhere
    geomean = float(re.search(r"geometric mean ×([\d.e+-]+)", grid).group(1))
    assert min(ratios) <= geomean <= max(ratios)
    assert re.search(r"best QD\d+ ×\d \(×[\d.]+\), worst QD\d+ ×\d \(×[\d.]+\)", grid)
    assert "randwrite" not in grid  # only the randread family is in both sweeps
