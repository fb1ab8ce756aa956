"""iolab's own files from the command line (issue 42, item 1): ``--db``, ``report -o``, ``--markdown``
and its chart folder, ``--png``, ``fit -o`` and ``autotune --write-suite`` refuse a device node, a FIFO,
a directory, a symbolic link and anything under /dev, /proc or /sys with exit 2, naming the path and
why, before anything is written; a regular file is replaced by a new one. The function they all go
through: tests/unit/ground/test_outputs.py; on real loop devices: tests/integration/test_outputs_devices.py.

On the code before issue 42 (main a662b21) each refusal here was an exit 0 that wrote through the name:
``--db`` made an SQLite database of a file of the user's, ``report -o LINK`` wrote the file it leads to."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from captures import capture_of, rows, stored
from inprocess import iolab
from iolab.workflows.capture.trace import READ, from_rows

DD_READS = rows((64, 0, 128, 65536, READ, 100))  # dd if=DEVICE bs=64k count=64 iflag=direct
VICTIM = b"[mysqld]\ndatadir=/var/lib/mysql\n" * 8


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """A directory with a user's file (``victim``), a link to it, a FIFO and a subdirectory."""
    (tmp_path / "victim.cnf").write_bytes(VICTIM)
    (tmp_path / "link").symlink_to(tmp_path / "victim.cnf")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    return tmp_path


