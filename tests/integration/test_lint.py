"""Lint on a real block device (a loop device): P8, P9 and P16 of a plan, the destructive guard's word
on a device that holds a filesystem. The rules themselves are tests/unit/check/test_lint.py's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from iolab.check import lint
from iolab.describe import suite as suite_mod
from iolab.describe.method import Precondition
from iolab.errors import SafetyError
from iolab.run.plan import RunOptions, prepare
from loopdev import MiB, loop_device, requires_loop


@pytest.mark.root
@requires_loop
def test_block_device_plan_p8_p9_p16(tmp_path: Path) -> None:
    with loop_device(tmp_path, size_bytes=64 * MiB) as loop:
        text = f"""
targets: {{dev: {loop.path}}}
defaults: {{ioengine: libaio, direct: 1, time_based: 1, runtime: 90s, ramp_time: 5s, randrepeat: 0}}
workloads:
  - {{rw: randread, bs: 4k}}
  - {{rw: randwrite, bs: 4k}}
"""
        suite = suite_mod.load_yaml(text, "s.yaml")
        plan = prepare(suite, RunOptions(), strict=False)
        found = {f.id: f for f in plan.findings}
        assert found["P16"].severity == lint.ERROR and "--destroy" in found["P16"].remedy
        assert found["P9"].where == ("randread-4k-qd1 on dev",)
        assert "P8" not in found  # loop devices are rotational as far as the kernel knows
        destroyed = prepare(suite, RunOptions(destroy=(loop.path,)), strict=False)
        assert "P16" not in {f.id for f in destroyed.findings}
        pre = replace(suite, method=replace(suite.method, precondition=Precondition(fill=1)))
        preconditioned = prepare(pre, RunOptions(destroy=(loop.path,)))
        assert {"P8", "P9"}.isdisjoint({f.id for f in preconditioned.findings})
        loop.make_ext4()
        with pytest.raises(SafetyError, match="refusing"):
            prepare(suite, RunOptions(destroy=(loop.path,)))
