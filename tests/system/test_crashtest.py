"""Crash tests end to end: real fio servers in network namespaces writing a loop device with direct
I/O, cut by fio's own triggers, verified by fio. The destructive guard before any of it is
tests/integration/test_crashtest_guard.py's; the workflow's decisions on recorded fio (verdicts, exit
codes, what each phase is told) tests/cli/test_crashtest.py's."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from clirun import iolab, wait_for
from iolab.store.database import Store
from iolab.workflows import crashtest
from iolab.workflows.crashtest import CutVerdict
from loopdev import MiB, loop_device, requires_loop
from netns import Host, lab, requires_netns, requires_sshd, start_sshd

pytestmark = [pytest.mark.root, requires_loop, requires_netns]

#: fio's rate: writes per second, so a snapshot's age says how many acknowledged writes it lacks.
RATE = 500


def crash_doc(db: Path) -> tuple[crashtest.LossRate, list[crashtest.CutOutcome]]:
    run = Store(f"sqlite:///{db}").get_run(1)
    outcomes = crashtest.cut_outcomes(run)
    return crashtest.loss_rate(outcomes), outcomes


@contextmanager
def restarting_server(host: Host, server: subprocess.Popen[bytes]) -> Iterator[list[float]]:
    """Restart the namespace's fio server a second after it dies, as a host coming back after a
    power cut would (a fio server started at boot); yields the times it died."""
    stop, deaths = threading.Event(), []

    def watch() -> None:
        current = server
        while not stop.is_set():
            if current.poll() is None:
                time.sleep(0.05)
                continue
            deaths.append(time.monotonic())
            time.sleep(1.0)
            if not stop.is_set():
                current = host.start_fio_server()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield deaths
    finally:
        stop.set()
        thread.join(10)


@requires_sshd
def test_a_killed_fio_server_loses_nothing_acknowledged(tmp_path):
    """The cut kills the fio server (its whole process group, from fio's --trigger-remote) while it
    writes a loop device with direct I/O: every write fio acknowledged is in the device, and the
    verify phase, run once the server is back, says so for both cuts."""
    db = tmp_path / "db.sqlite"
    with loop_device(tmp_path, 32 * MiB) as loop, lab(1) as (host,):
        server = host.start_fio_server()
        env = start_sshd(host, tmp_path)
        kill = "kill -9 -$(ps -o pgid= -p $PPID | tr -d ' ')"  # fio's system() shell: $PPID is the server
        with restarting_server(host, server) as deaths:
            proc = iolab("crash-test", "-t", f"dev={loop.path}", "--host", host.spec(), "--ssh", "--destroy",
                         loop.path, "size=16m", f"rate_iops={RATE}", "--cuts", "2", "--trigger-timeout", "2s",
                         "--trigger-remote", kill, "--wait-timeout", "30s", db=db, env=env, timeout=180)
        assert proc.returncode == 0, proc.stderr + proc.stdout
        assert len(deaths) == 2
    rate, outcomes = crash_doc(db)
    assert [o.verdict for o in outcomes] == [CutVerdict.INTACT, CutVerdict.INTACT]
    for o in outcomes:
        assert o.issued is not None and o.issued > RATE  # ~2 s of writes at RATE
        assert o.checked is not None and o.issued - 8 <= o.checked <= o.issued and (o.lost, o.corrupt) == (0, 0)
        assert o.waited_s is not None and o.waited_s >= 0.5  # the server was down
    assert (rate.verified, rate.with_loss, rate.rate) == (2, 0, 0.0)
    assert "crash test: cuts" in proc.stdout and "intact" in proc.stdout
    assert "loss rate: 0 of 2 verified cut(s)" in " ".join(proc.stdout.split())
    run = Store(f"sqlite:///{db}").get_run(1)
    assert not [w for w in run.info.warnings if w.startswith(("P4", "P5"))]  # iolab's own phase choices
    writes = [r for r in run.results if r.workload == "crash-write"]
    assert all(r.status == "ok" and r.extra["crash"]["fired"] for r in writes)
    assert all(r.extra["crash"]["fio_status"] != "ok" for r in writes)  # fio lost its server at the cut
    document = json.loads(iolab("show", "1", "--format", "json", db=db).stdout)["crash_test"]
    assert [c["verdict"] for c in document["cuts"]] == ["intact", "intact"]
    assert document["loss_rate"]["ci95"] == pytest.approx([0.0, 0.658], abs=1e-3)


@pytest.mark.serial
@requires_sshd
def test_a_cache_that_forgets_acknowledged_writes_is_caught(tmp_path):
    """A "volatile cache": the cut (fio's trigger file) restores a copy of the loop device's backing
    file taken two seconds earlier, so every write acknowledged since is gone. The verify phase must
    report them as lost, as many as the copy's age implies at fio's write rate (timed against this
    test's clock, with half a second for fio's client to see the trigger file: it runs alone)."""
    db = tmp_path / "db.sqlite"
    snapshot, cut_file = tmp_path / "snapshot.img", tmp_path / "cut"
    with loop_device(tmp_path, 64 * MiB) as loop, lab(1) as (host,):
        host.start_fio_server()
        env = start_sshd(host, tmp_path)
        restore = f"dd if={snapshot} of={loop.backing} bs=1M conv=notrunc status=none"
        times: dict[str, float] = {}

        def cut() -> None:  # once the write phase writes: copy the device a second later, wait 2 s, cut
            wait_for(lambda: _running(db, "crash-write"), 60)
            started = _writes(loop.name)
            wait_for(lambda: _writes(loop.name) > started + 50, 30)
            time.sleep(1.0)
            times["copy_start"] = time.monotonic()
            subprocess.run(["cp", "--reflink=never", str(loop.backing), str(snapshot)], check=True)
            times["copy_end"] = time.monotonic()
            time.sleep(2.0)
            times["cut"] = time.monotonic()
            cut_file.touch()

        thread = threading.Thread(target=cut, daemon=True)
        thread.start()
        proc = iolab("crash-test", "-t", f"dev={loop.path}", "--host", host.spec(), "--ssh", "--destroy", loop.path,
                     "size=32m", f"rate_iops={RATE}", "--trigger-file", str(cut_file), "--trigger-remote", restore,
                     db=db, env=env, timeout=180)
        thread.join(10)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    rate, (outcome,) = crash_doc(db)
    assert outcome.verdict == CutVerdict.LOST and outcome.corrupt == 0  # lost blocks read back as the wipe left them
    write = next(r for r in Store(f"sqlite:///{db}").get_run(1).results if r.workload == "crash-write")
    iops = write.report.jobs[0].directions["write"].iops
    assert iops == pytest.approx(RATE, rel=0.05)
    # Lost: acknowledged between the copy (taken between copy_start and copy_end) and the state fio
    # saved at the cut (its client looks for the trigger file every 0.1 s; 0.5 s allows for a busy
    # machine), give or take the writes in flight (iodepth 8).
    low = iops * (times["cut"] - times["copy_end"]) - 8
    high = iops * (times["cut"] + 0.5 - times["copy_start"]) + 8
    assert low <= outcome.lost <= high, (outcome.lost, low, high)
    assert outcome.lost == len({offset for offset, _, _ in outcome.bad})
    assert rate.with_loss == 1 and rate.ci95 is not None and rate.ci95[0] > 0.2
    assert "lost" in proc.stdout and str(outcome.bad[0][0]) in proc.stdout


def _writes(device: str) -> int:
    """Writes the block device completed so far (``/sys/block/DEV/stat``, field 5)."""
    return int(Path(f"/sys/class/block/{device}/stat").read_text().split()[4])


def _running(db: Path, workload: str) -> bool:
    if not db.exists():
        return False
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("select 1 from results where workload = ? and status = 'running'",
                                (workload,)).fetchone() is not None
    except sqlite3.OperationalError:  # the schema is being created
        return False
