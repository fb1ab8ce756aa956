"""A fake fio for the fast tier: every fio process iolab would start here, replayed from a recording
of the same job run by real fio on this kind of machine.

iolab starts programs of fio's on this machine in a few places only, all in ``iolab.runner``:
``local.run`` (a job), ``local.check_job`` (``fio --parse-only``), ``local.fio_version`` and
``facts.host.fio_version`` (``fio --version``), the option names' questions
(``runner.optionnames``: ``--cmdhelp``, ``--enghelp``), and bubblewrap's probe
(``runner.fence.status``). ``FakeFio.install`` replaces exactly these; everything around them
runs as in production: the plan and its checks, the guard, the fence's construction, marks,
tuning, the pipeline and its spool, the store, every report. A job's ``Outcome`` is read by
``runner.local.collect`` from the files the recorded fio left in its work directory, as a real
run's is.

**Recordings** live in ``tests/data/fio-runs/<test file>.jsonl.xz``, one per test file: a JSON
line per distinct job (its text, fio's extra arguments), holding fio's exit status and run time,
every file it left in its work directory (the ``--status-interval`` reports, stdout, stderr, the
1-second logs, verify states) and the files it created or grew elsewhere (by size), and a line
per ``--parse-only`` verdict. The test's own directories are replaced by placeholders (``@TMP@``
its ``tmp_path``, ``@WORK@`` fio's work directory, ``@BASE@`` pytest's base directory), so a
recording replays in any run of the test. Timestamps in fio's reports are moved so that fio
appears to have just finished.

A job with no recording fails the test and says how to make it: run the test once with
``IOLAB_RECORD=1`` (real fio then runs each missing job, as the test asks it, and the recording is
written; commit it). ``tests/data/fio-runs/README.md`` says how the recordings were made.

**Faults** (``FakeFio.fault``): fio can be told to fail (exit 1, a job reporting an errno), hang
(until iolab stops it at its time bound), be killed (by a signal, its output cut after the first
report) or be interrupted (Ctrl-C while it runs), at the Nth job from now or at jobs matching a
text.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import lzma
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from iolab.errors import FioNotFound
from iolab.facts import host as host_facts
from iolab.runner import fence as fence_mod
from iolab.runner import local, optionnames
from iolab.runner.outcome import Outcome
from iolab.runner.status import Status, StatusStream
from paths import DATA, TESTS

RECORDINGS = DATA / "fio-runs"
#: fio's version and what bubblewrap's probe found when the recordings were made (``machine.json``).
MACHINE = RECORDINGS / "machine.json"
RECORD = os.environ.get("IOLAB_RECORD") == "1"

#: The faults fio can be told to show (``FakeFio.fault``).
FAULTS = ("fail", "hang", "killed", "interrupt")


@dataclass(frozen=True)
class Run:
    """One job the fake ran: its text and fio's extra arguments as iolab gave them, its work
    directory, whether it ran fenced, and the fault it showed (None: as recorded)."""

    job_text: str
    extra_args: tuple[str, ...]
    workdir: Path
    fenced: bool
    fault: str | None


@dataclass
class _Fault:
    kind: str
    at: int | None
    matching: str | None
    errno: int
    left: int


@dataclass
class FakeFio:
    """fio replayed from recordings; see the module docstring. ``runs`` are the jobs it ran, in
    order; ``checks`` the texts it was asked to check."""

    module: str
    roots: Mapping[str, str]
    runs: list[Run] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    _faults: list[_Fault] = field(default_factory=list)
    _real: dict[str, Callable[..., Any]] = field(default_factory=dict)
    known: dict[str, Any] = field(default_factory=dict)

    # --- what a test tells it ---------------------------------------------------------------

    def fault(self, kind: str, *, at: int | None = None, matching: str | None = None, errno: int = 5,
              times: int = 1) -> None:
        """Make fio show ``kind`` (``FAULTS``) at the ``at``-th job from now (0: the next one), or at
        jobs whose text contains ``matching``, ``times`` times. ``fail``: fio reports ``errno``
        (default EIO) for the first job of the file and exits 1. ``hang``: fio never ends; iolab
        stops it when its time bound has passed (a job without one hangs the test: an error).
        ``killed``: fio dies of SIGKILL after its first status report. ``interrupt``: Ctrl-C while
        fio runs (iolab stops fio and raises ``KeyboardInterrupt``)."""
        assert kind in FAULTS, kind
        self._faults.append(_Fault(kind, None if at is None else len(self.runs) + at, matching, errno, times))

    # --- installed in place of fio -----------------------------------------------------------

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeFio:
        """Put the fake in place of every fio process and bubblewrap's probe (see the module
        docstring); the option names come from the recording of ``fio --cmdhelp``."""
        self._real = {"run": local.run, "check_job": local.check_job, "collect": local.collect}
        machine = json.loads(MACHINE.read_text())
        monkeypatch.setattr(local, "run", self.run)
        monkeypatch.setattr(local, "check_job", self.check_job)
        def fio_version(fio: str = "fio") -> str:
            local.find_fio(fio)  # raises FioNotFound as the real one does
            return str(machine["fio_version"])
        monkeypatch.setattr(local, "fio_version", fio_version)
        monkeypatch.setattr(host_facts, "fio_version", lambda fio="fio": _found(fio) and machine["fio_version"])
        status = fence_mod.Status(**machine["fence"])
        monkeypatch.setattr(fence_mod, "status", lambda bwrap="bwrap": status)
        self.known = {"options": set(machine["options"]), "aliases": dict(machine["aliases"]),
                      "engines": dict(machine["engines"]), "file": "", "fio": "fio"}
        monkeypatch.setattr(optionnames, "_cache", {"fio": self.known})
        monkeypatch.setattr(optionnames, "_save", lambda known: None)  # ``finish`` keeps what fio was asked
        if not RECORD:
            monkeypatch.setattr(optionnames, "_alias_of", lambda name, fio: _not_recorded(f"--cmdhelp={name}"))
            monkeypatch.setattr(optionnames, "_engine_options", lambda name, fio: _not_recorded(f"--enghelp={name}"))
        return self

    def finish(self) -> None:
        """After the test: in record mode, the option names fio was asked about join ``machine.json``
        (merged under a lock and written whole: other processes record at the same time)."""
        if not RECORD or not self.known:
            return
        with open(MACHINE.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            machine = json.loads(MACHINE.read_text())
            merged = {"aliases": {**machine["aliases"], **self.known["aliases"]},
                      "engines": {**machine["engines"], **self.known["engines"]}}
            if merged != {"aliases": machine["aliases"], "engines": machine["engines"]}:
                machine.update({key: dict(sorted(value.items())) for key, value in merged.items()})
                tmp = MACHINE.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(machine, indent=1, sort_keys=True) + "\n")
                tmp.replace(MACHINE)

    def run(self, job_text: str, workdir: Path, on_status: Callable[[Status], None] | None = None,
            fio: str = "fio", extra_args: Sequence[str] = (), timeout_s: float | None = None,
            cwd: Path | None = None, fence: fence_mod.Fence | None = None) -> Outcome:
        """``runner.local.run``, replayed (its docstring says what it does)."""
        fault = self._fault_for(job_text)
        workdir, command = local.prepare(job_text, workdir, local.find_fio(fio), extra_args)
        self.runs.append(Run(job_text, tuple(extra_args), workdir, fence is not None, fault.kind if fault else None))
        recording = self._recording("run", job_text, extra_args, workdir,
                                    make=lambda: self._record_run(job_text, workdir, fio, extra_args, cwd, fence))
        started = datetime.now(UTC)
        returncode = self._replay(recording, workdir, fault, on_status, fence)
        if fault is not None and fault.kind == "hang" and timeout_s is None:
            raise AssertionError("fio was told to hang, and iolab gave it no time bound: the run would hang")
        if fault is not None and fault.kind == "interrupt":
            raise KeyboardInterrupt
        return local.collect(job_text, workdir, command, returncode, started, datetime.now(UTC),
                             timed_out=fault is not None and fault.kind == "hang", fence=fence)

    def check_job(self, job_text: str, workdir: Path, fio: str = "fio",
                  fence: fence_mod.Fence | None = None) -> str | None:
        """``runner.local.check_job`` (``fio --parse-only``), replayed."""
        local.find_fio(fio)
        self.checks.append(job_text)
        recording = self._recording("check", job_text, (), workdir,
                                    make=lambda: {"verdict": self._real["check_job"](job_text, workdir, fio, fence)})
        verdict = recording["verdict"]
        return None if verdict is None else self._unplace(verdict, workdir)

    # --- replaying ----------------------------------------------------------------------------

    def _replay(self, recording: Mapping[str, Any], workdir: Path, fault: _Fault | None,
                on_status: Callable[[Status], None] | None, fence: fence_mod.Fence | None = None) -> int:
        """Leave what the recorded fio left (as ``fault`` changes it); returns fio's exit status."""
        files = {name: self._unplace_any(_decode(content), workdir) for name, content in recording["workdir"].items()}
        output = files.get(local.OUTPUT_NAME, "")
        output = _moved_to_now(output)
        returncode = recording["returncode"]
        if fault is not None and fault.kind != "interrupt":
            output, returncode, files = _faulty(fault, output, returncode, files)
        files[local.OUTPUT_NAME] = output
        for name, content in files.items():
            path = workdir / name
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        for name, size in recording["created"].items():
            path = Path(_host_path(self._unplace(name, workdir), fence))
            if size is None:
                path.mkdir(parents=True, exist_ok=True)
            elif not path.exists() or path.stat().st_size < size:  # fio leaves a large enough file as it is
                with open(path, "ab") as f:
                    f.truncate(size)
        for name in recording["removed"]:
            Path(_host_path(self._unplace(name, workdir), fence)).unlink(missing_ok=True)
        if on_status is not None:
            reports = StatusStream().feed(output)
            for status in reports[:-1] if len(reports) > 1 else reports:  # the last one is the final report
                on_status(status)
        return int(returncode)

    def _fault_for(self, job_text: str) -> _Fault | None:
        for fault in self._faults:
            if fault.left and (fault.at == len(self.runs) if fault.at is not None else
                               fault.matching is not None and fault.matching in job_text):
                fault.left -= 1
                if fault.at is not None:
                    fault.at += 1
                return fault
        return None

    # --- recordings ---------------------------------------------------------------------------

    def _recording(self, kind: str, job_text: str, extra_args: Sequence[str], workdir: Path,
                   make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        job, args = self._place(job_text, workdir), [self._place(a, workdir) for a in extra_args]
        key = hashlib.sha256(json.dumps([kind, job, args]).encode()).hexdigest()[:20]
        with _lock:  # fio's checks of a plan come from several threads at once
            return self._recorded(kind, key, job, args, job_text, workdir, make)

    def _recorded(self, kind: str, key: str, job: str, args: list[str], job_text: str, workdir: Path,
                  make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        found = _every_book().get(key)
        if found is not None:
            return found
        if not RECORD:
            pytest.fail(f"no recording of this fio {kind} (key {key}); run the test once with IOLAB_RECORD=1 to "
                        f"record it with real fio, then commit {_book_path(self.module).relative_to(TESTS)}\n"
                        f"{job_text}", pytrace=False)
        entry = {"kind": kind, "key": key, "job": job, "args": args, **self._placed(make(), workdir)}
        book = _book(self.module)
        book[key] = _every_book()[key] = entry
        _save(self.module, book)
        return entry

    def _record_run(self, job_text: str, workdir: Path, fio: str, extra_args: Sequence[str], cwd: Path | None,
                    fence: fence_mod.Fence | None) -> dict[str, Any]:
        """Run the job with real fio, as iolab would, and note what it left."""
        watched = [Path(p) for p in dict.fromkeys(self.roots) if os.path.isdir(p)]
        before = _seen_by_fio(_sizes(watched, workdir), fence)
        exits: list[int] = []

        def collect(*args: Any, **kwargs: Any) -> Outcome:
            exits.append(args[3])  # fio's exit status, which the outcome does not keep
            return self._real["collect"](*args, **kwargs)
        started = time.monotonic()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(local, "collect", collect)
            self._real["run"](job_text, workdir, fio=fio, extra_args=extra_args, cwd=cwd, fence=fence)
        elapsed = time.monotonic() - started
        after = _seen_by_fio(_sizes(watched, workdir), fence)
        left = {p.name: _encode(p) for p in sorted(workdir.iterdir()) if p.is_file() and p.name != "job.fio"}
        return {"returncode": exits[0], "seconds": round(elapsed, 3), "workdir": left,
                "created": {p: s for p, s in after.items() if before.get(p, -1) != s},
                "removed": sorted(set(before) - set(after)),
                "made": f"fio {local.fio_version(fio)}, {datetime.now(UTC):%Y-%m-%d}, IOLAB_RECORD=1"}

    def _place(self, text: str, workdir: Path) -> str:
        for path, mark in sorted({str(workdir): "@WORK@", **self.roots}.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(path, mark)
        return text

    def _unplace(self, text: str, workdir: Path) -> str:
        for path, mark in {str(workdir): "@WORK@", **self.roots}.items():
            text = text.replace(mark, path)
        return text

    def _unplace_any(self, content: str | bytes, workdir: Path) -> str | bytes:
        """Text with its placeholders replaced; a binary file (a verify state) as it was recorded."""
        return content if isinstance(content, bytes) else self._unplace(content, workdir)

    def _placed(self, made: dict[str, Any], workdir: Path) -> dict[str, Any]:
        return json.loads(self._place(json.dumps(made), workdir))


def _views(fence: fence_mod.Fence | None) -> list[tuple[str, str]]:
    """The directories fio sees as iolab's own in ``fence`` (``runner.stage``): (as fio sees it, where it
    is on this machine), the deepest first. fio's files there land in iolab's directory."""
    found = [(dest, os.readlink(f"/proc/self/fd/{fd}")) for fd, dest in (fence.fd_binds if fence else ())
             if os.path.isdir(dest)]
    return sorted(found, key=lambda v: -len(v[0]))


def _host_path(path: str, fence: fence_mod.Fence | None) -> str:
    """Where a file fio writes at ``path`` lands on this machine (in iolab's directory, in a view)."""
    for seen, host in _views(fence):
        if path.startswith(seen + "/"):
            return host + path[len(seen):]
    return path


def _seen_by_fio(sizes: dict[str, int | None], fence: fence_mod.Fence | None) -> dict[str, int | None]:
    """``sizes`` of files on this machine as fio saw them: those in iolab's directories at their
    paths in the views (over the reservations there), iolab's directories themselves left out."""
    out = dict(sizes)
    for seen, host in _views(fence):
        out.pop(host, None)
        for path, size in sizes.items():
            if path.startswith(host + "/"):
                out.pop(path, None)
                out[seen + path[len(host):]] = size
    return out


def _found(fio: str) -> bool:
    try:
        local.find_fio(fio)
    except FioNotFound:
        return False
    return True


def _not_recorded(question: str) -> Any:
    pytest.fail(f"iolab asked `fio {question}`, which {MACHINE.name} does not hold: run the test once with "
                "IOLAB_RECORD=1 to ask real fio and record the answer", pytrace=False)


# --- the books of recordings, one per test file, looked up as one -------------------------------

_books: dict[str, dict[str, dict[str, Any]]] = {}
_all: dict[str, dict[str, Any]] = {}
_lock = threading.Lock()


def _book_path(module: str) -> Path:
    return RECORDINGS / f"{module}.jsonl.xz"


def _read(path: Path) -> dict[str, dict[str, Any]]:
    entries = [json.loads(line) for line in lzma.decompress(path.read_bytes()).decode().splitlines()]
    return {e["key"]: e for e in entries}


def _every_book() -> dict[str, dict[str, Any]]:
    """Every recording of every test file, by key: a job recorded by one test file replays in another
    (a session's shared fixture runs its jobs for whichever test asks first)."""
    if not _all:
        for path in sorted(RECORDINGS.rglob("*.jsonl.xz")):
            _all.update(_read(path))
    return _all


def _book(module: str) -> dict[str, dict[str, Any]]:
    if module not in _books:
        path = _book_path(module)
        _books[module] = _read(path) if path.exists() else {}
    return _books[module]


def _save(module: str, book: Mapping[str, Mapping[str, Any]]) -> None:
    path = _book_path(module)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(e, sort_keys=True) + "\n" for e in sorted(book.values(), key=lambda e: e["key"]))
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(lzma.compress(text.encode(), preset=9 | lzma.PRESET_EXTREME))
    tmp.replace(path)


def _sizes(roots: Sequence[Path], workdir: Path) -> dict[str, int | None]:
    """Every file (its size) and directory (None) under ``roots``, but fio's work directory and
    iolab's databases."""
    found: dict[str, int | None] = {}
    for root in roots:
        for top, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if os.path.join(top, d) != str(workdir)]
            for d in dirs:
                found[os.path.join(top, d)] = None
            for name in files:
                path = os.path.join(top, name)
                if ".db" not in name and not os.path.islink(path):
                    with contextlib.suppress(OSError):
                        found[path] = os.stat(path).st_size
    return found


def _encode(path: Path) -> str | dict[str, str]:
    data = path.read_bytes()
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def _decode(content: str | Mapping[str, str]) -> Any:
    return content if isinstance(content, str) else base64.b64decode(content["base64"])


_STAMP = re.compile(r'"(timestamp_ms|timestamp)" : (\d+)')


def _moved_to_now(output: str) -> str:
    """fio's reports with their timestamps moved so that the last one was written now."""
    stamps = [int(m.group(2)) for m in _STAMP.finditer(output) if m.group(1) == "timestamp_ms"]
    if not stamps:
        return output
    shift_ms = int(time.time() * 1000) - max(stamps)

    def moved(m: re.Match[str]) -> str:
        value = int(m.group(2)) + (shift_ms if m.group(1) == "timestamp_ms" else round(shift_ms / 1000))
        return f'"{m.group(1)}" : {value}'
    return _STAMP.sub(moved, output)


def _first_report(output: str) -> str:
    end = output.find("\n}\n")
    return output[: end + 3] if end >= 0 else ""


def _faulty(fault: _Fault, output: str, returncode: int, files: dict[str, Any]) -> tuple[str, int, dict[str, Any]]:
    """fio's output, exit status and files as ``fault`` leaves them."""
    if fault.kind == "fail":
        doc_start = output.rfind("\n{\n") + 1
        final = json.loads(output[doc_start:])
        job = final["jobs"][0]
        job["error"] = fault.errno
        name = job["jobname"]
        files["fio.stderr"] = (files.get("fio.stderr") or "") + (
            f"fio: io_u error on file {name}.0.0: {os.strerror(fault.errno)}: read offset=0, buflen=4096\n"
            f"fio: pid=4242, err={fault.errno}/file:io_u.c:1889, func=io_u error, "
            f"error={os.strerror(fault.errno)}\n")
        return output[:doc_start] + json.dumps(final, indent=2) + "\n", 1, files
    cut = _first_report(output)
    if fault.kind == "killed":
        return cut, -9, files
    return cut, -2, files  # hang: stopped with SIGINT past the time bound


def record_machine() -> None:
    """Write ``machine.json`` from this machine's real fio and bubblewrap (``python
    tests/support/fakefio.py``): fio's version, the fence's probe, fio's option names (``--cmdhelp``)
    and the aliases and engines asked so far, kept."""
    old = json.loads(MACHINE.read_text()) if MACHINE.exists() else {"aliases": {}, "engines": {}}
    status = fence_mod.status()
    machine = {"fio_version": local.fio_version(), "options": sorted(optionnames._main_options("fio")),
               "fence": {"tool": status.tool, "reason": status.reason, "landlock": status.landlock,
                         "own_network": status.own_network},
               "aliases": old["aliases"], "engines": old["engines"]}
    MACHINE.parent.mkdir(parents=True, exist_ok=True)
    MACHINE.write_text(json.dumps(machine, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    record_machine()


@contextlib.contextmanager
def replayed(module: str, roots: Mapping[str, str]) -> Iterator[FakeFio]:
    """The fake installed for as long as the block lasts, outside any test's ``monkeypatch``: for a
    module- or session-scoped fixture of the fast tier that runs jobs once for many tests (its
    recordings go to the book of ``module``; ``roots`` are its directories and their placeholders,
    e.g. ``{str(tmp_path_factory.getbasetemp()): "@BASE@"}``)."""
    with pytest.MonkeyPatch.context() as patch:
        fake = FakeFio(module, roots).install(patch)
        yield fake
        fake.finish()
