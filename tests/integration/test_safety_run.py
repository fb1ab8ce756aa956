"""The destructive-write guard end to end: `iolab run` on loop devices, real fio, real data.

Devices carrying data are refused before fio starts, even with --destroy, and their bytes are
unchanged; a blank device runs only when named with --destroy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clirun import iolab
from iolab.store.database import Store
from loopdev import MiB, loop_device, requires_loop, tmpfs

pytestmark = requires_loop


@pytest.fixture(autouse=True)
def _own_state(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """iolab's state (spool, marks, tuning journal) in a directory of this test's, for the iolab it
    runs in-process and in subprocesses: the tests run in parallel."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))

WRITE_SUITE = """\
targets: {{dev: {dev}}}
defaults: {{ioengine: libaio, direct: 1, size: 4m, time_based: 1, runtime: 1s}}
workloads:
  - {{rw: randwrite, bs: 4k, iodepth: 4}}
"""


def run_on(tmp_path: Path, device: str, *extra: str):
    suite = tmp_path / "w.yaml"
    suite.write_text(WRITE_SUITE.format(dev=device))
    return iolab("run", str(suite), *extra, db=tmp_path / "db.sqlite", cwd=tmp_path)


@pytest.mark.parametrize("setup", ["ext4", "mounted", "partition table"])
def test_devices_with_data_are_refused_even_with_destroy(tmp_path, setup):
    with loop_device(tmp_path, 16 * MiB) as loop:
        if setup in ("ext4", "mounted"):
            loop.make_ext4()
        if setup == "mounted":
            loop.mount(tmp_path / "mnt")
        if setup == "partition table":
            loop.partition()
        before = loop.sha256()
        proc = run_on(tmp_path, loop.path, "--destroy", loop.path)
        assert proc.returncode == 2, proc.stdout  # a refused plan, as `iolab lint` exits
        assert proc.stderr.startswith(f"Error: refusing to write to {loop.path}")
        assert {"ext4": "ext4", "mounted": "mounted at", "partition table": "partition"}[setup] in proc.stderr
        assert "Traceback" not in proc.stderr
        assert loop.sha256() == before
    assert not (tmp_path / "db.sqlite").exists() or Store(f"sqlite:///{tmp_path}/db.sqlite").list_runs() == []


def test_blank_device_runs_only_when_named(tmp_path):
    with loop_device(tmp_path, 16 * MiB) as loop:
        refused = run_on(tmp_path, loop.path)
        assert refused.returncode == 2 and "--destroy " + loop.path in refused.stderr
        proc = run_on(tmp_path, loop.path, "--destroy", loop.path)
        assert proc.returncode == 0, proc.stderr
        run = Store(f"sqlite:///{tmp_path}/db.sqlite").get_run(1)
        (result,) = run.results
        assert result.status == "ok" and result.report.jobs[0].directions["write"].total_ios > 0
        assert result.target_facts.kind == "block" and result.target_facts.device.size_bytes == 16 * MiB


def test_reads_of_a_device_with_data_are_allowed(tmp_path):
    with loop_device(tmp_path, 16 * MiB) as loop:
        loop.make_ext4()
        before = loop.sha256()
        suite = tmp_path / "r.yaml"
        suite.write_text(WRITE_SUITE.format(dev=loop.path).replace("randwrite", "randread"))
        proc = iolab("run", str(suite), db=tmp_path / "db.sqlite", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert loop.sha256() == before


SPACE_SUITE = """\
targets: {{scratch: {dir}}}
repeat: 3
defaults: {{ioengine: psync, size: 20m, time_based: 1, runtime: 1s}}
workloads:
  - {{name: one, rw: randwrite, bs: 4k{numjobs}}}
"""


@pytest.mark.parametrize(("numjobs", "fits"), [("", True), (", numjobs: 3", False)])
def test_directory_space_counts_each_job_once_not_each_repeat(tmp_path, numjobs, fits):
    """64 MiB tmpfs, 16 MiB kept free: 3 repeats of a 20 MiB job reuse one 20 MiB file and fit;
    numjobs=3 lays out 3 files (60 MiB) and is refused."""
    with tmpfs(tmp_path / "mnt", "64m") as mnt:
        suite = tmp_path / "s.yaml"
        suite.write_text(SPACE_SUITE.format(dir=mnt, numjobs=numjobs))
        proc = iolab("run", str(suite), "--dry-run", db=tmp_path / "db.sqlite", cwd=tmp_path)
        if fits:
            assert proc.returncode == 0, proc.stderr
        else:
            assert proc.returncode != 0
            assert "refusing to lay out 60.00 MiB" in proc.stderr, proc.stderr


def test_a_size_larger_than_the_target_is_a_suite_error_naming_the_place(tmp_path):
    """fio would silently test only the device's 16 MiB; a file cannot grow past the free space."""
    with loop_device(tmp_path, 16 * MiB) as loop:
        suite = tmp_path / "w.yaml"
        suite.write_text(WRITE_SUITE.format(dev=loop.path).replace("size: 4m", "size: 1g"))
        proc = iolab("run", str(suite), "--dry-run", db=tmp_path / "db.sqlite", cwd=tmp_path)
        assert proc.returncode == 2
        assert proc.stderr.startswith(f"Error: {suite}:2: defaults.size: 1g (1.00 GiB) is more than target dev "
                                      f"holds: {loop.path} is a 16.00 MiB block device\n"), proc.stderr
    with tmpfs(tmp_path / "mnt", "64m") as mnt:
        suite.write_text(SPACE_SUITE.format(dir=mnt / "f.dat", numjobs="").replace(
            "{name: one,", "{name: one, size: 100m,"))
        proc = iolab("run", str(suite), "--dry-run", db=tmp_path / "db.sqlite", cwd=tmp_path)
        assert proc.returncode == 2
        assert proc.stderr.startswith(f"Error: {suite}:5: workloads[0].size: 100m (100.00 MiB) is more than "
                                      f"target scratch holds: {mnt / 'f.dat'} has 64.00 MiB of room"), proc.stderr