def _listing(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


def _intact(lab: Path) -> None:
    assert hashlib.sha256((lab / "victim.cnf").read_bytes()).digest() == hashlib.sha256(VICTIM).digest()
    assert (lab / "link").is_symlink() and stat.S_ISFIFO((lab / "fifo").lstat().st_mode)
    assert not list((lab / "folder").iterdir())
    null = os.lstat("/dev/null")
    assert stat.S_ISCHR(null.st_mode) and not [n for n in os.listdir("/dev") if n.startswith(("null-", ".null"))]


def _refused(proc, path: Path | str, why: str) -> None:  # type: ignore[no-untyped-def]
    assert proc.returncode == 2, proc.stderr
    assert f"Error: refusing to write {why}".replace("PATH", str(path)) in proc.stderr, proc.stderr
    assert "Hint:" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", [("import",), ("runs",)], ids=["creating", "reading"])
def test_db_is_never_a_device_a_fifo_a_directory_or_a_users_file(lab, command):
    sample = Path(__file__).parents[1] / "data" / "fio" / "fio-2.2.8_randrw_posixaio.json"
    args = (*command, str(sample)) if command == ("import",) else command
    dev = "the results database at /dev/null: it is a character device under /dev, where device nodes"
    for db, why in ((Path("/dev/null"), dev),
                    (lab / "fifo", "the results database at PATH: it is a FIFO (named pipe), not a database file"),
                    (lab / "folder", "the results database at PATH: it is a directory, not a database file"),
                    (lab / "victim.cnf", "the results database at PATH: that file is not an SQLite database"),
                    (lab / "link", f"the results database at {lab / 'victim.cnf'}: that file is not an SQLite"
                                   " database")):  # a link is followed as SQLite follows it: where it leads is judged
        _refused(iolab(*args, db=db), db, why)
    (lab / "to-dev").symlink_to("/dev/shm/iolab-test-no-such.db")  # --db names the link, resolved as SQLite would
    to_dev = iolab(*args, db=lab / "to-dev")
    assert to_dev.returncode == 2 and "/dev/shm/iolab-test-no-such.db" in to_dev.stderr
    if command == ("import",):
        _refused(to_dev, "/dev/shm/iolab-test-no-such.db", "the results database at PATH: it is under /dev")
    _intact(lab)
    assert not os.path.lexists("/dev/shm/iolab-test-no-such.db")


def test_a_new_database_is_made_and_an_existing_one_opened(lab):
    sample = Path(__file__).parents[1] / "data" / "fio" / "fio-2.2.8_randrw_posixaio.json"
    db = lab / "new" / "iolab.db"
    assert iolab("import", str(sample), db=db).returncode == 0
    assert db.read_bytes().startswith(b"SQLite format 3\x00")
    again = iolab("import", str(sample), db=db)  # the same output again: found in the database it opened
    assert again.returncode == 0, again.stderr
    assert len(json.loads(iolab("runs", "--format", "json", db=db).stdout)["runs"]) == 1


@pytest.fixture
def captured(lab: Path) -> Path:
    """A database holding one capture (run 1, label ``dd``): something to report and to fit."""
    db = lab / "iolab.db"
    stored(db, capture_of(from_rows(DD_READS, comms={100: "dd"}), path="/dev/loop5"), label="dd")
    return db


def test_report_outputs_are_refused_before_the_report_is_built(lab, captured):
    before = _listing(lab)
    html = "the HTML report at PATH: "
    for args, path, why in (
            (("-o", "/dev/null"), "/dev/null", html + "it is a character device under /dev, where device nodes"),
            (("-o", str(lab / "fifo")), lab / "fifo", html + "it is a FIFO (named pipe), not a regular file"),
            (("-o", str(lab / "link")), lab / "link", html + f"it is a symbolic link (to {lab / 'victim.cnf'}), "
                                                             "and iolab never writes through one"),
            (("-o", "/proc/self/report.html"), "/proc/self/report.html", html + "it is in /proc/self, which is "),
            (("-o", str(lab / "r.html"), "--markdown", "/dev/shm/iolab-test.md"), "/dev/shm/iolab-test.md",
             "the Markdown report at PATH: it is under /dev, where device nodes"),
            (("-o", str(lab / "r.html"), "--markdown", str(lab / "link")), lab / "link",
             "the Markdown report at PATH: it is a symbolic link"),
            (("-o", str(lab / "r.html"), "--png", "/sys/iolab-test-charts"), "/sys/iolab-test-charts",
             "the chart folder at PATH: its directory would be made under /sys (/sys)"),
            (("-o", str(lab / "r.html"), "--png", "/dev/iolab-test-charts"), "/dev/iolab-test-charts",
             "the chart folder at PATH: its directory would be made under /dev (/dev)")):
        _refused(iolab("report", "dd", *args, db=captured, cwd=lab), path, why)
    assert _listing(lab) == before  # no report, chart or temporary file anywhere
    _intact(lab)
    assert not [p for p in ("/dev/shm/iolab-test.md", "/sys/iolab-test-charts", "/dev/iolab-test-charts")
                if os.path.lexists(p)]


def test_a_report_replaces_a_regular_file_and_leaves_its_other_names_alone(lab, captured):
    html = lab / "r.html"
    html.write_text("last week's report\n")
    os.link(html, lab / "kept.html")  # the same file under another name, e.g. in a backup tree
    done = iolab("report", "dd", "-o", str(html), db=captured, cwd=lab)
    assert done.returncode == 0, done.stderr
    assert html.read_text().startswith("<!doctype html>") and (lab / "kept.html").read_text() == "last week's report\n"
    assert not [p for p in lab.iterdir() if p.name.endswith(".tmp")]


def test_fit_output_is_refused_before_the_capture_is_fitted(lab, captured):
    for path, why in (("/dev/null", "it is a character device under /dev"),
                      (lab / "link", "it is a symbolic link"),
                      (lab / "fifo", "it is a FIFO (named pipe), not a regular file")):
        _refused(iolab("fit", "dd", "-o", str(path), db=captured), path, f"the fitted job file at PATH: {why}")
    _intact(lab)
    done = iolab("fit", "dd", "-o", str(lab / "dd.fio"), db=captured)
    assert done.returncode == 0 and done.stdout == (lab / "dd.fio").read_text()


def test_autotune_refuses_its_suite_before_searching(lab):
    for path, why in (("/dev/null", "it is a character device under /dev"),
                      (lab / "link", "it is a symbolic link"),
                      (lab / "fifo", "it is a FIFO (named pipe), not a regular file")):
        proc = iolab("autotune", "-t", f"ssd={lab / 'data.bin'}", "--slo", "p99<=50ms", "--budget", "1m",
                     "--write-suite", str(path), db=lab / "iolab.db", cwd=lab)
        _refused(proc, path, f"the suite at PATH: {why}")  # at once: the fake fio has no recording to replay
    _intact(lab)
    assert not (lab / "data.bin").exists()
