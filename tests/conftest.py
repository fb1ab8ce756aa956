"""The tiers, shared fixtures and the CI rule on skips.

Every test is in one tier, by its folder, and carries the tier's marker: ``unit`` (``tests/unit/<package>/``)
and ``cli`` (``tests/cli/``) are the fast tier: in-process, fio replayed from recordings (``fake_fio``,
installed for each of their tests), and a ``fio`` first on PATH that fails the test if it is started
(``no_fio``); ``integration`` drives real fio on files and loop devices; ``system`` needs root services
(sshd in network namespaces, PostgreSQL, browsers, throttled devices).

``fake_sysfs``: build sysfs block-device trees in tmp for targets/host tests.

Tests skip when a prerequisite is missing (root, loop devices, PostgreSQL, Chromium). CI sets
``IOLAB_TEST_REQUIRE_ALL=1`` (.ci/run): there every skip is a failure, so a broken setup
cannot pass as "skipped".
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import pg
from fakefio import RECORD, FakeFio
from paths import TESTS

TIERS = ("unit", "cli", "integration", "system")
FAST = ("unit", "cli")
NOFIO = TESTS / "support" / "nofio"

# Every chart spec a test builds is checked against Vega-Lite's schema (``report.charts.spec``;
# iolab itself skips the check), in-process and in the iolab processes the tests start.
os.environ.setdefault("IOLAB_CHECK_CHARTS", "1")


def tier_of(path: Path) -> str | None:
    """The tier of a test file: the first folder under ``tests/``."""
    parts = path.resolve().relative_to(TESTS).parts
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(item.path)
        if tier is not None:
            item.add_marker(tier)
        if item.get_closest_marker("postgres"):  # one worker runs them all: one server per test run
            item.add_marker(pytest.mark.xdist_group("postgres"))
        # `make test` runs the `alone` tests after the others, one at a time; a run that mixes them
        # anyway (pytest -n N on a folder) still never runs two at once
        for marker in ("alone", "serial"):
            if item.get_closest_marker(marker):
                item.add_marker(pytest.mark.xdist_group(marker))


@pytest.fixture(autouse=True)
def _dev_null_intact() -> Iterator[None]:
    """A test that leaves /dev/null other than the null device fails (and /dev/null is made again): a full
    run of the suite once left a regular file there, which broke every later PostgreSQL start."""
    yield
    if not stat.S_ISCHR(os.lstat("/dev/null").st_mode):
        if os.geteuid() == 0:  # made aside and renamed over it: /dev/null is never missing meanwhile
            made = f"/dev/null.iolab-{os.getpid()}"
            os.mknod(made, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            os.chmod(made, 0o666)
            os.replace(made, "/dev/null")
        pytest.fail("this test left /dev/null as something other than the null device (made again)")


@pytest.fixture(autouse=True)
def _tier(request: pytest.FixtureRequest) -> None:
    """The fast tier's tests run with ``fake_fio`` and ``no_fio``, a state directory of their own, and no
    CPU latency device (``run.tuning.PM_QOS`` names a missing file): they never hold this machine's."""
    if tier_of(request.path) in FAST:
        request.getfixturevalue("fake_fio")
        request.getfixturevalue("no_fio")
        from iolab.run import tuning
        request.getfixturevalue("monkeypatch").setattr(
            tuning, "PM_QOS", str(request.getfixturevalue("tmp_path") / "no-cpu_dma_latency"))


@pytest.fixture
def fake_fio(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeFio]:
    """fio replayed from the recordings of this test file (``tests/support/fakefio.py``); iolab's state
    (spool, marks, tuning journal) in ``tmp_path/state``."""
    from iolab.run import plan
    plan._verdict.cache_clear()  # fio's verdicts are the recordings' (each test file has its own)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    module = str(request.path.resolve().relative_to(TESTS).with_suffix(""))
    roots = {str(tmp_path): "@TMP@", str(tmp_path_factory.getbasetemp()): "@BASE@"}
    fake = FakeFio(module, roots).install(monkeypatch)
    yield fake
    fake.finish()


@pytest.fixture
def no_fio(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A ``fio`` first on PATH that notes each call and fails; the test fails if it was called.
    (Recording, ``IOLAB_RECORD=1``, runs real fio.)"""
    if RECORD:
        yield
        return
    log = tmp_path / "fio-calls.log"
    monkeypatch.setenv("PATH", f"{NOFIO}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("IOLAB_NOFIO_LOG", str(log))
    yield
    assert not log.exists(), f"a test of the fast tier started fio:\n{log.read_text()}"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg.PostgresServer]:
    """The test run's PostgreSQL server (tests marked ``postgres`` share an xdist group, so one worker
    starts it); a test that stops or restarts it leaves it running again."""
    if not pg.pg_bin():
        pytest.skip("PostgreSQL server binaries are not installed (Debian package postgresql)")
    server = pg.start()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(pg_server: pg.PostgresServer) -> Iterator[str]:
    """A database of its own on the run's server for this test: its SQLAlchemy URL (dropped after)."""
    with pg_server.database() as url:
        yield url


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and os.environ.get("IOLAB_TEST_REQUIRE_ALL") == "1":
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

    def cpuidle(self, cpus: Sequence[int], states: Sequence[tuple[str, int, int]], *, driver: str = "intel_idle",
                governor: str = "menu", disabled: Sequence[int] = (), read_only_governor: bool = True) -> None:
        """cpuidle as the kernel lays it out (``Documentation/admin-guide/pm/cpuidle.rst``): each CPU's
        ``cpuidle/stateK/{name,latency,residency,disable}`` from ``states`` (name, exit latency µs,
        target residency µs; ``disabled`` lists the K that are), and ``cpuidle/current_driver`` and
        ``current_governor_ro`` (``current_governor`` when not ``read_only_governor``)."""
        cpu_dir = self.root / "devices" / "system" / "cpu"
        for cpu in cpus:
            for k, (name, latency, residency) in enumerate(states):
                self._write(cpu_dir / f"cpu{cpu}" / "cpuidle" / f"state{k}",
                            {"name": name, "latency": str(latency), "residency": str(residency),
                             "disable": "1" if k in disabled else "0", "desc": name})
        key = "current_governor_ro" if read_only_governor else "current_governor"
        self._write(cpu_dir / "cpuidle", {"current_driver": driver, key: governor})

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
    """A real fio sweep in bench-fio's layout (tests/support/benchfio.py), run once per session: the
    directory of its outputs and logs; the data file lies beside it."""
    import benchfio

    root = tmp_path_factory.mktemp("sweep")
    benchfio.sweep(root / "ssd", root / "data.bin")
    return root / "ssd"


@pytest.fixture
def fake_sysfs(tmp_path: Path) -> FakeSysfs:
    """An empty fake sysfs root under ``tmp_path/sys``; pass ``str(fake_sysfs.root)`` as ``sysfs=``."""
    return FakeSysfs(tmp_path / "sys")

