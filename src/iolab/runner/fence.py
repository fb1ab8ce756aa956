"""The fence: every fio iolab starts on this machine runs where only the checked plan can be written.

The static guard (``check.safety``, ``check.fiopaths``) reads job files the way fio does, but fio's own
reading is richer than any resolver, and what matters is what happens at run time. So fio runs in
a sandbox the kernel enforces, set up by Debian's bubblewrap (``bwrap``), each flag closing a hole
seen open without it:

* ``--ro-bind / /``: the whole file system is read-only;
* ``--dev /dev`` then ``--remount-ro /dev``: a fresh ``/dev`` holding only null, zero, full,
  random, urandom, tty and the planned device nodes (``--dev-bind``); read-only, so a write to a
  device that is not there fails (EROFS) instead of landing in a regular file of the sandbox's
  own ``/dev`` and reporting success; a planned place in the shared-memory tmpfs ``/dev/shm`` (a
  RAM-disk target) is bound into it before it is made read-only;
* ``--bind`` for each file and directory target, and for iolab's work directory of the job
  (fio's output, logs, verify state), which is also fio's working directory (``--chdir``);
* for a local job (``staged``), each directory fio creates or lays out files in is a directory of
  iolab's own bound over it by descriptor (``--bind-fd``; ``runner.stage`` makes it and the files'
  reservations): fio sees there only the planned files, and no other entry of the directory exists
  for it, however many it holds; an existing file fio writes in place is bound writable by the
  descriptor iolab checked it through, and a planned file it only reads there ``--ro-bind``;
* for a fio server (``build``, one fence for every job it will run), the directory of a file fio is
  to create is bound writable (fio creates the file there, and lays it out by unlinking and writing
  it anew), and then every entry already in that directory (file or subdirectory, recursively where
  a planned path lies beneath) ``--ro-bind`` over itself: fio may add files beside them, but writing
  one fails (EROFS), and unlinking or renaming over one fails (EBUSY, a mount point) — without it,
  ``iolab run quick`` in a home directory would have let fio write every file there;
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

import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SafetyError
from . import landlock
from .once import once

#: What the fence is, in one line, for plans and the manual.
RULES = ("read-only root, fresh read-only /dev with only the planned devices, own pid namespace and /proc, "
         "no capabilities, dies with iolab")
#: Directories whose missing entries iolab never creates to bind them (kernel and device trees).
_NEVER_CREATE = ("/dev", "/proc", "/sys", "/run")
#: A tmpfs under /dev where users put RAM-disk targets: its planned places are bound into the fresh /dev.
SHARED_MEMORY = "/dev/shm"


@dataclass(frozen=True)
class Status:
    """Whether a fence can be set up here: ``tool`` (``bubblewrap 0.8.0``) or ``reason`` why not;
    ``landlock`` the kernel's Landlock ABI (0: none); ``own_network`` whether bwrap can give fio a
    network namespace of its own (``--unshare-net``)."""

    tool: str | None
    reason: str | None = None
    landlock: int = 0
    own_network: bool = False

    @property
    def ok(self) -> bool:
        return self.tool is not None


#: Why fio may write a path (``check.guard``): a path it creates, a file iolab laid out before
#: (``runner.marks``), one named with ``--destroy``, an empty file, or ``--allow`` of a fio server.
NEW, IOLAB, DESTROY, EMPTY, ALLOW = "new", "iolab's", "--destroy", "empty", "--allow"


@dataclass(frozen=True)
class Fence:
    """The sandbox of one fio invocation.

    ``workdir`` is iolab's work directory of the job, given by whoever starts fio (writable; fio's
    working directory). ``devices`` are the device nodes fio may open, each bound at the path the
    job names and at its canonical node; ``write_devices`` those it may also write (the others
    only read: Landlock, where the kernel has it, refuses opening them for writing). ``writable``
    the files and directories fio may write; ``reasons`` why, for people (path, ``NEW`` …).
    ``creating`` are the writable directories fio may only create files in, ``protected`` their
    existing entries, bound read-only over themselves. ``network`` False runs fio in a network
    namespace of its own (no interface but loopback) and, where Landlock has network rules, with
    TCP refused. ``bwrap`` is the bubblewrap executable. ``die_with_parent`` is False only for a
    fio server, which outlives the ``iolab server start`` that started it. ``landlock`` False
    leaves Landlock out (fio's ``--parse-only``, which writes nothing, need not pay for it).
    ``read_files`` are the planned files a job only reads (read-only, as everything else).
    ``fd_binds`` are bound writable by descriptor (``runner.stage``: a directory of iolab's over each
    directory fio creates files in, each existing file written in place), ``read_binds`` read-only
    files inside those directories; the descriptors stay open in iolab until fio ends (``fds``).
    """

    workdir: Path
    devices: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    bwrap: str = "bwrap"
    die_with_parent: bool = True
    write_devices: tuple[str, ...] = ()
    landlock: bool = True
    creating: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()
    reasons: tuple[tuple[str, str], ...] = ()
    network: bool = False
    read_files: tuple[str, ...] = ()
    fd_binds: tuple[tuple[int, str], ...] = ()
    read_binds: tuple[str, ...] = ()

    @property
    def fds(self) -> tuple[int, ...]:
        """The descriptors bubblewrap must inherit (``subprocess.Popen(pass_fds=…)``)."""
        return tuple(fd for fd, _ in self.fd_binds)

    def argv(self, command: Sequence[str]) -> tuple[str, ...]:
        """``command`` wrapped in bubblewrap with this fence."""
        args: list[str] = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev"]
        for device in self.devices:
            for path in dict.fromkeys((device, os.path.realpath(device))):
                args += ["--dev-bind", path, path]
        binds = [*(("--bind", p, p) for p in self.writable), *(("--ro-bind", p, p) for p in self.protected),
                 *(("--bind-fd", str(fd), p) for fd, p in self.fd_binds),
                 *(("--ro-bind", p, p) for p in self.read_binds),
                 *(("--ro-bind", p, p) for p in self.read_files if _under(p, SHARED_MEMORY) and os.path.exists(p))]
        prefix = os.path.realpath(sys.base_prefix)  # Landlock's launcher: a Python under a staged directory (~/.pyenv)
        if self.landlock and any(_under(prefix, p) for _, p in self.fd_binds):
            binds.append(("--ro-bind", prefix, prefix))
        binds.sort(key=lambda b: b[2].rstrip("/").count("/"))  # a place before what is bound inside it
        for kind, source, path in binds:  # into the fresh /dev before it is made read-only (binds keep flags)
            args += [kind, source, path] if _under(path, SHARED_MEMORY) else []
        args += ["--remount-ro", "/dev", "--proc", "/proc"]
        for kind, source, path in binds:
            args += [] if _under(path, SHARED_MEMORY) else [kind, source, path]
        workdir = str(self.workdir)
        found = status(self.bwrap)
        isolated = not self.network and found.own_network
        args += ["--bind", workdir, workdir, "--chdir", workdir, "--unshare-pid", "--cap-drop", "ALL",
                 *(["--unshare-net"] if isolated else []), *(["--die-with-parent"] if self.die_with_parent else []),
                 "--"]
        if self.landlock and found.landlock:
            devices = [p for d in self.write_devices for p in (d, os.path.realpath(d))]
            # the interpreter by its real path and the script as text: a directory bound over the current one
            # (a scratch file's, ``runner.stage``) hides a virtualenv and a source tree that live there
            args += [os.path.realpath(sys.executable), "-I", "-S", "-c", _landlock_source(),
                     *(["--no-network"] if not self.network else []),
                     *devices, *self.writable, *(p for _, p in self.fd_binds), workdir, "--"]
        return (*args, *command)

    def record(self) -> dict[str, Any]:
        """What is stored with the result (``extra["fence"]``): the devices fio could write and those it
        only read (``read_devices``), the paths it could write, how many existing entries beside files
        it created were read-only, and whether it had the network."""
        read = [d for d in self.devices if d not in self.write_devices]
        writable = list(dict.fromkeys([*self.writable, *(p for _, p in self.fd_binds)]))
        return {**({"devices": list(self.write_devices)} if self.write_devices or not read else {}),
                **({"read_devices": read} if read else {}), "writable": writable,
                **({"read_only_entries": len(self.protected)} if self.protected else {}),
                **({"network": True} if self.network else {})}

    def places(self) -> list[str]:
        """Where fio may write, for people, each with why: the devices and planned paths
        (``(new)``, ``(iolab's)``, ``(--destroy)``, ``(empty)``), then each directory it may only
        create files in."""
        return [*(f"{path} ({why})" for path, why in self.reasons),
                *(f"{path} (new files only: its existing entries are read-only)" for path in self.creating),
                *(p for p in [*self.writable, *(p for _, p in self.fd_binds)]
                  if p not in dict(self.reasons) and p not in self.creating)]

    def describe(self) -> list[str]:
        """The writable places, for messages: devices, then files and directories, then the work
        directory (devices a job only reads are not among them)."""
        return [*self.places(), f"{self.workdir} (iolab's work directory)"]

    def reads(self, path: str) -> bool:
        """Whether ``path`` is a planned file the job only reads."""
        return any(p in (*self.read_files, *self.read_binds) for p in (path, os.path.realpath(path)))

    def allows(self, path: str) -> bool:
        """Whether fio may write ``path`` (or its real path) in this fence."""
        def beneath(p: str, places: Iterable[str]) -> bool:
            return any(p in (a, os.path.realpath(a)) or p.startswith(a.rstrip("/") + "/") for a in places)
        candidates = (path, os.path.realpath(path))
        places = [*self.write_devices, *self.writable, *(p for _, p in self.fd_binds), str(self.workdir)]
        return any(beneath(p, places) and
                   not beneath(p, self.protected) for p in candidates)


@once  # asked by the plan and by fio's early checks at once
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
    # all three at once (an ssh host's agent asks this before it can answer)
    out, version, network = _run_all([probe, [path, "--version"], [*probe[:-1], "--unshare-net", "true"]], 20)
    if isinstance(out, Exception) or isinstance(version, Exception):
        return Status(None, f"bwrap cannot run: {out if isinstance(out, Exception) else version}")
    if out.returncode != 0:
        return Status(None, f"bwrap cannot set up the fence here: {(out.stderr or out.stdout).strip()}")
    found = landlock.abi()
    tool = version.stdout.strip() or "bubblewrap"
    # a container may forbid network namespaces: then fio keeps the host's network (and Landlock's rules)
    own_network = not isinstance(network, Exception) and network.returncode == 0
    return Status(f"{tool} + Landlock ABI {found}" if found else tool, landlock=found, own_network=own_network)


def _run_all(argvs: list[list[str]], timeout_s: float
             ) -> list[subprocess.CompletedProcess[str] | OSError | subprocess.TimeoutExpired]:
    """Run ``argvs`` at once; each one's completed process, or why it could not run or end in time."""
    started: list[subprocess.Popen[str] | OSError] = []
    for argv in argvs:
        try:
            started.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        except OSError as exc:
            started.append(exc)
    out: list[subprocess.CompletedProcess[str] | OSError | subprocess.TimeoutExpired] = []
    for i, proc in enumerate(started):  # (no zip(strict=...): an ssh host may have Python 3.9)
        argv = argvs[i]
        if isinstance(proc, OSError):
            out.append(proc)
            continue
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
            out.append(subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr))
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            proc.communicate()
            out.append(exc)
    return out


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


#: At most this many existing entries of the directories a fio server creates files in are bound
#: read-only (``build``); a fuller directory is refused. Each bind costs bwrap a pass over the mount
#: table, so the set-up grows with the square of the count: 30 entries 20 ms, 300 110 ms, 1,000 0.8 s,
#: 2,048 3.4 s per fio started (bwrap 0.8.0, this VM), and bwrap takes at most 9,000 arguments. A local
#: job's directories are staged instead (``staged``), which costs one bind whatever they hold.
MAX_PROTECTED = 256


def build(writable: Mapping[str, str], workdir: Path, bwrap: str = "bwrap", *, read: Iterable[str] = (),
          network: bool = False, protect: bool = True) -> Fence:
    """The fence for a job whose checked paths are ``writable`` (path -> why: ``NEW``, ``IOLAB``,
    ``DESTROY``, ``EMPTY``, ``ALLOW``; ``check.guard`` decides) and ``read`` (devices and files its
    jobs only read), all absolute or relative to the current directory: a fio server's (it runs
    every job sent to it in one fence), and, with ``protect`` False, a plan's summary of its local
    jobs' fences (``staged`` builds those when they run).

    Devices (block and character) are bound as devices, writable only when in ``writable``. An
    existing file in ``writable`` is bound writable itself. For a file that does not exist yet, its
    nearest existing directory is writable (fio creates the file, and lays out a file too small for
    the job by unlinking and writing it anew, ``filesetup.c`` ``extend_file``: neither works on a
    bound file), with that directory's existing entries read-only (``protected``) but for the
    planned writable paths; an existing directory in ``writable`` is the same (fio creates its files
    there) unless named with ``--destroy`` or ``--allow``, which make it writable throughout. Nothing
    under ``/dev``, ``/proc``, ``/sys`` or ``/run`` is ever made writable but the devices. Paths
    under another writable directory are left to it. Raises ``SafetyError`` when a directory to
    create files in holds more than ``MAX_PROTECTED`` entries (``protect``)."""
    devices, write_devices, reasons, places, creating = _sorted(writable, read)
    planned = {os.path.abspath(p): why for p, why in writable.items()}
    kept = [p for p in dict.fromkeys(places) if not any(p != d and p.startswith(d.rstrip("/") + "/") for d in places)]
    creating = [p for p in dict.fromkeys(creating) if p in kept]
    whole = [p for p, why in planned.items() if why in (DESTROY, ALLOW) or not os.path.isdir(p)]
    protected = _entries(creating, [*whole, str(workdir)]) if protect else ()
    return Fence(workdir, tuple(devices), tuple(kept), bwrap, write_devices=tuple(write_devices),
                 creating=tuple(creating), protected=protected, reasons=tuple(reasons.items()), network=network,
                 read_files=tuple(p for p in (os.path.abspath(r) for r in read) if p not in devices))


def _sorted(writable: Mapping[str, str], read: Iterable[str]
            ) -> tuple[list[str], list[str], dict[str, str], list[str], list[str]]:
    """``build``'s reading of its paths: devices, those written, why each planned place is writable,
    the places bound writable (a file, or the nearest existing directory of a new one) and those
    fio creates files in."""
    devices: list[str] = []
    write_devices: list[str] = []
    places: list[str] = []
    creating: list[str] = []
    reasons: dict[str, str] = {}
    planned = {os.path.abspath(p): why for p, why in writable.items()}
    for path in dict.fromkeys([*(os.path.abspath(p) for p in read), *planned]):
        if is_device(path):
            devices.append(path)
            if path in planned:
                write_devices.append(path)
                reasons[path] = planned[path]
            continue
        if path not in planned:
            continue  # read-only already (the root is), or protected below when inside a writable place
        existing = path
        while not os.path.lexists(existing) and existing != "/":
            existing = os.path.dirname(existing)
        if existing == "/" or (not _under(existing, SHARED_MEMORY) and any(_under(existing, d) for d in _NEVER_CREATE)):
            continue
        places.append(existing)
        if existing != path or (os.path.isdir(path) and planned[path] not in (DESTROY, ALLOW)):
            creating.append(existing)
        if existing != path or not os.path.isdir(path) or planned[path] in (DESTROY, ALLOW):
            reasons[path] = planned[path]
    return devices, write_devices, reasons, places, creating


def staged(writable: Mapping[str, str], workdir: Path, bwrap: str = "bwrap", *, read: Iterable[str] = (),
           network: bool = False, fd_binds: Sequence[tuple[int, str]] = (), directories: Sequence[str] = (),
           read_binds: Sequence[str] = (), trees: Sequence[str] = ()) -> Fence:
    """The fence of a local job whose files ``runner.stage`` prepared: devices as ``build`` binds them;
    ``fd_binds`` (descriptor, path) writable — iolab's own directory over each of ``directories`` (where
    fio creates and lays out files, and sees only the planned ones), each existing file written in
    place — and ``read_binds`` read-only inside them; each ``opendir`` tree of ``trees`` writable
    whole (every regular file beneath was checked), its other entries read-only as ``build`` keeps
    them (at most ``MAX_PROTECTED``; raises ``SafetyError``). ``writable`` gives why, for people."""
    devices, write_devices, reasons, _, _ = _sorted(writable, read)
    planned = {os.path.abspath(p): why for p, why in writable.items()}
    roots = [os.path.abspath(t) for t in trees]
    creating = [t for t in roots if planned.get(t) not in (DESTROY, ALLOW)]
    whole = [p for p, why in planned.items() if why in (DESTROY, ALLOW) or not os.path.isdir(p)]
    return Fence(workdir, tuple(devices), tuple(roots), bwrap, write_devices=tuple(write_devices),
                 creating=tuple(dict.fromkeys([*directories, *creating])),
                 protected=_entries(creating, [*whole, str(workdir)]),
                 reasons=tuple((p, why) for p, why in reasons.items() if p not in directories), network=network,
                 read_files=tuple(p for p in (os.path.abspath(r) for r in read) if p not in devices),
                 fd_binds=tuple(fd_binds), read_binds=tuple(read_binds))


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory + "/")


def is_device(path: str) -> bool:
    """Whether ``path`` (followed) is a block or character device; False when it cannot be read."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISBLK(mode) or stat.S_ISCHR(mode)


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
    ``file_append``), and the fence keeps an existing file in place (the plan names that file, to
    read or write, not its directory)."""
    return (f"fio tried to lay out {', '.join(paths)} anew (a file smaller than the job's size is unlinked and "
            "written again), which the fence does not allow: an existing file stays in place; nothing was written "
            "there. Give the job a size the file already has (or size=100%), or let fio create a new file: name a "
            "file that does not exist yet, or the directory as --target")


@once
def _landlock_source() -> str:
    """``landlock.py``'s text, run with ``python -c`` inside the fence (see ``Fence.argv``)."""
    return Path(landlock.__file__).read_text()
