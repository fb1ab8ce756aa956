"""`--tune cpu_dma_latency=0` on this machine's real /dev/cpu_dma_latency with real fio: the request is
held by iolab (an open file, close-on-exec: fio does not hold it) while the job's fio runs, the limit
then in force is 0, and the request is gone after the run, and after iolab is killed with SIGKILL during
the job (the kernel closes a dead process's files). The fast tier's own tests use a stand-in file:
tests/cli/test_idle_states.py, tests/unit/run/test_tuning.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from clirun import iolab, popen
from iolab.facts import idle

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(not os.path.exists("/dev/cpu_dma_latency"), reason="no /dev/cpu_dma_latency")]

DEVICE = "/dev/cpu_dma_latency"
JOB = ("[held]\nioengine=psync\ndirect=0\nrw=randread\nbs=4k\nsize=8m\ntime_based\nruntime={runtime}\n"
       "randrepeat=0\n")


def _holders() -> dict[int, int]:
    """Every process holding /dev/cpu_dma_latency open: pid -> how many of its descriptors."""
    found: dict[int, int] = {}
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == DEVICE:
                    found[pid] = found.get(pid, 0) + 1
            except OSError:
                continue
    return found


def _job_fio(pid: int) -> tuple[int, ...]:
    """The processes under ``pid`` (children's children too) that run the job: fio with its status stream
    (``runner.local``), not ``--parse-only``, ``--version`` or the option-name questions before it."""
    children: dict[int, list[int]] = {}
    for p in (int(x) for x in os.listdir("/proc") if x.isdigit()):
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(p)
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"fio") and b"--status-interval=1" in argv:
            out.append(p)
    return tuple(out)


@dataclass(frozen=True)
class Sample:
    fio: tuple[int, ...]  # iolab's fio running the job (fio's own job processes included)
    iolab_fds: int  # iolab's descriptors on the device
    fio_fds: int  # its fio processes' descriptors on the device
    limit_us: int | None  # the limit in force, read as the kernel gives it


def _sample(pid: int) -> Sample:
    """In this order, so that a request held from before fio starts until after it ends is seen whenever fio
    is: the limit, then who holds the device, then fio."""
    limit = idle.latency_limit_us()
    holders = _holders()
    fio = _job_fio(pid)
    return Sample(fio, holders.get(pid, 0), sum(holders.get(p, 0) for p in fio), limit)


def _released(pid: int) -> None:
    """Nothing of ``pid``'s holds the device, and unless another process on the machine holds a request,
    the limit is the kernel's default again."""
    holders = _holders()
    assert pid not in holders
    if not holders:
        assert idle.latency_limit_us() == idle.NO_LIMIT_US


def _start(tmp_path: Path, runtime: str) -> subprocess.Popen[str]:
    job = tmp_path / "held.fio"
    job.write_text(JOB.format(runtime=runtime))
    proc = popen("run", str(job), "--target", f"d={tmp_path}/f.bin", "--label", "held", "--tune",
                 "cpu_dma_latency=0", db=tmp_path / "db.sqlite", cwd=tmp_path)
    return proc


def test_the_request_is_held_while_fio_runs_and_released_after(tmp_path: Path) -> None:
    proc, samples = _start(tmp_path, "3s"), []
    while proc.poll() is None:
        samples.append(_sample(proc.pid))
        time.sleep(0.02)
    _, err = proc.communicate()
    assert proc.returncode == 0, err
    during = [s for s in samples if s.fio]
    assert len(during) >= 10, samples  # fio ran for 3 s
    # whenever the job's fio runs, iolab holds one request, fio none (close-on-exec), and the limit is 0
    assert all(s.iolab_fds == 1 and s.fio_fds == 0 and s.limit_us == 0 for s in during), during
    assert [s for s in samples if not s.fio and s.iolab_fds == 0]  # before the job: nothing held yet
    _released(proc.pid)
    (result,) = json.loads(iolab("show", "held", "--format", "json", db=tmp_path / "db.sqlite").stdout)["results"]
    assert result["extra"]["tuning"]["requested"] == {"cpu_dma_latency": "0"}
    assert result["extra"]["tuning"]["in_force"]["cpu_dma_latency"] == "0"


def test_a_killed_run_leaves_no_request(tmp_path: Path) -> None:
    """SIGKILL while the job runs: no journal to restore, and none needed: the request went with iolab."""
    proc = _start(tmp_path, "60s")
    deadline = time.monotonic() + 60
    while _sample(proc.pid).iolab_fds != 1:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    fio = _sample(proc.pid).fio
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{p}") for p in fio) and time.monotonic() < deadline:  # fio dies with it
        time.sleep(0.05)
    _released(proc.pid)
    assert not set(fio) & set(_holders())
