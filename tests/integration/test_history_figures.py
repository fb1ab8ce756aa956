"""A history shown again runs no change-point detection until its data change, and imports none of the
detection's libraries: ``iolab history`` in a fresh process (what a process has imported is the point;
the rest of history's figures: tests/cli/test_history_figures.py)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import historydata
from clirun import iolab

T0 = 1_780_000_000


@pytest.fixture(scope="module")
def base() -> dict:
    return historydata.recorded_output()


@pytest.fixture()
def nightly(base, tmp_path) -> Path:
    """30 outputs a day apart, imported: ``steady`` and ``slows`` (20 % fewer I/Os from run 15)."""
    docs = [historydata.output(base, {"steady": (1 + 0.02 * (i % 3), {}),
                                      "slows": ((1 + 0.02 * (i % 3)) * (0.8 if i >= 15 else 1), {})}, T0 + i * 86_400)
            for i in range(30)]
    done = iolab("import", *map(str, historydata.write_runs(tmp_path / "out", docs)), db=tmp_path / "h.db")
    assert done.returncode == 0, done.stderr
    return tmp_path / "h.db"


#: ``iolab history`` with the change-point detection replaced by a failure: it succeeds only when no
#: series needs detecting; then says which of the detection's libraries it imported.
NO_DETECTION = textwrap.dedent("""
    import sys
    from iolab.analyze import changepoints

    def refuse(*args, **kwargs):
        raise RuntimeError("the detection ran")

    changepoints.detect = refuse
    from iolab.cli import main
    sys.argv = ["iolab", "history", "--format", "json"]
    try:
        main()
    finally:
        print(sorted(m for m in ("numpy", "scipy", "ruptures") if m in sys.modules), file=sys.stderr)
""")


def no_detection(db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", NO_DETECTION], env={**os.environ, "IOLAB_DB": str(db)},
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_history_shown_again_runs_no_detection_until_its_data_change(nightly, base, tmp_path):
    first = iolab("history", "--format", "json", db=nightly)
    assert first.returncode == 0, first.stderr
    with sqlite3.connect(nightly) as conn:
        kept = conn.execute("SELECT count(*) FROM change_points").fetchone()[0]
    assert kept == len(json.loads(first.stdout)["series"])  # every series' content differs
    again = no_detection(nightly)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == first.stdout.strip()  # the same change points, segments and p-values
    assert again.stderr.strip().splitlines()[-1] == "[]"  # neither numpy, scipy nor ruptures imported
    (path,) = historydata.write_runs(tmp_path / "more", [historydata.output(base, {"steady": (1.0, {})},
                                                                             T0 + 40 * 86_400)])
    assert iolab("import", str(path), db=nightly).returncode == 0
    changed = no_detection(nightly)  # steady has a new point: its series are detected again
    assert changed.returncode != 0 and "the detection ran" in changed.stderr
