"""Host facts that need a program run: systemd-detect-virt (this machine's, and a script's answers),
fio --version (real fio, a failing one, a missing one). What is read from files is
tests/unit/facts/test_host.py's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from iolab.facts.host import _combine_virt, fio_version, virtualization


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

def test_virtualization_with_a_detect_virt_script(tmp_path: Path) -> None:
    script = tmp_path / "detect"
    script.write_text('#!/bin/sh\nif [ "$1" = --vm ]; then echo kvm; exit 0; fi\necho none; exit 1\n')
    script.chmod(0o755)
    assert virtualization(root=str(tmp_path), detect_virt=str(script)) == "kvm"
