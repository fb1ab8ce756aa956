"""A crash test's random sequences as real fio draws them: each cut's options write their own
offsets, and the same cut's options draw them again (its verify phase depends on it). The rules
around them are tests/unit/workflows/test_crash_rules.py's."""

from __future__ import annotations

import subprocess
from pathlib import Path

from iolab.workflows import crashtest


def _offsets(options: dict[str, str], tmp_path: Path, name: str) -> list[str]:
    """The offsets fio (real) writes with ``options``: its own iolog of the first 32 I/Os."""
    log = tmp_path / f"{name}.iolog"
    args = [f"--{k}={v}" for k, v in options.items() if k not in ("verify_only", "verify_state_load", "thread",
                                                                    "continue_on_error", "verify_state_save")]
    subprocess.run(["fio", "--name=crash", f"--filename={tmp_path / 'data'}", "--size=16m", "--number_ios=32",
                    f"--write_iolog={log}", "--ioengine=psync", "--direct=0", f"--output={tmp_path / (name + '.out')}",
                    *[a for a in args if not a.startswith(("--ioengine", "--direct", "--iodepth"))]], check=True,
                   cwd=tmp_path)
    return [line.split()[3] for line in log.read_text().splitlines() if " write " in line]


def test_each_cut_writes_a_different_random_sequence_and_its_verify_the_same(tmp_path: Path):
    """fio's default randrepeat=1 fixes the offsets whatever randseed says: cuts 1 and 2 had verified the
    same offsets. Each cut's options draw their own sequence; the same cut draws it again."""
    options = dict(crashtest.DEFAULT_OPTIONS)
    first, second = (_offsets(crashtest.write_options(options, cut), tmp_path, f"w{cut}") for cut in (1, 2))
    assert len(first) == len(second) == 32 and first != second
    assert _offsets(crashtest.write_options(options, 1), tmp_path, "again") == first
