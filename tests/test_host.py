"""host_facts on this machine and on fixture trees; fio_version; cpu list helpers."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from iolab.facts.host import _combine_virt, fio_version, host_facts, virtualization
from iolab.facts.sysfs import format_cpu_list, parse_cpu_list

NO_DETECT_VIRT = "/nonexistent/systemd-detect-virt"


def test_host_facts_on_this_machine() -> None:
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


@pytest.mark.skipif(shutil.which("systemd-detect-virt") is None, reason="systemd-detect-virt not installed")
def test_virtualization_agrees_with_systemd_detect_virt() -> None:
    def ask(flag: str) -> str:
        return subprocess.run(["systemd-detect-virt", flag], capture_output=True, text=True).stdout.strip()

    vm, container = ask("--vm"), ask("--container")
    got = virtualization()
    assert got == _combine_virt(vm, container)
    if vm != "none":
        assert got is not None and got.endswith(vm)
    if container != "none":
        assert got is not None and got.startswith(container)


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_fio_version_real() -> None:
    out = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    version = fio_version()
    assert version is not None and not version.startswith("fio-")
    assert out == f"fio-{version}"


def test_fio_version_missing_or_failing(tmp_path: Path) -> None:
    assert fio_version("/nonexistent/fio") is None
    failing = tmp_path / "fio"
    failing.write_text("#!/bin/sh\nexit 1\n")
    failing.chmod(0o755)
    assert fio_version(str(failing)) is None
    fake = tmp_path / "fio2"
    fake.write_text("#!/bin/sh\necho fio-3.36-12-gdeadbee\n")
    fake.chmod(0o755)
    assert fio_version(str(fake)) == "3.36-12-gdeadbee"


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


def test_virtualization_with_a_detect_virt_script(tmp_path: Path) -> None:
    script = tmp_path / "detect"
    script.write_text('#!/bin/sh\nif [ "$1" = --vm ]; then echo kvm; exit 0; fi\necho none; exit 1\n')
    script.chmod(0o755)
    assert virtualization(root=str(tmp_path), detect_virt=str(script)) == "kvm"


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
