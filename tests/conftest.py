"""Shared fixtures and the CI rule on skips.

``fake_sysfs``: build sysfs block-device trees in tmp for targets/host tests.

Tests skip when a prerequisite is missing (root, loop devices, PostgreSQL, Chromium). CI sets
``IOLAB_TEST_REQUIRE_ALL=1`` (.ci/run): there every skip is a failure, so a broken setup
cannot pass as "skipped".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

# Every chart spec a test builds is checked against Vega-Lite's schema (``report.charts.spec``;
# iolab itself skips the check), in-process and in the iolab processes the tests start.
os.environ.setdefault("IOLAB_CHECK_CHARTS", "1")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("IOLAB_TEST_REQUIRE_ALL") == "1":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, but CI requires every prerequisite: {reason}"


class FakeSysfs:
    """A sysfs tree laid out like the kernel's: ``devices/...`` plus ``class/block`` and
    ``dev/block`` symlinks, so code finds devices by name, by ``MAJ:MIN`` and via ``realpath``.

    A disk sits in ``devices/pci0000:00/<pci>/host/<name>ctrl/<name>``; ``<name>/device`` links
    to the controller directory (model, vendor, serial), whose ``device`` links to the PCI
    directory, where ``numa_node`` lives (as for NVMe namespaces).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._pci = 0

    def disk(
        self,
        name: str,
        *,
        devnum: str,
        size_sectors: int = 2_097_152,
        queues: Sequence[str] = ("0, 1",),
        numa_node: int | None = None,
        queue: dict[str, str] | None = None,
        device: dict[str, str] | None = None,
        holders: Sequence[str] = (),
    ) -> Path:
        """Create a disk; ``queues`` are the raw ``mq/<i>/cpu_list`` texts, in hctx order."""
        self._pci += 1
        pci = self.root / "devices" / "pci0000:00" / f"0000:00:{self._pci:02x}.0"
        ctrl = pci / "host" / f"{name}ctrl"
        disk = ctrl / name
        attrs = {"size": str(size_sectors), "dev": devnum, "uevent": f"MAJOR=1\nDEVNAME={name}\nDEVTYPE=disk"}
        self._write(disk, attrs)
        defaults = {"logical_block_size": "512", "physical_block_size": "4096", "rotational": "0",
                    "scheduler": "[none] mq-deadline", "rq_affinity": "1", "nr_requests": "1023",
                    "read_ahead_kb": "128", "nomerges": "0", "write_cache": "write back"}
        self._write(disk / "queue", {**defaults, **(queue or {})})
        for i, cpus in enumerate(queues):
            self._write(disk / "mq" / str(i), {"cpu_list": cpus})
        self._write(ctrl, device or {})
        if numa_node is not None:
            self._write(pci, {"numa_node": str(numa_node)})
        self._link(disk / "device", ctrl)
        self._link(ctrl / "device", pci)
        (disk / "holders").mkdir()
        for holder in holders:
            (disk / "holders" / holder).mkdir()
        self._register(name, devnum, disk)
        return disk

    def partition(self, disk: Path, name: str, *, devnum: str, number: int, size_sectors: int) -> Path:
        part = disk / name
        uevent = f"DEVNAME={name}\nDEVTYPE=partition\nPARTN={number}"
        attrs = {"partition": str(number), "size": str(size_sectors), "dev": devnum, "uevent": uevent}
        self._write(part, attrs)
        (part / "holders").mkdir()
        self._register(name, devnum, part)
        return part

    def cpus(self, online: str, *, governors: dict[int, str] | None = None,
             available: str = "performance powersave", nodes: dict[int, str] | None = None) -> None:
        """Online CPUs, their cpufreq governors and the NUMA nodes' cpulists."""
        cpu_dir = self.root / "devices" / "system" / "cpu"
        self._write(cpu_dir, {"online": online})
        for cpu, governor in (governors or {}).items():
            self._write(cpu_dir / f"cpu{cpu}" / "cpufreq",
                        {"scaling_governor": governor, "scaling_available_governors": available})
        for node, cpulist in (nodes or {}).items():
            self._write(self.root / "devices" / "system" / "node" / f"node{node}", {"cpulist": cpulist})

    def _register(self, name: str, devnum: str, target: Path) -> None:
        self._link(self.root / "class" / "block" / name, target)
        self._link(self.root / "dev" / "block" / devnum, target)

    @staticmethod
    def _write(directory: Path, attrs: dict[str, str]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for key, value in attrs.items():
            (directory / key).write_text(value + "\n")

    @staticmethod
    def _link(link: Path, target: Path) -> None:
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(target, link.parent))


@pytest.fixture(scope="session")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real fio sweep in bench-fio's layout (tests/benchfio.py), run once per session: the
    directory of its outputs and logs; the data file lies beside it."""
    import benchfio

    root = tmp_path_factory.mktemp("sweep")
    benchfio.sweep(root / "ssd", root / "data.bin")
    return root / "ssd"


@pytest.fixture
def fake_sysfs(tmp_path: Path) -> FakeSysfs:
    """An empty fake sysfs root under ``tmp_path/sys``; pass ``str(fake_sysfs.root)`` as ``sysfs=``."""
    return FakeSysfs(tmp_path / "sys")

