"""History's figures (``result_figures``) on PostgreSQL: an older database (migration 0006) gets the figures
of its results on upgrade (SQLite: tests/cli/test_history_figures.py)."""

from __future__ import annotations

import pytest

import historydata
from clirun import iolab
from figuresdata import downgraded_to_0006, stored_figures
from iolab.store.database import Store

T0 = 1_780_000_000


@pytest.mark.postgres
def test_an_older_database_gets_the_figures_of_its_results_on_upgrade(tmp_path, postgres_url):
    paths = historydata.write_runs(tmp_path / "out", [historydata.output(
        historydata.recorded_output(), {"a": (1.0, {}), "b": (0.5, {"iodepth": "4"})}, T0 + i * 86_400)
        for i in range(3)])
    done = iolab("import", *map(str, paths), db=tmp_path / "unused.db", env={"IOLAB_DB": postgres_url})
    assert done.returncode == 0, done.stderr
    store = Store(postgres_url)
    written = stored_figures(store)
    assert len(written) == 3 and all(len(f["jobs"]) == 2 for f in written.values())
    downgraded_to_0006(store)  # no figures, no change points
    store.close()
    upgraded = Store(postgres_url)
    assert stored_figures(upgraded) == written
    upgraded.close()
