"""Every file iolab writes for itself goes out one way: ``writing`` (``write``, ``database`` and
``directory`` are built on it, and ``check`` is its first step, for a command that wants to refuse
before a long run rather than after it).

iolab's own files are its results database (and SQLite's ``-wal``, ``-shm`` and ``-journal`` beside
it), reports and their chart folders, fitted jobs, written suites, the spool, caches, the tuning
journal, replay iologs, a fio server's pidfile and log, and what it puts in fio's work directory. None
of them may land on something that is not a file of iolab's (docs/safety.md, "iolab's own files"):

* **Refused** (``OutputError``, exit 2, naming the path and why): a name that is a device node, a
  directory, a FIFO or a socket; a name that is a symbolic link (the hint says where it points: name
  that file itself); a regular file this user may not write (a read-only file is how a user protects
  one); anything in a directory under ``/dev``, ``/proc`` or ``/sys``, where device nodes and kernel
  interfaces live (a block device's size reads 0, so SQLite took one for an empty database; tracefs
  makes an ftrace instance of every ``mkdir``).
* **Replaced**, as ``-o`` conventionally does: a regular file. The content is written to a temporary
  file in the same directory (``.NAME.RANDOM.tmp``, created with ``O_CREAT | O_EXCL | O_NOFOLLOW``,
  so nothing planted at a guessed name is followed), which is renamed over the name once whole: the
  old file is never opened for writing (its other hard links keep their data), and a reader finds the
  old file or the new one, never half of one. The new file keeps the old one's permissions (and, for
  root, its owner).
* **Directories above the name** are followed, symlinks included: they are the user's own layout
  (``~/results -> /data/results``, a home under ``/usr/home``), and a link to a directory points where
  its owner chose. What is checked is the directory actually opened, by its real path read back from
  ``/proc/self/fd`` (a link into ``/dev`` is refused as ``/dev`` is), and everything after is done
  relative to that open directory (``openat``, ``renameat``): the directory checked is the directory
  written, whatever happens to the names on the way meanwhile.
* **A database** (``database``) is created only where nothing exists (``O_EXCL``), and opened only
  where an SQLite database is: a regular file starting with SQLite's header, or an empty one (SQLite
  reads an empty file as an empty database; https://www.sqlite.org/fileformat.html, "The Database
  Header"). SQLite opens these itself, so its ``-wal``, ``-shm`` and ``-journal`` files must be
  absent or regular files beforehand; a link to a database is followed (SQLite does so too, and puts
  those files beside the database it leads to, where they are checked).
* **In a directory another program could write** (fio's work directory, where a job's
  ``exec_prerun`` runs), ``how="fresh"``: what is at the name is removed (``unlink`` never follows a
  link) and the file is created there with ``O_CREAT | O_EXCL | O_NOFOLLOW``, so a name planted in
  between makes the write fail, never land elsewhere. ``how="replace"`` is safe there too: its
  temporary name cannot be guessed, and a planted link at the name is refused.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Literal

from ..errors import UsageError

#: Where device nodes and kernel interfaces live: no file of iolab's goes there.
KERNEL_TREES = ("/dev", "/proc", "/sys")
#: The first 16 bytes of every SQLite 3 database file (https://www.sqlite.org/fileformat.html).
SQLITE_HEADER = b"SQLite format 3\x00"
#: The files SQLite itself writes beside a database (write-ahead log, its index, the rollback journal).
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")
HINT = ("iolab writes its own files only as regular files, never onto a device, FIFO, socket or directory, "
        "never through a symbolic link, and nowhere under /dev, /proc or /sys: give the path of a file")
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

How = Literal["replace", "new", "fresh"]


class OutputError(UsageError):
    """iolab will not, or cannot, write one of its own files there; the message names the path and why."""


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return words
    return "not a regular file"


def kernel_tree(real: str) -> str | None:
    """The tree of ``KERNEL_TREES`` the real (resolved, absolute) path ``real`` is in, or None."""
    return next((t for t in KERNEL_TREES if real == t or real.startswith(t + "/")), None)


def _refused(what: str, path: Path | str, why: str, hint: str = HINT) -> OutputError:
    return OutputError(f"refusing to write {what} at {path}: {why}", hint=hint)


def _failed(what: str, path: Path | str, exc: OSError) -> OutputError:
    return OutputError(f"cannot write {what} at {path}: {exc.strerror or exc}",
                       hint="check that its directory exists or can be created, is writable and has room")


def _real_dir(fd: int, fallback: Path) -> str:
    """The real path of the open directory ``fd``: what is opened, not the name it was opened by."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc (a chroot): the name resolved now is the best there is
        return os.path.realpath(fallback)


def _deepest(directory: Path) -> Path:
    """``directory`` or its deepest ancestor that exists (as anything)."""
    absolute = directory.absolute()
    return next((p for p in (absolute, *absolute.parents) if os.path.lexists(p)), Path("/"))


