"""`iolab import DIR` of a sweep real fio runs during the test, laid out as bench-fio lays it out
(conftest's ``sweep_dir``, tests/support/benchfio.py): one run, each log where it belongs. The other
import-sweep tests run on a recorded sweep (tests/cli/test_import_sweep.py)."""

from __future__ import annotations

from clirun import iolab
from importchecks import check_sweep_import


def test_a_real_sweep_directory_is_one_run_with_each_log_where_it_belongs(sweep_dir, tmp_path):
    db = tmp_path / "iolab.db"
    proc = iolab("import", str(sweep_dir), "--label", "ssd", db=db)
    check_sweep_import(proc, db, sweep_dir)
