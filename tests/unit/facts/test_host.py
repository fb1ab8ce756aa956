"""host_facts on this machine and on fixture trees; virtualization from a tree's files; cpu list
helpers. What needs a program run (systemd-detect-virt, fio --version) is
tests/integration/test_host.py's: here systemd-detect-virt is never started."""

from __future__ import annotations

import os
import platform
import socket
import struct
from pathlib import Path

import pytest

from iolab.facts import host, idle
from iolab.facts.host import host_facts, virtualization
from iolab.facts.sysfs import format_cpu_list, parse_cpu_list
from iolab.model import IdleState

NO_DETECT_VIRT = "/nonexistent/systemd-detect-virt"


@pytest.fixture(autouse=True)
def no_detect_virt(monkeypatch: pytest.MonkeyPatch) -> None:
    """systemd-detect-virt as if it were not installed (what a missing one answers), so that no test
    here starts a program; the trees' own files decide."""
    monkeypatch.setattr(host, "_detect_virt", lambda command, flag: None)


def test_host_facts_on_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    # this machine's virtualisation is systemd-detect-virt's (tests/integration/test_host.py); left out
    # here, so that the process-wide cache of it holds only what the program said
    monkeypatch.setattr(host, "virtualization", lambda root="/": None)
    facts = host_facts("3.33")
    assert facts.hostname == socket.gethostname()
    assert facts.kernel is not None and facts.kernel.startswith(platform.release())
    assert platform.version() in facts.kernel
    assert facts.cpu_count == os.cpu_count()
    with open("/proc/meminfo") as f:
        mem_kib = int(next(line for line in f if line.startswith("MemTotal:")).split()[1])
    assert facts.memory_bytes == mem_kib * 1024 and facts.memory_bytes > 0
    assert facts.fio_version == "3.33"
    if os.path.exists("/etc/os-release"):
        assert facts.distribution
        assert facts.distribution in Path("/etc/os-release").read_text()
    if os.path.exists("/proc/cpuinfo") and "model name" in Path("/proc/cpuinfo").read_text():
        assert facts.cpu_model
    governor = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    assert facts.cpu_governor == (governor.read_text().strip() if governor.exists() else None)
    cpuidle = Path("/sys/devices/system/cpu/cpuidle")
    assert facts.cpuidle_driver == ((cpuidle / "current_driver").read_text().strip()
                                    if (cpuidle / "current_driver").exists() else None)
    states = sorted(Path("/sys/devices/system/cpu/cpu0/cpuidle").glob("state*"), key=lambda p: int(p.name[5:]))
    assert [(s.name, s.exit_latency_us) for s in facts.idle_states or ()] == [
        ((d / "name").read_text().strip(), int((d / "latency").read_text())) for d in states]
    if os.geteuid() == 0 and os.path.exists("/dev/cpu_dma_latency"):
        assert facts.cpu_dma_latency_us is not None and facts.cpu_dma_latency_us >= 0


# --- fixture trees ---------------------------------------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


ARM_CPUINFO = """\
processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm
CPU implementer\t: 0x41

processor\t: 1
BogoMIPS\t: 50.00
Model\t: Raspberry Pi 4 Model B Rev 1.4
"""


def test_host_facts_from_fixture_tree(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "proc/cpuinfo": ARM_CPUINFO,
        "proc/meminfo": "MemTotal:        3884096 kB\nMemFree:  100 kB\n",
        "sys/devices/system/cpu/online": "0-3,6\n",
        "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "ondemand\n",
        "etc/os-release": 'NAME="X"\nPRETTY_NAME="Raspbian GNU/Linux 11 (bullseye)"\n',
    })
    facts = host_facts(root=str(root))
    assert facts.cpu_model == "Raspberry Pi 4 Model B Rev 1.4"
    assert facts.cpu_count == 5
    assert facts.memory_bytes == 3884096 * 1024
    assert facts.cpu_governor == "ondemand"
    assert facts.distribution == "Raspbian GNU/Linux 11 (bullseye)"
    assert facts.fio_version is None


def test_host_facts_empty_tree_gives_unknowns_not_exceptions(tmp_path: Path) -> None:
    facts = host_facts(root=str(tmp_path))
    assert (facts.cpu_model, facts.cpu_count, facts.memory_bytes) == (None, None, None)
    assert (facts.distribution, facts.cpu_governor) == (None, None)
    assert facts.hostname and facts.kernel  # from uname(2), not from the tree


def test_host_facts_malformed_files(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "proc/meminfo": "MemTotal: lots\n",
        "sys/devices/system/cpu/online": "garbage\n",
        "proc/cpuinfo": "processor : 0\nprocessor : 1\nmodel name :   Some   CPU  \n",
        "usr/lib/os-release": "PRETTY_NAME='Unterminated\n",
    })
    facts = host_facts(root=str(root))
    assert facts.memory_bytes is None
    assert facts.cpu_count == 2  # falls back to processor lines
    assert facts.cpu_model == "Some CPU"
    assert facts.distribution == "Unterminated"


# --- CPU idle states ---------------------------------------------------------------------------------


