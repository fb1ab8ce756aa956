"""fio's own reader of verify-state files (``fio-verify-state``) against iolab's (``fio.verify``), on a
state file fio 3.33 wrote (``tests/data/fio/not-output``). iolab's reading alone: tests/unit/fio/test_verify.py."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from iolab.fio import verify
from paths import FIO

STATE = FIO / "not-output" / "local-pc-0-verify.state"  # fio 3.33, a 4k randwrite cut by --trigger-timeout


@pytest.mark.skipif(shutil.which("fio-verify-state") is None, reason="fio-verify-state (fio's tools) is not installed")
def test_fio_verify_state_prints_what_iolab_reads() -> None:
    state = verify.parse_state(STATE.read_bytes(), STATE.name)
    dump = subprocess.run(["fio-verify-state", str(STATE)], capture_output=True, text=True, check=True).stdout
    assert "Number IOs:\t4961" in dump and all(f"(file= 0) {o}" in dump for _, o in state.completions)
    assert len(state.completions) == 8
