"""The fence as built from a checked plan (``runner.fence.build``), in-process: which places are
writable and why, which entries beside a new file stay read-only, which devices are bound to be read
only, and the refusal of a directory too full to protect entry by entry. What the kernel then
enforces inside it, with bubblewrap and real fio: tests/integration/test_fence.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from iolab.errors import SafetyError
from iolab.runner import fence


def test_where_fio_creates_a_file_the_existing_entries_are_bound_read_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "sub").mkdir(parents=True)
    (home / "notes.txt").write_text("mine\n")
    (home / "sub" / "deep.txt").write_text("deep\n")
    (home / "sub" / "planned.dat").write_text("planned\n")
    (home / "link").symlink_to(home / "notes.txt")
    work = tmp_path / "work"
    work.mkdir()
    f = fence.build({str(home / "scratch.dat"): fence.NEW, str(home / "sub" / "planned.dat"): fence.IOLAB}, work)
    assert f.writable == (str(home),) and f.creating == (str(home),)
    assert f.protected == (str(home / "notes.txt"), str(home / "sub" / "deep.txt"))  # links are left
    assert f.places() == [f"{home}/scratch.dat (new)", f"{home}/sub/planned.dat (iolab's)",
                          f"{home} (new files only: its existing entries are read-only)"]
    assert not f.allows(str(home / "notes.txt")) and f.allows(str(home / "scratch.dat"))
    assert f.allows(str(home / "sub" / "planned.dat")) and not f.allows(str(home / "sub" / "deep.txt"))
    assert f.record() == {"devices": [], "writable": [str(home)], "read_only_entries": 2}


def test_a_device_a_job_only_reads_is_bound_but_not_writable(tmp_path: Path) -> None:
    """/dev/zero stands for a device the plan reads (a character device, as a block device is bound)."""
    work = tmp_path / "work"
    work.mkdir()
    f = fence.build({}, work, read=["/dev/zero"])
    assert f.devices == ("/dev/zero",) and f.write_devices == ()
    assert f.describe() == [f"{work} (iolab's work directory)"]
    assert f.record() == {"read_devices": ["/dev/zero"], "writable": []}
    assert not f.allows("/dev/zero") and f.allows(str(work / "fio-output.json"))
    named = fence.build({"/dev/zero": fence.DESTROY}, work)
    assert named.devices == named.write_devices == ("/dev/zero",) and named.allows("/dev/zero")
    assert named.places() == ["/dev/zero (--destroy)"]


def test_a_file_and_a_directory_target(tmp_path: Path) -> None:
    """A new scratch file's job and a directory target's job (fio creates its files there): the nearest
    existing directory, or the target directory, is writable for new files only, its other entries
    read-only; nothing under /dev is made writable for a missing device name."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "notes.txt").write_text("mine\n")
    work = tmp_path / "work"
    work.mkdir()
    file = fence.build({str(tmp_path / "new.bin"): fence.NEW}, work)
    assert file.writable == (str(tmp_path),) and file.creating == (str(tmp_path),)
    assert file.protected == (str(tmp_path / "dir"),)  # the work directory is bound writable after
    assert file.allows(str(tmp_path / "new.bin")) and not file.allows(str(tmp_path / "dir" / "notes.txt"))
    directory = fence.build({str(tmp_path / "dir"): fence.NEW}, work)
    assert directory.writable == directory.creating == (str(tmp_path / "dir"),)
    assert directory.protected == (str(tmp_path / "dir" / "notes.txt"),)
    assert directory.places() == [f"{tmp_path}/dir (new files only: its existing entries are read-only)"]
    assert directory.allows(str(tmp_path / "dir" / "j.0.0"))
    absent = fence.build({"/dev/iolab-absent": fence.NEW}, work)
    assert absent.writable == () and not absent.allows("/dev/iolab-absent")


def test_a_directory_fuller_than_the_fence_binds_one_by_one_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for i in range(fence.MAX_PROTECTED + 1):
        (home / f"f{i}").touch()
    with pytest.raises(SafetyError, match=f"fio would create a file in {home}, which holds more than "
                                          f"{fence.MAX_PROTECTED} entries"):
        fence.build({str(home / "new.dat"): fence.NEW}, tmp_path / "work")


def test_landlocks_launcher_stays_visible_under_a_staged_directory(monkeypatch, tmp_path):
    """A directory of iolab's bound over the scratch file's directory hides what lives there: the launcher
    runs as the interpreter's real path with the script as text, and a Python installed under the staged
    directory (pyenv in ~) is bound back read-only after it (a run from ~ had failed every job:
    ``bwrap: execvp …/python: No such file or directory``)."""
    monkeypatch.setattr(fence, "status", lambda bwrap="bwrap": fence.Status("bubblewrap 0.8.0", landlock=3))
    home = str(Path(fence.os.path.realpath(fence.sys.base_prefix)).parent)
    args = list(fence.Fence(tmp_path / "work", fd_binds=((7, home),)).argv(["fio", "job.fio"]))
    staged, back = args.index("--bind-fd"), args.index(fence.os.path.realpath(fence.sys.base_prefix))
    assert args[staged + 2] == home and args[back - 1] == "--ro-bind" and staged < back
    launcher = args.index("-c") - 3
    assert args[launcher] == fence.os.path.realpath(fence.sys.executable) and "landlock" in args[launcher + 4]
    elsewhere = list(fence.Fence(tmp_path / "work", fd_binds=((7, str(tmp_path)),)).argv(["fio"]))
    assert fence.os.path.realpath(fence.sys.base_prefix) not in elsewhere