def test_idle_states_and_latency_limit_from_a_fake_tree(tmp_path: Path, fake_sysfs) -> None:
    """cpuidle as the kernel lays it out (the fixture's tree under ``tmp_path/sys``) and a CPU latency
    limit as the kernel reads it out: a native 32-bit integer."""
    fake_sysfs.cpus("0-1")
    fake_sysfs.cpuidle([0, 1], [("POLL", 0, 0), ("C1", 2, 2), ("C1E", 10, 20), ("C6", 133, 600)],
                       driver="intel_idle", governor="menu", disabled=[3])
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/cpu_dma_latency").write_bytes(struct.pack("=i", 2_000_000_000))
    facts = host_facts(root=str(tmp_path))
    assert (facts.cpuidle_driver, facts.cpuidle_governor) == ("intel_idle", "menu")
    assert facts.idle_states == (IdleState("POLL", 0, 0), IdleState("C1", 2, 2), IdleState("C1E", 10, 20),
                                 IdleState("C6", 133, 600, disabled=True))
    assert facts.cpu_dma_latency_us == idle.NO_LIMIT_US
    assert idle.describe_states(facts.idle_states) == ("POLL (exit 0 µs, residency 0 µs), C1 (exit 2 µs, residency "
                                                       "2 µs), C1E (exit 10 µs, residency 20 µs), C6 (exit 133 µs, "
                                                       "residency 600 µs, disabled)")
    assert idle.describe_limit(facts.cpu_dma_latency_us) == "none held (2000000000 µs)"
    # what an idle CPU may still enter: not POLL (no exit latency), not the disabled C6, not above a limit
    assert [s.name for s in idle.exits(facts.idle_states, None)] == ["C1", "C1E"]
    assert [s.name for s in idle.exits(facts.idle_states, 5)] == ["C1"]
    assert idle.exits(facts.idle_states, 0) == ()
    (tmp_path / "dev/cpu_dma_latency").write_bytes(struct.pack("=i", 0))
    assert idle.latency_limit_us(str(tmp_path)) == 0 and idle.describe_limit(0) == "0 µs"


def test_idle_facts_of_a_kvm_guest_with_a_writable_governor(tmp_path: Path, fake_sysfs) -> None:
    """This machine's layout: the haltpoll driver and governor, ``current_governor`` where switching is
    allowed; a short read of the latency device is unknown, as is a missing one."""
    fake_sysfs.cpuidle([0], [("POLL", 0, 0), ("haltpoll idle", 1, 1)], driver="haltpoll", governor="haltpoll",
                       read_only_governor=False)
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/cpu_dma_latency").write_bytes(b"\0\0")
    facts = host_facts(root=str(tmp_path))
    assert (facts.cpuidle_driver, facts.cpuidle_governor) == ("haltpoll", "haltpoll")
    assert [s.name for s in idle.exits(facts.idle_states, None)] == ["haltpoll idle"]
    assert facts.cpu_dma_latency_us is None


def test_no_cpuidle_is_unknown(tmp_path: Path) -> None:
    facts = host_facts(root=str(tmp_path))
    assert (facts.cpuidle_driver, facts.cpuidle_governor, facts.idle_states, facts.cpu_dma_latency_us) == (
        None, None, None, None)
    assert idle.describe_states(None) is None and idle.describe_states(()) == "none"


X86_FLAGS = "processor : 0\nmodel name : Xeon\nflags : fpu vme sse2 {extra}\n"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"sys/class/dmi/id/sys_vendor": "QEMU", "sys/class/dmi/id/product_name": "Standard PC"}, "qemu"),
        ({"sys/class/dmi/id/sys_vendor": "Microsoft Corporation",
          "sys/class/dmi/id/product_name": "Virtual Machine"}, "microsoft"),
        ({"sys/class/dmi/id/sys_vendor": "Amazon EC2"}, "amazon"),
        ({"proc/cpuinfo": X86_FLAGS.format(extra="hypervisor")}, "vm-other"),
        ({"proc/cpuinfo": X86_FLAGS.format(extra=""), "sys/class/dmi/id/sys_vendor": "Dell Inc."}, "none"),
        ({"proc/cpuinfo": X86_FLAGS.format(extra="hypervisor"), ".dockerenv": ""}, "docker on vm-other"),
        ({"proc/cpuinfo": X86_FLAGS.format(extra=""), "run/systemd/container": "lxc\n"}, "lxc"),
        ({"proc/cpuinfo": ARM_CPUINFO}, None),
        ({}, None),
    ],
)
def test_virtualization_fallbacks(tmp_path: Path, files: dict[str, str], expected: str | None) -> None:
    root = _tree(tmp_path, files)
    assert virtualization(root=str(root), detect_virt=NO_DETECT_VIRT) == expected


# --- cpu lists -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cpus", "compact"),
    [
        ("0-3", (0, 1, 2, 3), "0-3"),
        ("0, 1", (0, 1), "0-1"),
        ("0-2,5,7-8\n", (0, 1, 2, 5, 7, 8), "0-2,5,7-8"),
        ("4", (4,), "4"),
        ("", (), ""),
        ("3, 1, 2", (1, 2, 3), "1-3"),
    ],
)
def test_cpu_lists(text: str, cpus: tuple[int, ...], compact: str) -> None:
    assert parse_cpu_list(text) == cpus
    assert format_cpu_list(cpus) == compact


def test_parse_cpu_list_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        parse_cpu_list("zero")