def _check_parents(directory: Path, what: str, path: Path) -> None:
    """Refuse making the missing ``directory``: under a kernel tree, or below something not a directory."""
    existing = _deepest(directory)
    real = os.path.realpath(existing)
    tree = kernel_tree(real)
    if tree is not None:
        raise _refused(what, path, f"its directory would be made under {tree} ({real})")
    if not os.path.isdir(real):
        raise OutputError(f"cannot write {what} at {path}: {existing} is not a directory",
                          hint="name a path whose directories are directories")


def _make_dirs(directory: Path, what: str, path: Path) -> None:
    """``directory`` and its missing parents, created after the deepest existing one was checked."""
    if directory.is_dir():
        return
    _check_parents(directory, what, path)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        where = f"{what} at {path}" if directory == path else f"the directory {directory} for {what} at {path}"
        raise OutputError(f"cannot create {where}: {exc.strerror or exc}",
                          hint="check that it can be created (a writable parent, not a file)") from None


def _open_dir(directory: Path, what: str, path: Path, make: bool = True) -> int:
    """The directory ``directory`` opened (created first when ``make``), after its real path was checked
    (the refusal names what ``path`` is, when it is not a regular file)."""
    if make:
        _make_dirs(directory, what, path)
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except NotADirectoryError:
        raise _refused(what, path, f"{directory} is not a directory") from None
    except OSError as exc:
        raise _failed(what, path, exc) from None
    real = _real_dir(fd, directory)
    tree = kernel_tree(real)
    if tree is not None:
        st = _lstat(path.name, fd) if path.name not in ("", ".", "..") else None
        os.close(fd)
        what_it_is = f"it is {_kind(st.st_mode)}" if st is not None and not stat.S_ISREG(st.st_mode) else "it is"
        where = (f"{what_it_is} under {tree}" if real == os.path.abspath(directory) else
                 f"{what_it_is} in {directory}, which is {real}, under {tree}")
        raise _refused(what, path, f"{where}, where device nodes and kernel interfaces live")
    return fd


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _replaceable(name: str, dir_fd: int, what: str, path: Path) -> os.stat_result | None:
    """What is at ``name`` when it may be replaced (None: nothing); else the refusal, raised."""
    st = _lstat(name, dir_fd)
    if st is None or (stat.S_ISREG(st.st_mode) and os.access(name, os.W_OK, dir_fd=dir_fd, follow_symlinks=False)):
        return st
    if stat.S_ISREG(st.st_mode):
        raise _refused(what, path, "it is a read-only file (no write permission for this user)",
                       hint="make it writable if it is to be replaced, or name another file")
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(name, dir_fd=dir_fd)
        raise _refused(what, path, f"it is a symbolic link (to {target}), and iolab never writes through one",
                       hint=f"name the file itself ({os.path.join(os.path.dirname(path), target)}), if that is "
                            "where it should go")
    raise _refused(what, path, f"it is {_kind(st.st_mode)}, not a regular file")


def _name(path: Path, what: str) -> str:
    if path.name in ("", ".", ".."):
        raise _refused(what, path, "that is not a file name")
    return path.name


def check(path: Path | str, what: str, *, folder: bool = False) -> None:
    """Refuse now what ``writing(path, what)`` (with ``folder``: ``directory(path, what)``) would
    refuse, creating nothing: for a command that writes its file after a long run. Raises ``OutputError``."""
    path = Path(path)
    if folder:
        if os.path.lexists(path) and not path.is_dir():
            raise _refused(what, path, f"it is {_kind(os.lstat(path).st_mode)}, not a directory")
        directory, name = path, None
    else:
        directory, name = path.parent, _name(path, what)
    if not directory.is_dir():
        _check_parents(directory, what, path)
        return
    fd = _open_dir(directory, what, path, make=False)
    try:
        if name is not None:
            _replaceable(name, fd, what, path)
    finally:
        os.close(fd)


