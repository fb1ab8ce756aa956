"""`iolab import` with the time-series logs real fio writes beside its output: a local run, and a run
through a loopback fio server (the logs named by host), stored and drawn by `iolab report`."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from clirun import iolab
from importchecks import said, series_of
from iolab.store.database import Store
from netns import wait_listening

LOGS = "write_bw_log=tl\nwrite_iops_log=tl\nwrite_lat_log=tl\nlog_avg_msec=1000\n"


def job_text(data: Path) -> str:
    return (f"[global]\nfilename={data}\nsize=16m\nioengine=libaio\ndirect=1\nbs=4k\ntime_based=1\nruntime=2\n"
            f"{LOGS}\n[rr]\nrw=randread\niodepth=4\nnumjobs=2\n\n[rw]\nrw=randwrite\niodepth=1\n")


@pytest.mark.alone  # fio's 1 s IOPS windows against its IOPS: on a busy machine a window stretches
def test_logs_of_a_real_fio_run_are_stored_and_drawn(tmp_path):
    (tmp_path / "job.fio").write_text(job_text(tmp_path / "data"))
    fio = subprocess.run(["fio", "job.fio", "--output-format=json", "--output=out.json"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert fio.returncode == 0, fio.stderr
    db = tmp_path / "iolab.db"
    proc = iolab("import", str(tmp_path / "out.json"), db=db)
    assert proc.returncode == 0, proc.stderr
    assert "logs: 15 attached (15 time series), 0 not attached" in said(proc)  # 3 threads x 5 logs
    series = series_of(db)
    assert {(job, index) for job, index, *_ in series} == {("rr", 1), ("rr", 2), ("rw", 3)}  # numjobs clones
    assert {m for *_, m in series} == {"iops", "bw_bytes_s", "clat_ns", "lat_ns", "slat_ns"}
    report = json.loads((tmp_path / "out.json").read_text())
    for index, job in enumerate(report["jobs"], 1):  # fio's own IOPS, per thread, against its 1 s windows
        direction = "read" if job["jobname"] == "rr" else "write"
        windows = series[(job["jobname"], index, None, direction, "iops")]
        assert sum(windows) / len(windows) == pytest.approx(job[direction]["iops"], rel=0.35)
    drawn = iolab("report", "1", "-o", str(tmp_path / "r.html"), db=db)
    assert drawn.returncode == 0, drawn.stderr
    html = (tmp_path / "r.html").read_text()
    for chart in ("timeseries-iops", "timeseries-bandwidth", "timeseries-latency"):
        assert f'data-chart="{chart}"' in html


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_client_output_logs_go_to_the_result_of_their_host(tmp_path):
    """fio's client writes the logs a server sends back as `tl_iops.1.log.127.0.0.1` (FIO_NOTES §4.1)."""
    port = free_port()
    server = subprocess.Popen(["fio", f"--server=ip:127.0.0.1,{port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_listening("127.0.0.1", port, server)
        (tmp_path / "job.fio").write_text(job_text(tmp_path / "data").replace("numjobs=2", "numjobs=1"))
        fio = subprocess.run(["fio", "--output-format=json", "--output=out.json", f"--client=ip:127.0.0.1,{port}",
                              "job.fio"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert fio.returncode == 0, fio.stderr
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert (tmp_path / "tl_iops.1.log.127.0.0.1").exists()
    db = tmp_path / "iolab.db"
    proc = iolab("import", str(tmp_path / "out.json"), db=db)
    assert proc.returncode == 0, proc.stderr
    assert "logs: 10 attached (10 time series), 0 not attached" in said(proc)
    (result,) = Store(f"sqlite:///{db}").get_run(1).results
    assert result.target == f"127.0.0.1:{port}"
    series = series_of(db)
    assert {(job, index, host) for job, index, host, *_ in series} == {("rr", 1, "127.0.0.1"), ("rw", 2, "127.0.0.1")}
