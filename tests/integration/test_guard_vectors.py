"""Every way of naming a device the issue found (issue 19), tried with `iolab` on real fio and loop devices.

A victim loop device carries ext4; each vector names it some other way than ``filename=/dev/loopN``
and the run must refuse (or fail the job), with the victim's md5 unchanged. A blank loop device
named with --destroy is the legitimate target where a vector needs one. The same vectors in-process on
a character device (the fast tier): tests/cli/test_guard_vectors.py; a remote device's spellings:
tests/unit/check/test_remote_devices.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from clirun import iolab
from iolab.check import guard
from iolab.describe import suite
from iolab.run import execute
from iolab.run.plan import RunOptions, prepare
from iolab.runner import fence, marks
from iolab.store.database import Store
from loopdev import MiB, loop_device, requires_loop

pytestmark = requires_loop


@pytest.fixture(autouse=True)
def _own_state(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """iolab's state (spool, marks, tuning journal) in a directory of this test's, for the iolab it
    runs in-process and in subprocesses: the tests run in parallel."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


def md5(path: str) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(victim with ext4, blank device)."""
    tmp = tmp_path_factory.mktemp("devices")
    with loop_device(tmp, 16 * MiB, "victim.img") as victim, loop_device(tmp, 16 * MiB, "blank.img") as blank:
        victim.make_ext4()
        yield victim.path, blank.path


W = "rw=write\nsize=1m\nbs=64k\n"
#: (id, files to write {name: text}, iolab arguments, environment); {V} victim, {B} blank, {T} the test's directory.
VECTORS = [
    ("directory=/dev + filename", {"j.fio": "[j]\ndirectory=/dev\nfilename={v}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("second job names the device", {"j.fio": "[a]\n" + W + "[b]\nfilename={V}\n" + W},
     ["run", "{T}/j.fio", "--target", "blank={B}", "--destroy", "{B}"], {}),
    ("filename_format", {"j.fio": "[j]\nfilename_format={V}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("${DEV} from the environment", {"j.fio": "[j]\nfilename=${{DEV}}\n" + W}, ["run", "{T}/j.fio"], {"DEV": "{V}"}),
    ("include=other.fio", {"j.fio": "[j]\nrw=read\nsize=1m\ninclude=other.fio\n",
                           "other.fio": "[inc]\nfilename={V}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("include other.fio at the top", {"j.fio": "include other.fio\n", "other.fio": "[inc]\nfilename={V}\n" + W},
     ["run", "{T}/j.fio"], {}),
    ("exec_prerun dd", {"j.fio": "[j]\nfilename={T}/f\nrw=read\nsize=1m\nexec_prerun=dd if=/dev/zero of={V} bs=4k "
                                 "count=16\n"}, ["run", "{T}/j.fio"], {}),
    ("ioengine=external", {"j.fio": "[j]\nfilename={T}/f\nrw=read\nsize=1m\nioengine=external:/tmp/x.so\n"},
     ["run", "{T}/j.fio"], {}),
    ("newline in a suite value", {"s.yaml": 'targets: {{t: {T}/f}}\nworkloads:\n  - {{rw: write, size: 1m, '
                                            'description: "x\\nfilename={V}"}}\n'}, ["run", "{T}/s.yaml"], {}),
    ("newline in a CLI option", {}, ["saturate", "-t", "t={T}/f", "size=1m", "description=x\nfilename={V}"], {}),
    ("newline in --target", {}, ["run", "quick", "--target", "t={T}/f\nfilename={V}"], {}),
    ("[global2] section", {"j.fio": "[global2]\nfilename={V}\n[j]\n" + W}, ["run", "{T}/j.fio"], {}),
    ("repeated filename=", {"j.fio": "[j]\nfilename={T}/f\nfilename={V}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("global files added to every job", {"j.fio": "[global]\nfilename={V}\n[j]\nfilename={T}/f\n" + W},
     ["run", "{T}/j.fio"], {}),
    ("\\: escapes in a filename list", {"j.fio": "[j]\nfilename={T}/a\\:b:{V}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("section named after the device", {"j.fio": "[{V}]\n" + W}, ["run", "{T}/j.fio"], {}),
    ("symlink to the device", {"j.fio": "[j]\nfilename={T}/link\n" + W}, ["run", "{T}/j.fio"], {"link": "1"}),
    ("/proc/self/root/dev/...", {"j.fio": "[j]\nfilename=/proc/self/root{V}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("//dev/loopN", {"j.fio": "[j]\nfilename=/{V}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("replay_redirect", {"j.fio": "[j]\nread_iolog={T}/log\nreplay_redirect={V}\n",
                         "log": "fio version 2 iolog\n{T}/f add\n{T}/f open\n{T}/f write 0 4096\n{T}/f close\n"},
     ["run", "{T}/j.fio"], {}),
    ("file names inside an iolog", {"j.fio": "[j]\nread_iolog={T}/log\n",
                                    "log": "fio version 2 iolog\n{V} add\n{V} open\n{V} write 0 4096\n{V} close\n"},
     ["run", "{T}/j.fio"], {}),
    ("write_iolog onto the device", {"j.fio": "[j]\nfilename={T}/f\nrw=read\nsize=1m\nwrite_iolog={V}\n"},
     ["run", "{T}/j.fio"], {}),
    ("character device without --destroy", {}, ["run", "{T}/s.yaml"], {"chardev": "1"}),
]


def _fill(text: str, tmp: Path, victim: str, blank: str) -> str:
    return text.format(V=victim, B=blank, T=tmp, v=os.path.basename(victim))


@pytest.mark.parametrize(("files", "args", "env"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS])
def test_vector_leaves_the_device_unchanged(tmp_path: Path, devices: tuple[str, str], files: dict[str, str],
                                            args: list[str], env: dict[str, str]) -> None:
    victim, blank = devices
    (tmp_path / "f").write_bytes(b"\0" * MiB)
    marks.mark(str(tmp_path / "f"))  # iolab's own: writable, so the device is what each vector must be refused for
    for name, text in files.items():
        (tmp_path / name).write_text(_fill(text, tmp_path, victim, blank))
    if env.pop("link", None):
        (tmp_path / "link").symlink_to(victim)
    if env.pop("chardev", None):
        (tmp_path / "s.yaml").write_text("targets: {nul: /dev/null}\nworkloads:\n  - {rw: write, size: 1m}\n")
    before = md5(victim)
    proc = iolab(*(_fill(a, tmp_path, victim, blank) for a in args), "--no-observe" if args[0] == "run" else "--repeat",
                 *(["1"] if args[0] != "run" else []), db=tmp_path / "db.sqlite", cwd=tmp_path,
                 env={k: _fill(v, tmp_path, victim, blank) for k, v in env.items()}, timeout=120)
    assert md5(victim) == before
    assert proc.returncode in (1, 2), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    said = proc.stderr
    assert (("refusing to write to" in said and victim in said) or "control character" in said
            or "--allow-exec" in said or "which is a device" in said or "/dev/null" in said
            or "the kernel's interface" in said), said


def test_exec_allowed_runs_inside_the_fence(tmp_path: Path, devices: tuple[str, str]) -> None:
    """With --allow-exec the program runs, fenced: its write to the device is stopped and the job
    fails naming the device, the run goes on, and no result is stored for it."""
    victim, _ = devices
    (tmp_path / "f").write_bytes(b"\0" * MiB)
    (tmp_path / "j.fio").write_text(f"[j]\nfilename={tmp_path}/f\nrw=read\nsize=1m\n"
                                    f"exec_prerun=dd if=/dev/zero of={victim} bs=4k count=16\n")
    before = md5(victim)
    proc = iolab("run", str(tmp_path / "j.fio"), "--allow-exec", "--no-observe", db=tmp_path / "db.sqlite",
                 cwd=tmp_path)
    assert md5(victim) == before
    assert proc.returncode == 1, proc.stderr
    (result,) = Store(f"sqlite:///{tmp_path}/db.sqlite").get_run(1).results
    assert result.status == "failed" and result.report is None
    assert result.error is not None and result.error.startswith(f"fio tried to write {victim}, which this run does "
                                                                "not name; nothing was written there")


def test_resume_checks_the_job_files_own_devices_again(tmp_path: Path, devices: tuple[str, str]) -> None:
    """A run planned on a blank device (its own filename=) is resumed after the device got a filesystem."""
    _, blank = devices
    (tmp_path / "j.fio").write_text(f"[j]\nfilename={blank}\n{W}")
    options = RunOptions(destroy=(blank,))
    plan = prepare(suite.load(str(tmp_path / "j.fio")), options)
    store = Store(f"sqlite:///{tmp_path}/db.sqlite")
    run_id = execute.start(store, plan, options)
    os.system(f"mkfs.ext4 -q -F {blank}")
    try:
        before = md5(blank)
        proc = iolab("run", "--resume", str(run_id), "--destroy", blank, db=tmp_path / "db.sqlite", cwd=tmp_path)
        assert proc.returncode == 2  # a refusal: the exit code of usage and safety errors
        assert f"refusing to write to {blank}: it carries an ext4 filesystem signature" in proc.stderr
        assert md5(blank) == before
    finally:
        os.system(f"wipefs -q -a {blank} >/dev/null")


def test_the_fence_alone_stops_the_write(tmp_path: Path, devices: tuple[str, str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The static guard disabled (it sees only the target, as a guard that missed the job's own file
    would): fio runs, the fence stops its write to the victim, the job fails naming the device, the
    suite goes on to its next job, and nothing of the stopped job is stored as a result."""
    victim, _ = devices
    (tmp_path / "j.fio").write_text(f"[a]\nfilename={victim}\n{W}")
    (tmp_path / "k.fio").write_text(f"[k]\nfilename={tmp_path}/g\n{W}")
    monkeypatch.setattr(guard, "check", lambda text, target, *a, **k: guard.Checked(  # the files each job names
        writable={target or str(tmp_path): fence.DESTROY, str(tmp_path / "g"): fence.NEW}, writes=True))
    loaded = suite.load(str(tmp_path / "j.fio"))
    second = suite.load(str(tmp_path / "k.fio")).workloads[0]
    loaded = dataclasses.replace(loaded, workloads=(*loaded.workloads, second))
    options = RunOptions()
    before = md5(victim)
    plan = prepare(loaded, options)
    store = Store(f"sqlite:///{tmp_path}/db.sqlite")
    run_id = execute.start(store, plan, options)
    status = execute.execute(store, run_id, options)
    assert md5(victim) == before
    assert status == "failed"
    stopped, ok = store.get_run(run_id).results
    assert stopped.status == "failed" and stopped.report is None
    assert stopped.error is not None
    assert stopped.error.startswith(f"fio tried to write {victim}, which this run does not name; nothing was "
                                    "written there"), stopped.error
    assert ok.status == "ok" and ok.report is not None  # the suite went on


