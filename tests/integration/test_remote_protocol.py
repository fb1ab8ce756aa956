"""fio's wire protocol, the relay and the client runner against real fio servers on unix sockets (no
network, no root): the local fio's first message, probes, runs on two servers, a host gone, the time
bound, Ctrl-C and resume. In-process on a recorded conversation: tests/unit/remote; host specs:
tests/unit/remote/test_hosts.py; over TCP in network namespaces: tests/system/test_remote_hosts.py."""

from __future__ import annotations

import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

import fiowire
from iolab.errors import HostError
from iolab.fio.merge import percentiles_from_bins
from iolab.remote import client, protocol
from iolab.remote.hosts import HostSpec


def _captured_probe() -> bytes:
    """The first message the local fio sends as a client."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(10)
        proc = subprocess.Popen(["fio", f"--client=ip:127.0.0.1,{listener.getsockname()[1]}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        conn, _ = listener.accept()
        data = b""
        while len(data) < 24 or len(data) < 24 + struct.unpack_from("<I", data, 16)[0]:
            data += conn.recv(4096)
        conn.close()
        proc.wait(timeout=10)
    return data


def test_our_framing_matches_what_fio_sends():
    """The fio installed here frames its first message as iolab reads it, and as the recording the fast
    tier replays (``tests/data/remote``, ``tests/support/fiowire.py``) does: same version, same probe."""
    data = _captured_probe()
    version, opcode, _flags, _tag, length, cmd_crc, pdu_crc = protocol.HEADER.unpack_from(data)
    assert version == protocol.local_protocol_version() and opcode == protocol.CMD_PROBE
    assert protocol.crc16(data[:20]) == cmd_crc and protocol.crc16(data[24:24 + length]) == pdu_crc
    (message,) = protocol.MessageReader().feed(data)
    assert message.payload[8:].split(b"\0")[0] == b"127.0.0.1"  # cmd_client_probe_pdu.server
    recorded = fiowire.load()
    local = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    assert recorded.meta["fio_version"] == local, "fio changed: record tests/data/remote again (its README says how)"
    assert version == recorded.meta["protocol"] and message.payload == recorded.messages("client")[0].payload


@pytest.fixture
def socket_servers(tmp_path):
    """Two real fio servers on unix sockets in tmp_path: two 'hosts' without a network."""
    procs, specs = [], []
    for i in (1, 2):
        path = tmp_path / f"fio{i}.sock"
        procs.append(subprocess.Popen(["fio", f"--server=sock:{path}"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
        specs.append(HostSpec("sock", str(path), None))
    version = protocol.local_protocol_version()
    for spec in specs:
        deadline = time.monotonic() + 10
        while True:
            try:
                protocol.probe(spec, version, 1.0)
                break
            except HostError:
                assert time.monotonic() < deadline, "fio server did not start"
                time.sleep(0.05)
    yield specs, procs
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


def test_probe_a_real_server_and_a_wrong_version(socket_servers):
    (spec, _), _procs = socket_servers
    version = protocol.local_protocol_version()
    reply = protocol.probe(spec, version)
    local = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    assert reply.fio_version == local and reply.protocol == version and reply.cpus >= 1 and reply.os == "Linux"
    # A real server drops a client speaking another protocol version: that is what a mismatch looks like.
    with pytest.raises(HostError, match=r"closed the connection without answering.*another version"):
        protocol.probe(spec, version + 1)
    with pytest.raises(HostError, match=r"nothing listens|No such file"):
        protocol.probe(HostSpec("sock", spec.host + ".missing", None), version)


def _job(tmp_path: Path, runtime: str = "1") -> str:
    return (f"[t]\nfilename={tmp_path / 'data'}\nsize=16m\nrw=randread\nbs=4k\nioengine=libaio\ndirect=1\n"
            f"iodepth=4\ntime_based=1\nruntime={runtime}\n")


@pytest.mark.alone  # each host's 1 s IOPS windows against its fio IOPS: on a busy machine a window stretches
def test_client_run_on_two_servers_per_host_progress_and_results(socket_servers, tmp_path):
    specs, _procs = socket_servers
    seen: list[client.HostStatus] = []
    outcome = client.run(_job(tmp_path, "2"), specs, tmp_path / "w", on_status=seen.append, timeout_s=60)
    assert outcome.status == "ok", outcome.error
    assert [h.status for h in outcome.hosts] == ["ok", "ok"] and outcome.hosts[0].server is not None
    assert outcome.report is not None
    assert sorted(j.hostname for j in outcome.report.jobs) == sorted(s.host for s in specs)  # real names, no relay
    assert {s.host for s in seen} == {s.label for s in specs}
    running = [s for s in seen if s.state == "running" and s.status and s.status.iops]
    assert {s.host for s in running} == {s.label for s in specs}  # live rates per host
    assert "client_stats" in (outcome.raw_json or "")
    bins = [j.directions["read"].clat.bins_ns for j in outcome.report.jobs]
    assert all(bins) and percentiles_from_bins(bins[0], ["99"])  # json+ histograms came back
    # 1 s logs, asked for in the job file fio sends, came back per host and are named after it
    assert "write_iops_log=iolab" in (tmp_path / "w" / "job.fio").read_text()
    series = {(s.hostname, s.metric): s for s in outcome.time_series}
    assert sorted(series) == sorted((spec.label, m) for spec in specs
                                    for m in ("iops", "bw_bytes_s", "clat_ns", "lat_ns", "slat_ns"))
    for job in outcome.report.jobs:
        iops = series[(f"sock:{job.hostname}", "iops")]
        assert iops.job == "t" and iops.job_index == 1 and iops.interval_ms == 1000
        assert abs(iops.t_ms[0] - 1000) < 500  # 1 s windows, stamped when fio's timer fires (late under load)
        assert sum(iops.values) / len(iops.values) == pytest.approx(job.directions["read"].iops, rel=0.35)
    no_logs = client.run(_job(tmp_path, "1") + "write_iops_log=own\n", specs[:1], tmp_path / "own", timeout_s=60)
    assert no_logs.status == "ok" and no_logs.time_series == ()  # the job logs by itself: iolab adds none


def test_a_host_gone_before_the_start_is_lost_and_the_others_run(socket_servers, tmp_path):
    specs, procs = socket_servers
    procs[1].terminate()
    procs[1].wait(timeout=10)
    Path(specs[1].host).unlink(missing_ok=True)
    outcome = client.run(_job(tmp_path), specs, tmp_path / "w", timeout_s=60)
    assert outcome.status == "partial"
    ok, lost = outcome.hosts
    assert ok.status == "ok" and lost.status == "lost"
    assert lost.error.startswith(f"{specs[1].label}: not reachable when the job started")
    assert [j.hostname for j in outcome.report.jobs] == [specs[0].host]


def test_the_time_bound_stops_fio(socket_servers, tmp_path):
    specs, _procs = socket_servers
    started = time.monotonic()
    outcome = client.run(_job(tmp_path, "30"), specs[:1], tmp_path / "w", timeout_s=2)
    assert time.monotonic() - started < 25
    assert outcome.status == "failed"
    assert "did not finish within the job's time bound" in outcome.error


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _jobs(server_pid: int) -> list[int]:
    """Processes a fio server forked for a run: children of its per-connection children."""
    return [g for c in _children(server_pid) for g in _children(c)]


def test_ctrl_c_stops_the_remote_jobs_and_resume_finishes_the_run(socket_servers, tmp_path):
    from clirun import iolab, popen

    specs, procs = socket_servers
    db = tmp_path / "db.sqlite"
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"targets:\n  socks:\n    hosts: {[s.fio_arg for s in specs]}\n    path: {tmp_path / 'data'}\n"
                     "    size: 16m\ndefaults: {ioengine: libaio, direct: 1, time_based: 1, runtime: 4s}\n"
                     "workloads:\n  - {rw: randread, bs: 4k}\n")
    proc = popen("run", str(suite), db=db, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not all(_jobs(p.pid) for p in procs):  # each server runs the job (connection child, run child)
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(2)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    deadline = time.monotonic() + 10
    while any(_jobs(p.pid) for p in procs):  # the servers ended their jobs (fio's client said QUIT)
        assert time.monotonic() < deadline, "a remote job outlived Ctrl-C"
        time.sleep(0.1)
    from iolab.store.database import Store

    assert Store(f"sqlite:///{db}").get_run(1).results[0].status == "interrupted"
    resumed = iolab("run", "--resume", "1", db=db, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert Store(f"sqlite:///{db}").get_run(1).info.status == "complete"