@contextlib.contextmanager
def writing(path: Path | str, what: str, *, how: How = "replace", durable: bool = False,
            private: bool = False) -> Iterator[BinaryIO]:
    """The one way iolab writes a file of its own (see the module): yields a binary file to write
    ``path``'s content into; ``what`` names the file in messages (``the HTML report``).

    ``how``: ``replace`` (a new file, or one replacing a regular file: written to a temporary file
    renamed over the name when the block ends without an exception; removed when it raises),
    ``new`` (created at the name with ``O_EXCL``: nothing may be there), ``fresh`` (in a directory
    another program could write: what is at the name removed, then as ``new``). ``durable``: the file
    and its directory are fsynced. ``private``: mode 0600 (else 0666 less the umask; a replaced file's
    permissions are kept). Missing directories are created. Raises ``OutputError`` for a refusal or a
    failure of its own; what the block raises passes unchanged.
    """
    path = Path(path)
    name = _name(path, what)
    dir_fd = _open_dir(path.parent, what, path)
    try:
        fd, temp = _start(name, dir_fd, what, path, how, 0o600 if private else 0o666)
        file = os.fdopen(fd, "wb")
        try:
            yield file
            try:
                file.flush()
                if durable:
                    os.fsync(file.fileno())
                file.close()
                if temp is not None:
                    os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                    temp = None
                if durable:
                    os.fsync(dir_fd)
            except OSError as exc:
                raise _failed(what, path, exc) from exc
        finally:
            with contextlib.suppress(OSError):
                file.close()
            if temp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def _start(name: str, dir_fd: int, what: str, path: Path, how: How, mode: int) -> tuple[int, str | None]:
    """The file descriptor to write and the temporary name to rename (None: written in place)."""
    try:
        if how == "replace":
            existing = _replaceable(name, dir_fd, what, path)
            temp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
            fd = os.open(temp, _FLAGS, mode, dir_fd=dir_fd)
            if existing is not None:
                os.fchmod(fd, stat.S_IMODE(existing.st_mode) & 0o777)
                if os.geteuid() == 0:  # `sudo iolab report -o ~/r.html` leaves the user's file the user's
                    with contextlib.suppress(OSError):
                        os.fchown(fd, existing.st_uid, existing.st_gid)
            return fd, temp
        if how == "fresh":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dir_fd)  # never follows a link: the link itself goes
        return os.open(name, _FLAGS, mode, dir_fd=dir_fd), None
    except FileExistsError:
        raise _refused(what, path, "something was put at that name while iolab created it",
                       hint="another program writes that directory; run again") from None
    except IsADirectoryError:
        raise _refused(what, path, "it is a directory, not a regular file") from None
    except OSError as exc:
        raise _failed(what, path, exc) from None


def write(path: Path | str, what: str, data: bytes | str, *, how: How = "replace", durable: bool = False,
          private: bool = False) -> Path:
    """``data`` (text as UTF-8) as the whole content of ``path``, through ``writing`` (see there);
    returns ``path``. Raises ``OutputError``."""
    content = data.encode() if isinstance(data, str) else data
    try:
        with writing(path, what, how=how, durable=durable, private=private) as file:
            file.write(content)
    except OSError as exc:  # from the write itself (no room)
        raise _failed(what, path, exc) from exc
    return Path(path)


def directory(path: Path | str, what: str) -> Path:
    """The directory ``path`` (created with its parents) for iolab's files (a chart folder, the spool),
    checked as ``writing`` checks a file's directory; returns ``path``. Raises ``OutputError`` when it
    is under ``/dev``, ``/proc`` or ``/sys`` or is not a directory."""
    path = Path(path)
    if os.path.lexists(path) and not path.is_dir():
        raise _refused(what, path, f"it is {_kind(os.lstat(path).st_mode)}, not a directory")
    os.close(_open_dir(path, what, path))
    return path


def database(path: Path | str, *, create: bool = True) -> None:
    """Check (and with ``create``, make) the SQLite database file ``path`` before SQLite opens it
    (see the module): created empty with ``O_EXCL`` where nothing is; else it must be an SQLite
    database, and its companions absent or regular files. Raises ``OutputError``."""
    path = Path(path)
    what = "the results database"
    name = _name(path, what)
    if not create and not path.parent.is_dir():
        return
    dir_fd = _open_dir(path.parent, what, path, make=create)
    try:
        st = _lstat(name, dir_fd)
        if st is None and create:
            try:
                with writing(path, what, how="new"):
                    pass
            except OutputError:
                if not os.path.lexists(path):
                    raise
            st = _lstat(name, dir_fd)
    finally:
        os.close(dir_fd)
    if st is None:
        return
    real = Path(os.path.realpath(path)) if stat.S_ISLNK(st.st_mode) else path
    _sqlite_file(real, what, path)
    for suffix in SQLITE_COMPANIONS:
        companion = real.with_name(real.name + suffix)
        with contextlib.suppress(FileNotFoundError):
            mode = os.lstat(companion).st_mode
            if not stat.S_ISREG(mode):
                raise _refused(what, path, f"SQLite writes its {suffix} file beside it, and {companion} is "
                                           f"{_kind(mode)}")


def _sqlite_file(real: Path, what: str, path: Path) -> None:
    """Refuse ``real`` (``path`` or the file its link leads to) unless it is an SQLite database file."""
    tree = kernel_tree(os.path.realpath(real))
    if tree is not None:
        raise _refused(what, path, f"it is under {tree}, where device nodes and kernel interfaces live")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _refused(what, path, f"it is a symbolic link to {real}, which does not exist",
                       hint="iolab creates a database only where nothing exists: name the file itself") from None
    except OSError as exc:
        raise OutputError(f"cannot open the results database {path}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refused(what, path, f"it is {_kind(mode)}, not a database file")
        head = os.read(fd, len(SQLITE_HEADER))
    finally:
        os.close(fd)
    if head and head != SQLITE_HEADER:
        raise _refused(what, path, "that file is not an SQLite database (it does not start with SQLite's header), "
                                   "and iolab creates a database only where nothing exists",
                       hint="give a new file name, or the path of an iolab database, with --db or $IOLAB_DB")
