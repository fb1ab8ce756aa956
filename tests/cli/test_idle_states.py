"""CPU idle states as iolab's commands show them, and `--tune cpu_dma_latency=N` held for a job: on
this machine's idle facts made known (``facts.idle`` answering for a haltpoll host) and a stand-in for
``/dev/cpu_dma_latency`` (a file the test reads), fio replayed. The real device, held during a real
fio run and released after it, also after kill -9: tests/integration/test_cpu_latency.py."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from inprocess import iolab
from iolab.facts import idle
from iolab.model import IdleState
from iolab.run import tuning
from iolab.runner import local

HALTPOLL = (IdleState("POLL", 0, 0), IdleState("haltpoll idle", 1, 1))
JOB = ("[qd8]\nioengine=io_uring\ndirect=1\nrw=randread\nbs=4k\niodepth=8\nsize=16m\ntime_based\nruntime=1s\n"
       "randrepeat=0\n")


@pytest.fixture
def pm_qos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A haltpoll host: its idle facts, and a stand-in latency device with no request held."""
    path = tmp_path / "cpu_dma_latency"
    path.write_bytes(struct.pack("=i", idle.NO_LIMIT_US))
    monkeypatch.setattr(tuning, "PM_QOS", str(path))
    monkeypatch.setattr(idle, "states", lambda root="/", cpu=0: HALTPOLL)
    monkeypatch.setattr(idle, "driver", lambda root="/": "haltpoll")
    monkeypatch.setattr(idle, "governor", lambda root="/": "haltpoll")
    read = idle.latency_limit_us
    monkeypatch.setattr(idle, "latency_limit_us", lambda root="/", path=None: read(path=path or tuning.PM_QOS))
    return path


def _held(path: Path) -> list[int]:
    """This process's file descriptors open on ``path`` (in-process, iolab's are the test's)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                found.append(int(fd))
        except OSError:
            pass
    return found


def test_host_shows_the_idle_states_and_the_limit(tmp_path: Path, pm_qos: Path) -> None:
    proc = iolab("host", db=tmp_path / "db.sqlite")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: " ".join(line.split()[1:]) for line in proc.stdout.splitlines() if line.strip()}
    assert rows["host.cpuidle_driver"] == "haltpoll" and rows["host.cpuidle_governor"] == "haltpoll"
    assert rows["host.idle_states"] == "POLL (exit 0 µs, residency 0 µs), haltpoll idle (exit 1 µs, residency 1 µs)"
    assert rows["host.cpu_dma_latency_us"] == "none held (2000000000 µs)"
    doc = json.loads(iolab("host", "--format", "json", db=tmp_path / "db.sqlite").stdout)["host"]
    assert doc["idle_states"][1] == {"name": "haltpoll idle", "exit_latency_us": 1, "residency_us": 1,
                                     "disabled": False}
    assert doc["cpu_dma_latency_us"] == 2_000_000_000


def test_a_run_holds_the_request_during_the_job_and_compare_names_it(tmp_path: Path, pm_qos: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`--tune cpu_dma_latency=0`: while fio runs the request is held (the device's value 0, its file
    open), after the job it is released; the value in force is stored with the result, and `compare`
    of the run as it is against the held one lists the limit among the environment's differences."""
    job = tmp_path / "qd8.fio"
    job.write_text(JOB)
    db, target = tmp_path / "db.sqlite", f"d={tmp_path}/f.bin"
    during: list[tuple[int, int]] = []
    replayed = local.run

    def watched(*args, **kwargs):  # type: ignore[no-untyped-def]
        during.append((struct.unpack("=i", pm_qos.read_bytes())[0], len(_held(pm_qos))))
        return replayed(*args, **kwargs)

    monkeypatch.setattr(local, "run", watched)
    as_is = iolab("run", str(job), "--target", target, "--label", "as-is", db=db, cwd=tmp_path)
    assert as_is.returncode == 0, as_is.stderr
    held = iolab("run", str(job), "--target", target, "--label", "held", "--tune", "cpu_dma_latency=0", db=db,
                 cwd=tmp_path)
    assert held.returncode == 0, held.stderr
    assert during == [(idle.NO_LIMIT_US, 0), (0, 1)]  # as it is, then held at 0 by iolab's open file
    assert _held(pm_qos) == []  # released after the job
    (result,) = json.loads(iolab("show", "held", "--format", "json", db=db).stdout)["results"]
    assert result["params"]["tune.cpu_dma_latency"] == "0"
    assert result["extra"]["tuning"]["requested"] == {"cpu_dma_latency": "0"}
    assert result["extra"]["tuning"]["in_force"]["cpu_dma_latency"] == "0"  # read back while held
    assert "tuning cpu_dma_latency=0: d/qd8" in iolab("show", "held", db=db).stdout
    compared = json.loads(iolab("compare", "as-is", "held", "--ignore", "tune.cpu_dma_latency", "--format", "json",
                                db=db).stdout)
    env = {e["item"]: (e["a"], e["b"]) for e in compared["comparisons"][0]["environment"]}
    assert env["CPU latency limit (cpu_dma_latency)"] == ("none held (2000000000 µs)", "0 µs")
    text = iolab("compare", "as-is", "held", "--ignore", "tune.cpu_dma_latency", db=db).stdout
    assert "CPU latency limit (cpu_dma_latency)" in text


def test_a_value_the_plan_cannot_hold_is_refused_before_fio(tmp_path: Path, pm_qos: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    job = tmp_path / "qd8.fio"
    job.write_text(JOB)
    bad = iolab("run", str(job), "--target", f"d={tmp_path}/f.bin", "--tune", "cpu_dma_latency=-1",
                db=tmp_path / "db.sqlite")
    assert bad.returncode == 2 and "cpu_dma_latency: expected a whole number of microseconds" in bad.stderr
    monkeypatch.setattr(tuning, "PM_QOS", str(tmp_path / "missing"))
    gone = iolab("run", str(job), "--target", f"d={tmp_path}/f.bin", "--tune", "cpu_dma_latency=0",
                 db=tmp_path / "db.sqlite")
    assert gone.returncode == 2 and f"cpu_dma_latency: cpus has no {tmp_path / 'missing'}" in gone.stderr
