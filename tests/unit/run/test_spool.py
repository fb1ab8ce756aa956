"""The spool's sealed result in a work directory that fio and what its job runs (``exec_prerun`` with
``--allow-exec``) can write: a name planted there is never followed (issue 42, item 2). On the code
before issue 42, ``seal`` wrote ``result.json.part`` by name and truncated the file a link there led to."""

from __future__ import annotations

import hashlib
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from iolab.outputs import OutputError
from iolab.run.spool import SEALED, JobEnd, Spool

VICTIM = b"a user's file, outside the spool\n" * 32


@pytest.fixture
def spool(tmp_path: Path) -> Spool:
    return Spool("sqlite:///iolab.db", 7, datetime(2026, 12, 2, tzinfo=UTC), root=tmp_path / "spool")


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim"
    path.write_bytes(VICTIM)
    return path


def _unchanged(victim: Path) -> bool:
    return hashlib.sha256(victim.read_bytes()).digest() == hashlib.sha256(VICTIM).digest()


def test_a_link_planted_at_the_old_partial_name_is_not_followed(spool, victim):
    workdir = spool.workdir(1)
    (workdir / f"{SEALED}.part").symlink_to(victim)  # what a program run by the job can leave behind
    spool.seal(1, JobEnd("ok"))
    assert _unchanged(victim)
    sealed = workdir / SEALED
    assert stat.S_ISREG(sealed.lstat().st_mode) and stat.S_IMODE(sealed.stat().st_mode) == 0o600
    [(result_id, end)] = spool.sealed()
    assert result_id == 1 and end is not None and end.status == "ok"
    assert sorted(p.name for p in workdir.iterdir()) == [SEALED, f"{SEALED}.part"]  # no temporary file left


def test_a_link_planted_at_the_sealed_name_is_refused_and_not_read(spool, victim):
    workdir = spool.workdir(2)
    (workdir / SEALED).symlink_to(victim)
    with pytest.raises(OutputError, match=f"refusing to write the spooled result at {workdir / SEALED}: it is a "
                                          "symbolic link"):
        spool.seal(2, JobEnd("ok"))
    assert _unchanged(victim) and (workdir / SEALED).is_symlink()
    assert spool.sealed() == [(2, None)]  # what the link leads to is not read as a result


def test_a_fifo_at_the_sealed_name_is_neither_written_nor_waited_on(spool):
    workdir = spool.workdir(3)
    os.mkfifo(workdir / SEALED)
    with pytest.raises(OutputError, match=r"it is a FIFO \(named pipe\), not a regular file"):
        spool.seal(3, JobEnd("ok"))
    assert spool.sealed() == [(3, None)]  # opened without waiting for a writer, and left alone
