"""Method helpers on this machine: dropping the page cache of a real file (root: it drops the
machine's caches), and preconditioning rounds on a loop device with real fio. The rules themselves
are tests/unit/run/test_method.py's."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from clirun import iolab
from iolab.run import method
from iolab.store.database import Store
from loopdev import MiB, loop_device, requires_loop


def test_drop_caches_on_a_real_file(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("dropping caches needs root")
    path = tmp_path / "cached.bin"
    path.write_bytes(os.urandom(8 * MiB))
    assert method.resident_bytes(str(path)) == 8 * MiB  # just written: in the page cache
    result = method.drop_caches([str(path)])
    assert result["verified"] and result["resident_bytes"][str(path)] == 0
    assert result["cached_before_bytes"] > 0 and result["cached_after_bytes"] is not None


PRECONDITIONED = """\
name: pre
targets: {{dev: {device}}}
defaults: {{ioengine: libaio, direct: 1, bs: 4k, iodepth: 4, time_based: 1, runtime: 1s}}
precondition: {{fill: 1x, bs: 1m, rounds: 5, round_time: 500ms}}
drop_caches: true
workloads:
  - {{rw: randwrite}}
  - {{rw: randread}}
"""


@pytest.mark.root
@requires_loop
def test_preconditioning_on_a_loop_device(tmp_path: Path) -> None:
    with loop_device(tmp_path, size_bytes=32 * MiB) as loop:
        suite = tmp_path / "pre.yaml"
        suite.write_text(PRECONDITIONED.format(device=loop.path))
        db = tmp_path / "db.sqlite"
        env = {"XDG_STATE_HOME": str(tmp_path / "state")}
        proc = iolab("run", str(suite), "--destroy", loop.path, db=db, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "precondition: writing the region 1× sequentially (bs=1m)" in proc.stderr
        assert re.search(r"precondition round 1/5: [\d.]+ IOPS", proc.stderr)
        run = Store(f"sqlite:///{db}").get_run(1)
        first, second = run.results
        pre = first.extra["precondition"]
        assert pre["fill"]["io_bytes"] == 32 * MiB and pre["fill"]["bs"] == "1m"
        assert second.extra["precondition"]["fill"]["skipped"]  # one fill per device and run
        for result in run.results:
            rounds = result.extra["precondition"]["rounds"]
            values = [r["iops"] for r in rounds]
            assert len(rounds) == 5 and all(v > 0 for v in values)
            verdict = result.extra["precondition"]["steady_state"]
            assert verdict["attained"] == method.steady_state(values).attained  # the rule, applied to the rounds
            assert result.extra["drop_caches"]["verified"] is True
        shown = iolab("show", "1", db=db, env=env).stdout
        assert "precondition dev/randwrite-4k-qd4 #1: fill 1× bs=1m;" in shown
        assert "5 round(s) of iops [" in shown and "steady state" in shown