def test_a_device_name_that_is_not_a_device_here_is_refused(tmp_path: Path) -> None:
    name = f"/dev/iolab-absent-{os.getpid()}"
    (tmp_path / "j.fio").write_text(f"[j]\nfilename={name}\n{W}")
    proc = iolab("run", str(tmp_path / "j.fio"), "--no-observe", db=tmp_path / "db.sqlite", cwd=tmp_path)
    assert proc.returncode == 2
    assert f"refusing to write to {name}: it names a device that is not on this machine (it is missing)" in proc.stderr
    assert not os.path.exists(name)


def test_a_write_that_lands_in_a_regular_file_where_a_device_was_named_is_a_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unfenced (--no-fence) and with the static guard disabled, fio creates a regular file in /dev
    for a device name that is not there: the job fails, the file is removed, nothing is stored as a
    result."""
    name = f"/dev/iolab-absent-{os.getpid()}"
    (tmp_path / "j.fio").write_text(f"[j]\nfilename={name}\n{W}")
    monkeypatch.setattr(guard, "check", lambda text, target, *a, **k: guard.Checked())
    options = RunOptions(fence=False)
    store = Store(f"sqlite:///{tmp_path}/db.sqlite")
    try:
        run_id = execute.start(store, prepare(suite.load(str(tmp_path / "j.fio")), options), options)
        assert execute.execute(store, run_id, options) == "failed"
        (result,) = store.get_run(run_id).results
        assert result.status == "failed" and result.report is None
        assert result.error == (f"fio wrote a regular file at {name} where the job named a device; that is not a "
                                "measurement of a device (the file is removed)")
        assert not os.path.exists(name)
    finally:
        if os.path.isfile(name):
            os.unlink(name)
