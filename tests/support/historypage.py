"""The history page (``iolab report --history``) of 30 imported runs, for the tests that read it (its HTML,
and in real browsers): ``steady``, and ``slows`` 12 % slower from run 20 where fio's version changed and
the runs carry a tag with a hostile value (``EVIL``)."""

from __future__ import annotations

import random
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import historydata

EVIL = "<img src=x onerror=alert(1)>"
DAY = 86_400


def make(tmp: Path, iolab: Callable[..., subprocess.CompletedProcess[str]]) -> Path:
    """The page, written in ``tmp`` by ``iolab`` (``inprocess.iolab`` or ``clirun.iolab``) from the
    recorded real fio output (``historydata.recorded_output``); its path."""
    base: dict[str, Any] = historydata.recorded_output()
    rng = random.Random(3)
    docs = [historydata.output(base, {"steady": (rng.gauss(1, 0.02), {}),
                                      "slows": (rng.gauss(1, 0.02) * (0.88 if i >= 20 else 1), {})},
                               1_780_000_000 + i * DAY, "fio-3.36" if i >= 20 else None) for i in range(30)]
    paths = historydata.write_runs(tmp / "out", docs)
    db = tmp / "h.db"
    first = iolab("import", *map(str, paths[:20]), db=db)
    assert first.returncode == 0, first.stderr
    done = iolab("import", *map(str, paths[20:]), "--tag", f"kernel={EVIL}", db=db)
    assert done.returncode == 0, done.stderr
    out = tmp / "history.html"
    made = iolab("report", "--history", "--metric", "iops,clat_p99", "-o", str(out), db=db)
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith(f"{out}  (HTML, 4 charts)")
    return out
