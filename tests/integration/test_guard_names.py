"""Issue 42's fence vectors with real fio: the files fio writes are the ones the guard checked,
staged in a directory of iolab's own (``runner.stage``), md5 before and after.

- an existing empty file, or a smaller file iolab laid out, named as target: fio lays it out anew
  (unlinks it and writes it again), inside the fence;
- a directory target holding 10,000 entries: fio creates its files there, every existing entry
  unchanged;
- a hard link to a user's file placed at a planned path between the guard's check and fio's start:
  refused, nothing written.

The same vectors with fio replayed, and the rest of the issue's name vectors: tests/cli/test_guard_names.py.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from clirun import iolab
from iolab.check import guard, plan_checks
from iolab.describe import suite
from iolab.errors import SafetyError
from iolab.run import execute
from iolab.run.plan import RunOptions, prepare
from iolab.runner import marks
from iolab.store.database import Store

MiB = 1024**2
READ = "workloads:\n  - {rw: randread, bs: 4k, size: 4m, runtime: 1s, time_based: 1}\n"


@pytest.fixture(autouse=True)
def _own_state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """iolab's state (staging journals, marks) in this test's directory, for iolab here and the one it starts."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _run(tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    return iolab("run", *args, "--no-observe", db=tmp_path / "db.sqlite", cwd=tmp_path)


def _suite(tmp_path: Path) -> str:
    (tmp_path / "s.yaml").write_text("targets: {}\n" + READ)
    return str(tmp_path / "s.yaml")


def test_an_empty_file_named_as_target_is_laid_out_inside_the_fence(tmp_path: Path) -> None:
    target = tmp_path / "empty.bin"
    target.touch()
    ran = _run(tmp_path, _suite(tmp_path), "--target", f"t={target}", "--keep-files")
    assert ran.returncode == 0, ran.stderr
    assert f"fio may write only: {target} (empty)" in " ".join(ran.stderr.split())
    assert target.stat().st_size == 4 * MiB and marks.is_iolab(str(target))
    assert not list(tmp_path.glob(".iolab-stage-*"))


def test_a_smaller_iolab_file_named_as_target_is_laid_out_again(tmp_path: Path) -> None:
    target = tmp_path / "small.bin"
    target.write_bytes(bytes(MiB))
    marks.mark(str(target))  # iolab laid it out for a 1 MiB job
    ran = _run(tmp_path, _suite(tmp_path), "--target", f"t={target}", "--keep-files")
    assert ran.returncode == 0, ran.stderr
    assert target.stat().st_size == 4 * MiB and marks.is_iolab(str(target))


def test_a_directory_target_with_10000_entries_gets_new_files_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for i in range(10_000):
        (home / f"note-{i}.txt").write_text(f"note {i}\n")
    (home / "big.bin").write_bytes(os.urandom(4 * MiB))
    kept = {p.name: (p.stat().st_mtime_ns, _md5(p)) for p in (home / "note-0.txt", home / "note-9999.txt",
                                                                home / "big.bin")}
    (tmp_path / "s.yaml").write_text("targets: {}\nworkloads:\n  - {rw: randwrite, bs: 4k, size: 4m, runtime: 1s, "
                                     "time_based: 1}\n")
    ran = _run(tmp_path, str(tmp_path / "s.yaml"), "--target", f"home={home}")
    assert ran.returncode == 0, ran.stderr
    assert f"{home} (new files only: its existing entries are read-only)" in " ".join(ran.stderr.split())
    assert {p.name: (p.stat().st_mtime_ns, _md5(p)) for p in (home / n for n in kept)} == kept
    names = os.listdir(home)
    assert len(names) == 10_001 and not [n for n in names if n.startswith(".iolab-stage-")]  # its file removed


def test_a_hard_link_placed_at_a_planned_path_after_the_check_is_refused(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    victim = tmp_path / "users.db"
    victim.write_bytes(os.urandom(MiB))
    before = _md5(victim)
    planned = tmp_path / "new.bin"
    (tmp_path / "j.fio").write_text(f"[j]\nfilename={planned}\nrw=write\nbs=64k\nsize=1m\n")
    checked = guard.check

    def check_then_link(*args, **kwargs):  # type: ignore[no-untyped-def]
        verdict = checked(*args, **kwargs)
        if args[3] != plan_checks.PLANNED_WORKDIR and not planned.exists():  # right before fio starts
            os.link(victim, planned)
        return verdict

    monkeypatch.setattr(guard, "check", check_then_link)
    options = RunOptions()
    plan = prepare(suite.load(str(tmp_path / "j.fio")), options)
    store = Store(f"sqlite:///{tmp_path}/db.sqlite")
    run_id = execute.start(store, plan, options)
    with pytest.raises(SafetyError, match=f"{planned} appeared after the guard checked it"):
        execute.execute(store, run_id, options)
    assert _md5(victim) == before and os.stat(victim).st_nlink == 2
    assert not list(tmp_path.glob(".iolab-stage-*"))
