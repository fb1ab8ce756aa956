"""``--db`` before or after the command name, on every command that opens the database; an SQLite path
that cannot be opened gets an SQLite hint (the directory, its permissions), not a server's. In-process,
real SQLite: the recorded loop-device history (``historydata.LOOP_RUNS``)."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

import historydata
from inprocess import iolab
from paths import FIO

SAMPLE = FIO / "fio-3.33_randrw_libaio.json"


@pytest.fixture
def runs(tmp_path) -> Path:
    db = tmp_path / "iolab.db"
    db.write_bytes(lzma.decompress(historydata.LOOP_RUNS.read_bytes()))
    return db


@pytest.mark.parametrize("args", [["runs"], ["show", "3"], ["compare", "1", "9"], ["history"], ["gate", "8"],
                                  ["report", "1", "-o", "{tmp}/r.html"], ["accept", "9", "--reason", "new disk"]])
def test_db_after_the_command_name_is_the_database_it_reads(runs, tmp_path, args):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    unused = tmp_path / "unused.db"  # $IOLAB_DB: neither read nor created
    after = iolab(*args, "--db", str(runs), db=unused)
    before = iolab("--db", str(runs), *args, db=unused)
    assert after.returncode == before.returncode == 0, (after.stderr, before.stderr)
    assert after.stdout == before.stdout or args[0] in ("report", "accept")
    assert not unused.exists()


def test_import_takes_db_after_its_name(tmp_path):
    db = tmp_path / "x" / "iolab.db"
    proc = iolab("import", str(SAMPLE), "--db", str(db), db=tmp_path / "unused.db")
    assert proc.returncode == 0, proc.stderr
    assert db.is_file() and not (tmp_path / "unused.db").exists()


def test_an_sqlite_path_that_cannot_be_opened_gets_an_sqlite_hint(tmp_path):
    """A path SQLite cannot open gets a hint about the path (exit 1), never "check that the database server
    is running"; a directory, or a path under /proc, is refused before SQLite sees it (exit 2: iolab's own
    files, ``outputs``)."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = iolab("import", str(SAMPLE), "--db", str(blocker / "x.db"), db=None)
    assert proc.returncode == 1, proc
    assert f"Hint: {blocker} is not a directory" in proc.stderr and "server" not in proc.stderr, proc.stderr
    refused = {tmp_path: "it is a directory, not a database file",
               Path("/proc/iolab-none/x.db"): "its directory would be made under /proc",
               Path("/proc/x.db"): "it is under /proc"}
    for path, why in refused.items():
        proc = iolab("import", str(SAMPLE), "--db", str(path), db=None)
        assert proc.returncode == 2, proc
        assert f"refusing to write the results database at {path}: {why}" in proc.stderr, proc.stderr
        assert "server" not in proc.stderr and "internal" not in proc.stderr, proc.stderr
