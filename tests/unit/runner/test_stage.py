"""``runner.stage`` without fio: new names reserved ``O_EXCL``, an existing file exchanged into iolab's
own directory and put back, and what a killed iolab left staged undone by the next one (``sweep``).
With real fio in the fence: tests/integration/test_guard_names.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iolab.errors import SafetyError
from iolab.runner import fence, marks, stage


@pytest.fixture(autouse=True)
def _own_state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def _identity(path: Path) -> stage.Identity:
    return stage.identity(path.stat())


def test_an_existing_file_is_staged_and_put_back_with_its_mark(tmp_path: Path) -> None:
    data = tmp_path / "d" / "small.bin"
    data.parent.mkdir()
    data.write_bytes(b"x" * 4096)
    (tmp_path / "d" / "theirs.txt").write_text("mine\n")
    staging = stage.prepare({str(data): fence.IOLAB, str(tmp_path / "d" / "new.bin"): fence.NEW},
                            {str(data): _identity(data)}, relaid={str(data)}, workdir=tmp_path / "work",
                            run="r1", owner={"pid": os.getpid()})
    (view,) = staging.views
    seen = sorted(os.listdir(f"/proc/self/fd/{view.stage_fd}"))
    assert seen == ["small.bin"]  # what fio sees there: the planned existing file, nothing else of the directory
    assert data.stat().st_size == 0 and (tmp_path / "d" / "new.bin").stat().st_size == 0  # iolab's reservations
    assert staging.finish(ran=True) == []
    assert data.read_bytes() == b"x" * 4096 and marks.is_iolab(str(data))
    assert not (tmp_path / "d" / "new.bin").exists()  # fio never made it: its reservation removed
    assert sorted(os.listdir(tmp_path / "d")) == ["small.bin", "theirs.txt"]


def test_what_a_killed_iolab_left_staged_is_put_back(tmp_path: Path) -> None:
    data = tmp_path / "small.bin"
    data.write_bytes(b"y" * 4096)
    staging = stage.prepare({str(data): fence.IOLAB, str(tmp_path / "new.bin"): fence.NEW},
                            {str(data): _identity(data)}, relaid={str(data)}, workdir=tmp_path / "work",
                            run="r1", owner={"pid": os.getpid()})
    os.close(staging._journal_fd)  # the process is gone: its lock on the journal with it, nothing finished
    assert data.stat().st_size == 0  # the name holds iolab's reservation, the file is in iolab's directory
    assert len(stage.sweep()) == 1
    assert data.read_bytes() == b"y" * 4096
    assert sorted(os.listdir(tmp_path)) == ["small.bin", "state"]  # reservation and staged directory removed


def test_a_name_that_is_not_the_inode_checked_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    data = tmp_path / "laid.bin"
    data.write_bytes(b"z" * 4096)
    checked = _identity(data)
    data.unlink()
    data.write_bytes(b"someone else's")  # replaced since the check
    with pytest.raises(SafetyError, match="is not the file the guard checked any more"):
        stage.prepare({str(data): fence.IOLAB}, {str(data): checked}, relaid={str(data)}, workdir=tmp_path / "w",
                      run="r1", owner={})
    assert data.read_bytes() == b"someone else's" and sorted(os.listdir(tmp_path)) == ["laid.bin", "state"]
