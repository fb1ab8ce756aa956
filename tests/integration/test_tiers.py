"""Tier accounting on this machine: a snapshot of a loop device's counters grows with a read. How the
counters are read and the hit ratio computed is tests/unit/analyze/test_tiers.py's."""

from __future__ import annotations

import pytest

from iolab.analyze import tiers
from iolab.describe.tiers import parse_tier
from loopdev import MiB, loop_device, requires_loop


@requires_loop
@pytest.mark.root
def test_a_snapshot_reads_this_machines_counters(tmp_path):
    with loop_device(tmp_path, 8 * MiB) as loop:
        tier = parse_tier("origin", loop.path)
        assert tier.kernel_name == loop.name
        with open(loop.path, "rb") as dev:
            before = tiers.snapshot([loop.name, "no-such-device"])
            dev.read(4096)
        after = tiers.snapshot([loop.name])
    assert set(before["stat"]) == {loop.name} and not before["dm_cache"] and not before["bcache"]
    grown = tiers.parse_block_stat(after["stat"][loop.name]).minus(tiers.parse_block_stat(before["stat"][loop.name]))
    assert grown.reads >= 1
