"""The fence: every fio iolab starts on this machine runs where only the checked plan can be written.

The static guard (``safety``, ``runner.fiopaths``) reads job files the way fio does, but fio's own
reading is richer than any resolver, and what matters is what happens at run time. So fio runs in
a sandbox the kernel enforces, set up by Debian's bubblewrap (``bwrap``), each flag closing a hole
seen open without it:

* ``--ro-bind / /``: the whole file system is read-only;
* ``--dev /dev`` then ``--remount-ro /dev``: a fresh ``/dev`` holding only null, zero, full,
  random, urandom, tty and the planned device nodes (``--dev-bind``); read-only, so a write to a
  device that is not there fails (EROFS) instead of landing in a regular file of the sandbox's
  own ``/dev`` and reporting success;
* ``--bind`` for each file and directory target, and for iolab's work directory of the job
  (fio's output, logs, verify state), which is also fio's working directory (``--chdir``);
* for a file fio is to create, its directory is bound writable (fio creates the file there, and
  lays it out by unlinking and writing it anew), and then every entry already in that directory
  (file or subdirectory, recursively where a planned path lies beneath) ``--ro-bind`` over itself:
  fio may add files beside them, but writing one fails (EROFS), and unlinking or renaming over
  one fails (EBUSY, a mount point) — without it, ``iolab run quick`` in a home directory would have
  let fio write every file there;
* ``--unshare-pid`` and a fresh ``/proc``: without a pid namespace ``/proc/PID/root/dev/...``
  reaches the host's device nodes;
* ``--cap-drop ALL``: with capabilities kept, a devtmpfs can be mounted inside;
* ``--die-with-parent``: nothing survives iolab.

Device nodes on a read-only mount stay writable (the kernel checks read-only mounts for files,
directories and links only), so a device is present in the fence only when the plan names it, and
every device bound is one the guard checked. On top, where the kernel has Landlock, fio starts
through ``landlock.py``, which allows writing only beneath the writable places: a device bound for
a job that only reads it cannot be opened for writing either. Source: bubblewrap(1); Linux
``fs/namei.c`` ``may_open``; landlock(7).
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SafetyError
from . import landlock

#: What the fence is, in one line, for plans and the README.
RULES = ("read-only root, fresh read-only /dev with only the planned devices, own pid namespace and /proc, "
         "no capabilities, dies with iolab")
#: Directories whose missing entries iolab never creates to bind them (kernel and device trees).
_NEVER_CREATE = ("/dev", "/proc", "/sys", "/run")


@dataclass(frozen=True)
class Status:
    """Whether a fence can be set up here: ``tool`` (``bubblewrap 0.8.0``) or ``reason`` why not."""

    tool: str | None
    reason: str | None = None
    landlock: int = 0

    @property
    def ok(self) -> bool:
        return self.tool is not None


@dataclass(frozen=True)
class Fence:
    """The sandbox of one fio invocation.

    ``workdir`` is iolab's work directory of the job, given by whoever starts fio (writable; fio's
    working directory). ``devices`` are the device nodes fio may open, each bound at the path the
    job names and at its canonical node; ``writable`` the files and directories fio may write.
    All paths absolute. ``bwrap`` is the bubblewrap executable. ``die_with_parent`` is False only
    for a fio server, which outlives the ``iolab server start`` that started it. ``write_devices``
    is False for a job that only reads: its devices are there to be read, and Landlock (where the
    kernel has it) refuses opening them for writing. ``landlock`` False leaves it out (fio's
    ``--parse-only``, which writes nothing, need not pay for the helper's start). ``creating``
    are the writable directories fio may create files in, ``protected`` their existing entries,
    bound read-only over themselves.
    """

    workdir: Path
    devices: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    bwrap: str = "bwrap"
    die_with_parent: bool = True
    write_devices: bool = True
    landlock: bool = True
    creating: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()

    def argv(self, command: Sequence[str]) -> tuple[str, ...]:
        """``command`` wrapped in bubblewrap with this fence."""
        args: list[str] = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev"]
        for device in self.devices:
            for path in dict.fromkeys((device, os.path.realpath(device))):
                args += ["--dev-bind", path, path]
        args += ["--remount-ro", "/dev", "--proc", "/proc"]
        for path in self.writable:
            args += ["--bind", path, path]
        for path in self.protected:
            args += ["--ro-bind", path, path]
        workdir = str(self.workdir)
        args += ["--bind", workdir, workdir, "--chdir", workdir, "--unshare-pid", "--cap-drop", "ALL",
                 *(["--die-with-parent"] if self.die_with_parent else []), "--"]
        if self.landlock and status(self.bwrap).landlock:
            devices = [p for d in self.devices for p in (d, os.path.realpath(d))] if self.write_devices else []
            args += [sys.executable, "-I", "-S", landlock.__file__, *devices, *self.writable, workdir, "--"]
        return (*args, *command)

    def record(self) -> dict[str, Any]:
        """What is stored with the result (``extra["fence"]``): the devices and paths fio could write
        (devices it only reads: ``read_devices``), and how many existing entries beside files it
        created were read-only."""
        key = "devices" if self.write_devices else "read_devices"
        return {key: list(self.devices), "writable": list(self.writable),
                **({"read_only_entries": len(self.protected)} if self.protected else {})}

    def places(self) -> list[str]:
        """The writable files and directories, for people: a directory fio may only create files in
        says so."""
        return [f"{path} (new files only: its existing entries are read-only)" if path in self.creating else path
                for path in self.writable]

    def describe(self) -> list[str]:
        """The writable places, for messages: devices, then files and directories, then the work
        directory."""
        return [*self.devices, *self.places(), f"{self.workdir} (iolab's work directory)"]

    def allows(self, path: str) -> bool:
        """Whether fio may write ``path`` (or its real path) in this fence."""
        def beneath(p: str, places: Iterable[str]) -> bool:
            return any(p in (a, os.path.realpath(a)) or p.startswith(a.rstrip("/") + "/") for a in places)
        candidates = (path, os.path.realpath(path))
        return any(beneath(p, [*self.devices, *self.writable, str(self.workdir)]) and
                   not beneath(p, self.protected) for p in candidates)


@functools.cache
def status(bwrap: str = "bwrap") -> Status:
    """Whether bubblewrap is installed and can set up the whole fence here (tried once per process:
    ``bwrap --ro-bind / / --dev /dev --unshare-pid --cap-drop ALL --die-with-parent true``). A
    kernel without user or pid namespaces for this user, or a container that forbids them, fails
    here, and ``reason`` quotes bwrap."""
    path = shutil.which(bwrap)
    if path is None:
        return Status(None, "bubblewrap (bwrap) is not installed")
    probe = [path, "--ro-bind", "/", "/", "--dev", "/dev", "--remount-ro", "/dev", "--proc", "/proc",
             "--unshare-pid", "--cap-drop", "ALL", "--die-with-parent", "true"]
    try:
        out = subprocess.run(probe, capture_output=True, text=True, timeout=20, check=False)
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Status(None, f"bwrap cannot run: {exc}")
    if out.returncode != 0:
        return Status(None, f"bwrap cannot set up the fence here: {(out.stderr or out.stdout).strip()}")
    found = landlock.abi()
    tool = version.stdout.strip() or "bubblewrap"
    return Status(f"{tool} + Landlock ABI {found}" if found else tool, landlock=found)


def require(bwrap: str = "bwrap") -> Status:
    """``status()``, raising ``SafetyError`` when no fence can be set up (the caller decided fio
    must be fenced)."""
    found = status(bwrap)
    if not found.ok:
        raise SafetyError(f"no fence can be set up: {found.reason}; iolab runs fio where only the checked plan "
                          "can be written, and does not run a writing job without that",
                          hint="install bubblewrap (apt-get install bubblewrap), or pass --no-fence to run fio "
                               "unfenced (only the static guard then protects your devices)")
    return found


#: At most this many existing entries of the directories fio creates files in are bound read-only; a
#: plan creating a file in a fuller directory is refused. Each bind costs bwrap a pass over the mount
#: table, so the set-up grows with the square of the count: 30 entries 20 ms, 300 110 ms, 1,000
#: 0.8 s, 2,048 3.4 s per fio started (bwrap 0.8.0, this VM), and bwrap takes at most 9,000 arguments.
MAX_PROTECTED = 256


def build(paths: Iterable[str], workdir: Path, bwrap: str = "bwrap", writes: bool = True) -> Fence:
    """The fence for a job whose checked paths are ``paths`` (targets and the job's own files, as
    ``runner.fiopaths`` resolves them): block and character devices are bound as devices, existing
    files and directories as writable; for a file that does not exist yet, its nearest existing
    directory (fio creates the file, and lays out a file too small for the job by unlinking and
    writing it anew, ``filesetup.c`` ``extend_file``: neither works on a bound file), with that
    directory's existing entries read-only (``protected``). Nothing under ``/dev``, ``/proc``,
    ``/sys`` or ``/run`` is ever made writable but the devices. Paths under another writable
    directory are left to it. Raises ``SafetyError`` when a directory to create files in holds more
    than ``MAX_PROTECTED`` entries."""
    devices: list[str] = []
    writable: list[str] = []
    creating: list[str] = []
    planned = [os.path.abspath(p) for p in paths]
    for path in dict.fromkeys(planned):
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = 0
        if stat.S_ISBLK(mode) or stat.S_ISCHR(mode):
            devices.append(path)
            continue
        new = not os.path.lexists(path)
        while not os.path.lexists(path) and path != "/":
            path = os.path.dirname(path)
        if path != "/" and not any(path == d or path.startswith(d + "/") for d in _NEVER_CREATE):
            writable.append(path)
            creating += [path] if new else []
    kept = [p for p in writable if not any(p != d and p.startswith(d.rstrip("/") + "/") for d in writable)]
    protected = _entries(dict.fromkeys(creating), [*planned, str(workdir)])
    return Fence(workdir, tuple(devices), tuple(kept), bwrap, write_devices=writes,
                 creating=tuple(p for p in dict.fromkeys(creating) if p in kept), protected=protected)


def _entries(directories: Iterable[str], planned: Sequence[str]) -> tuple[str, ...]:
    """The existing files and subdirectories of ``directories`` to bind read-only: all but the
    planned paths, and beneath a planned path's ancestors their own entries the same way. Symbolic
    links and other special files are left (a bind would follow a link)."""
    out: list[str] = []

    def walk(directory: str, top: str) -> None:
        with os.scandir(directory) as found:
            for entry in sorted(found, key=lambda e: e.name):
                if entry.path in planned or entry.is_symlink() or not (entry.is_file() or entry.is_dir()):
                    continue
                if any(p.startswith(entry.path + "/") for p in planned):
                    walk(entry.path, top)
                else:
                    out.append(entry.path)
                if len(out) > MAX_PROTECTED:
                    raise SafetyError(
                        f"fio would create a file in {top}, which holds more than "
                        f"{MAX_PROTECTED} entries: the fence keeps each existing entry read-only with its own mount",
                        hint="create the scratch file in a directory of its own (name a new directory's file, or a "
                             "directory as --target)")
    for directory in directories:
        walk(directory, directory)
    return tuple(dict.fromkeys(out))


def ignore_interrupts() -> None:
    """For bubblewrap's ``preexec_fn``: bwrap ignores SIGINT, so Ctrl-C sent to the process group
    reaches fio (which installs its own handler and ends cleanly) without killing bwrap, whose
    death would SIGKILL fio through ``--die-with-parent`` before it wrote its report."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


#: fio's errno for writes the fence stops: EROFS (read-only mount), EACCES/EPERM, ENOENT (a node
#: that is not in the fence's /dev opened without O_CREAT), EBUSY (unlinking a bound file).
STOPPED_ERRNOS = frozenset({30, 13, 1, 16})


def stopped_message(paths: Sequence[str], fence: Fence) -> str:
    """The failure of a job whose write the fence stopped: the paths and the rule."""
    named = ", ".join(paths) if paths else "a path outside the fence"
    return (f"fio tried to write {named}, which this run does not name; nothing was written there "
            f"(the fence lets fio write only: {', '.join(fence.describe())})")


def relayout_message(paths: Sequence[str]) -> str:
    """The failure of a job on an existing file smaller than the job needs: fio lays such a file out
    anew, unlinking it first (``filesetup.c`` ``extend_file``, for reads and writes alike unless
    ``file_append``), and the fence lets fio write the file the plan names, not its directory."""
    return (f"fio tried to lay out {', '.join(paths)} anew (a file smaller than the job's size is unlinked and "
            "written again), which the fence does not allow: it lets fio write that file, not create files "
            "beside it; nothing was written there. Give the job a size the file already has (or size=100%), "
            "or let fio create a new file: name a file that does not exist yet, or the directory as --target")
