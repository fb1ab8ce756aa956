"""`iolab lint`: its JSON, its text and its exit codes (fio's checks replayed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inprocess import iolab
from iolab.facts import idle
from iolab.model import IdleState
from iolab.run import tuning

HALTPOLL = (IdleState("POLL", 0, 0), IdleState("haltpoll idle", 1, 1))


def _idle_host(monkeypatch: pytest.MonkeyPatch, states: tuple[IdleState, ...] | None, limit_us: int | None) -> None:
    """This machine's idle facts as ``states`` and ``limit_us`` (``facts.idle``, which ``host_facts`` asks)."""
    monkeypatch.setattr(idle, "states", lambda root="/", cpu=0: states)
    monkeypatch.setattr(idle, "driver", lambda root="/": "haltpoll" if states else None)
    monkeypatch.setattr(idle, "latency_limit_us", lambda root="/", path=None: limit_us)


def test_lint_cli_json_and_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _idle_host(monkeypatch, None, None)  # no cpuidle: P15's idle states have nothing to say
    good = tmp_path / "good.fio"
    good.write_text("[j]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\niodepth=8\nsize=16m\ntime_based\n"
                    "runtime=120s\nramp_time=10s\nrandrepeat=0\n")
    db = tmp_path / "db.sqlite"
    proc = iolab("lint", str(good), "--target", f"d={tmp_path}/f.bin", "--format", "json", db=db)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "iolab.lint/1" and doc["suite"] == "good" and {f["id"] for f in doc["findings"]} == {"P1"}
    bad = tmp_path / "bad.fio"
    bad.write_text("[j]\nrw=randwrite\nverify=md5\nnorandommap\nioengine=libaio\niodepth=16\nsize=16m\n")
    proc = iolab("lint", str(bad), "--target", f"d={tmp_path}/f.bin", db=db)
    assert proc.returncode == 0, proc.stdout  # warnings only
    assert "P14 warning" in proc.stdout and "Remedy: drop norandommap" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_idle_states_warned_with_the_remedy_and_silenced_by_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a host whose idle CPUs may enter a state with an exit latency (haltpoll), a 4k job gets P15 with
    the remedy; the remedy on the command line (a stand-in latency device iolab may hold) silences it, as
    does a limit some other process already holds."""
    _idle_host(monkeypatch, HALTPOLL, idle.NO_LIMIT_US)
    job = tmp_path / "qd8.fio"
    job.write_text("[qd8]\nioengine=io_uring\ndirect=1\nrw=randread\nbs=4k\niodepth=8\nsize=16m\ntime_based\n"
                   "runtime=120s\nramp_time=10s\nrandrepeat=0\n")
    db, target = tmp_path / "db.sqlite", f"d={tmp_path}/f.bin"
    proc = iolab("lint", str(job), "--target", target, db=db)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "P15 warning qd8 on d idle CPUs may enter states with exit latencies (haltpoll idle 1 µs; cpuidle " \
           "driver haltpoll) and no CPU latency limit is held" in text
    assert "Remedy: tune: {cpu_dma_latency: 0} (or --tune cpu_dma_latency=0) holds idle CPUs in states without " \
           "exit latency for the run" in text
    lines = proc.stdout.splitlines()[1:]
    assert not [line for line in lines if line and not line.startswith("  ")]  # wrapped under its indent
    pm_qos = tmp_path / "cpu_dma_latency"
    pm_qos.write_bytes(b"\0\0\0\0")
    monkeypatch.setattr(tuning, "PM_QOS", str(pm_qos))
    tuned = iolab("lint", str(job), "--target", target, "--tune", "cpu_dma_latency=0", "--format", "json", db=db)
    assert tuned.returncode == 0, tuned.stderr
    assert "P15" not in {f["id"] for f in json.loads(tuned.stdout)["findings"]}
    _idle_host(monkeypatch, HALTPOLL, 0)  # tuned's latency-performance profile holds 0 already
    held = iolab("lint", str(job), "--target", target, "--format", "json", db=db)
    assert "P15" not in {f["id"] for f in json.loads(held.stdout)["findings"]}
