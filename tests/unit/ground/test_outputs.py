"""``iolab.outputs``, the one way iolab writes a file of its own (issue 42): what it refuses (a device
node, FIFO, socket, directory, a symbolic link, anything under /dev, /proc or /sys, also through a
linked directory), how it replaces a regular file (a temporary file renamed: hard links and permissions
as they were), the database's rules, and the work directory's (``fresh``). /dev/null is only ever
named, never written: the refusal comes before anything is opened for writing. The commands that write
through it: tests/cli/test_outputs.py; on real loop devices: tests/integration/test_outputs_devices.py."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from iolab import outputs
from iolab.outputs import OutputError

VICTIM = b"the user's data\n" * 64


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_bytes(VICTIM)
    return path


def refusal(path: Path | str, what: str = "the report", data: bytes = b"new\n", **kwargs: object) -> str:
    with pytest.raises(OutputError) as refused:
        outputs.write(path, what, data, **kwargs)  # type: ignore[arg-type]
    assert refused.value.exit_code == 2
    return refused.value.message


def test_the_null_device_is_refused_as_a_character_device_and_stays_one():
    before = os.lstat("/dev/null")
    assert refusal("/dev/null") == ("refusing to write the report at /dev/null: it is a character device under /dev, "
                                   "where device nodes and kernel interfaces live")
    with pytest.raises(OutputError, match="it is a character device under /dev"):
        outputs.database(Path("/dev/null"))
    with pytest.raises(OutputError, match="it is a character device under /dev"):
        outputs.check("/dev/null", "the suite")
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    assert not [n for n in os.listdir("/dev") if n.startswith(".null.")]  # no temporary file beside it


def test_a_fifo_is_refused_without_being_opened(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # opening a FIFO to write would wait for a reader: the refusal comes first, at once
    assert refusal(fifo) == f"refusing to write the report at {fifo}: it is a FIFO (named pipe), not a regular file"
    with pytest.raises(OutputError, match=r"it is a FIFO \(named pipe\), not a database file"):
        outputs.database(fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_socket_and_a_directory_are_refused(tmp_path):
    with tempfile.TemporaryDirectory(prefix="iolab-") as short:  # a socket's path holds at most 107 bytes
        path = Path(short) / "s"
        with contextlib.closing(socket.socket(socket.AF_UNIX)) as sock:
            sock.bind(str(path))
            assert refusal(path).endswith("it is a socket, not a regular file")
    (tmp_path / "d").mkdir()
    assert refusal(tmp_path / "d").endswith("it is a directory, not a regular file")
    assert (tmp_path / "d").is_dir() and not list((tmp_path / "d").iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]  # no temporary file left


def test_a_symbolic_link_is_never_written_through(tmp_path, victim):
    link = tmp_path / "report.html"
    link.symlink_to(victim)
    message = refusal(link)
    assert message == (f"refusing to write the report at {link}: it is a symbolic link (to {victim}), and iolab "
                       "never writes through one")
    dangling = tmp_path / "new.html"
    dangling.symlink_to(tmp_path / "elsewhere.html")  # a link planted at a name not yet written
    refusal(dangling)
    assert digest(victim) == hashlib.sha256(VICTIM).hexdigest() and link.is_symlink()
    assert not (tmp_path / "elsewhere.html").exists()


def test_the_kernel_trees_are_refused_also_through_a_linked_directory(tmp_path):
    assert refusal("/proc/self/iolab-test.html").startswith(
        "refusing to write the report at /proc/self/iolab-test.html: it is in /proc/self, which is /proc/")
    assert refusal("/sys/iolab-test.html").endswith("it is under /sys, where device nodes and kernel interfaces live")
    assert refusal("/dev/shm/iolab-test.html").endswith("it is under /dev, where device nodes and kernel interfaces "
                                                        "live")
    devices = tmp_path / "devices"
    devices.symlink_to("/dev")
    assert refusal(devices / "null").endswith(
        f"it is a character device in {devices}, which is /dev, under /dev, where device nodes and kernel "
        "interfaces live")
    name = f"iolab-test-{os.getpid()}"
    assert refusal(devices / name / "r.html").endswith("its directory would be made under /dev (/dev)")
    with pytest.raises(OutputError, match="under /dev"):
        outputs.directory(devices / name, "the chart folder")
    with pytest.raises(OutputError, match="under /dev"):
        outputs.check(devices / name, "the chart folder", folder=True)
    assert not os.path.lexists(f"/dev/{name}") and not os.path.lexists("/dev/shm/iolab-test.html")


def test_a_regular_file_is_replaced_by_a_new_one(tmp_path, victim):
    report = tmp_path / "report.html"
    report.write_text("old\n")
    report.chmod(0o640)
    other_name = tmp_path / "hardlink.html"
    os.link(report, other_name)
    inode = report.stat().st_ino
    assert outputs.write(report, "the report", "new\n") == report
    assert report.read_text() == "new\n" and report.stat().st_ino != inode
    assert stat.S_IMODE(report.stat().st_mode) == 0o640  # its permissions kept
    assert other_name.read_text() == "old\n"  # the old file was never opened for writing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hardlink.html", "report.html", "victim.txt"]
    made = outputs.write(tmp_path / "a" / "b" / "new.txt", "the report", b"\x00\x01")  # directories made
    assert made.read_bytes() == b"\x00\x01"
    with pytest.raises(OutputError, match=f"cannot write the report at {victim}/x.html: {victim} is not a directory"):
        outputs.write(victim / "x.html", "the report", "x")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_root_replacing_a_users_file_leaves_it_the_users(tmp_path):
    report = tmp_path / "report.html"
    report.write_text("old\n")
    os.chown(report, 1234, 5678)
    outputs.write(report, "the report", "new\n")
    assert (report.stat().st_uid, report.stat().st_gid) == (1234, 5678) and report.read_text() == "new\n"


def test_a_read_only_file_is_refused(tmp_path, monkeypatch):
    kept = tmp_path / "kept.html"
    kept.write_text("mine\n")
    monkeypatch.setattr(outputs.os, "access", lambda *args, **kwargs: False)  # root passes every access check
    assert refusal(kept).endswith("it is a read-only file (no write permission for this user)")
    assert kept.read_text() == "mine\n"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    report = tmp_path / "report.html"
    report.write_text("old\n")
    with pytest.raises(RuntimeError), outputs.writing(report, "the report") as file:
        file.write(b"half")
        raise RuntimeError("the report could not be drawn")
    assert report.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_check_refuses_as_writing_would_and_makes_nothing(tmp_path, victim):
    link = tmp_path / "suite.yaml"
    link.symlink_to(victim)
    with pytest.raises(OutputError, match="it is a symbolic link"):
        outputs.check(link, "the suite")
    outputs.check(tmp_path / "not" / "yet" / "suite.yaml", "the suite")
    outputs.check(tmp_path / "charts", "the chart folder", folder=True)
    with pytest.raises(OutputError, match="not a directory"):
        outputs.check(victim, "the chart folder", folder=True)
    assert not (tmp_path / "not").exists() and not (tmp_path / "charts").exists()


def test_a_database_is_made_where_nothing_is_and_opened_where_sqlite_is(tmp_path, victim):
    new = tmp_path / "sub" / "iolab.db"
    outputs.database(new)
    assert stat.S_ISREG(new.lstat().st_mode) and new.stat().st_size == 0  # SQLite reads an empty file as a database
    with contextlib.closing(sqlite3.connect(new)) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
    outputs.database(new)
    linked = tmp_path / "linked.db"
    linked.symlink_to(new)  # a link to a database: SQLite follows it, and so may iolab
    outputs.database(linked)
    with pytest.raises(OutputError) as refused:
        outputs.database(victim)
    assert refused.value.message == (f"refusing to write the results database at {victim}: that file is not an SQLite "
                                     "database (it does not start with SQLite's header), and iolab creates a "
                                     "database only where nothing exists")
    dangling = tmp_path / "dangling.db"
    dangling.symlink_to(tmp_path / "nothing.db")
    with pytest.raises(OutputError, match=r"it is a symbolic link to .*nothing\.db, which does not exist"):
        outputs.database(dangling)
    assert digest(victim) == hashlib.sha256(VICTIM).hexdigest() and not (tmp_path / "nothing.db").exists()
    outputs.database(tmp_path / "absent" / "x.db", create=False)  # nothing there to open, and nothing made
    assert not (tmp_path / "absent").exists()


def test_sqlites_own_files_beside_a_database_must_be_regular_files(tmp_path, victim):
    db = tmp_path / "iolab.db"
    outputs.database(db)
    wal = tmp_path / "iolab.db-wal"
    wal.symlink_to(victim)
    with pytest.raises(OutputError) as refused:
        outputs.database(db)
    assert refused.value.message == (f"refusing to write the results database at {db}: SQLite writes its -wal file "
                                     f"beside it, and {wal} is a symbolic link")
    wal.unlink()
    os.mkfifo(tmp_path / "iolab.db-shm")
    with pytest.raises(OutputError, match=r"its -shm file beside it, and .* is a FIFO \(named pipe\)"):
        outputs.database(db)
    assert digest(victim) == hashlib.sha256(VICTIM).hexdigest()


def test_in_a_directory_another_program_writes_a_planted_name_is_removed_not_followed(tmp_path, victim):
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "job.fio").symlink_to(victim)
    outputs.write(workdir / "job.fio", "fio's job file", "[j]\n", how="fresh")
    assert not (workdir / "job.fio").is_symlink() and (workdir / "job.fio").read_text() == "[j]\n"
    assert digest(victim) == hashlib.sha256(VICTIM).hexdigest()


def test_a_name_that_appears_while_iolab_creates_it_fails_the_write(tmp_path, monkeypatch):
    workdir = tmp_path / "work"
    workdir.mkdir()
    real_unlink = os.unlink

    def unlink_then_plant(name: str, *, dir_fd: int | None = None) -> None:  # a program racing iolab
        with contextlib.suppress(FileNotFoundError):
            real_unlink(name, dir_fd=dir_fd)
        os.symlink("/etc/hostname", name, dir_fd=dir_fd)

    monkeypatch.setattr(outputs.os, "unlink", unlink_then_plant)
    with pytest.raises(OutputError, match="something was put at that name while iolab created it"):
        outputs.write(workdir / "fio.stdout", "fio's output", "", how="fresh")
    assert (workdir / "fio.stdout").is_symlink()


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    here = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(here)


def test_a_relative_name_is_written_in_the_working_directory(tmp_path):
    with _cwd(tmp_path):
        outputs.write("iolab-report-1.html", "the report", "x")
    assert (tmp_path / "iolab-report-1.html").read_text() == "x"
