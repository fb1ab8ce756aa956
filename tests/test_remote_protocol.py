"""Host specs, fio's wire protocol, the relay and the client runner, against real fio servers on
unix sockets (no network, no root); the namespace tests are in test_remote_hosts.py."""

from __future__ import annotations

import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from iolab.errors import HostError
from iolab.fio.merge import percentiles_from_bins
from iolab.remote import client, hosts, protocol
from iolab.remote.hosts import HostSpec


@pytest.mark.parametrize(("text", "kind", "host", "port", "label", "fio_arg"), [
    ("10.0.0.11", "ip", "10.0.0.11", 8765, "10.0.0.11:8765", "ip:10.0.0.11,8765"),
    ("10.0.0.12:8766", "ip", "10.0.0.12", 8766, "10.0.0.12:8766", "ip:10.0.0.12,8766"),
    ("ip:10.0.0.12,8766", "ip", "10.0.0.12", 8766, "10.0.0.12:8766", "ip:10.0.0.12,8766"),
    ("ip4:node-1.lab", "ip", "node-1.lab", 8765, "node-1.lab:8765", "ip:node-1.lab,8765"),
    ("node-1,9000", "ip", "node-1", 9000, "node-1:9000", "ip:node-1,9000"),
    ("ip6:fd00::13,8765", "ip6", "fd00::13", 8765, "[fd00::13]:8765", "ip6:fd00::13,8765"),
    ("fd00::13", "ip6", "fd00::13", 8765, "[fd00::13]:8765", "ip6:fd00::13,8765"),
    ("[fd00::13]:9000", "ip6", "fd00::13", 9000, "[fd00::13]:9000", "ip6:fd00::13,9000"),
    ("sock:/run/fio.sock", "sock", "/run/fio.sock", None, "sock:/run/fio.sock", "sock:/run/fio.sock"),
])
def test_host_specs(text, kind, host, port, label, fio_arg):
    spec = hosts.parse(text)
    assert (spec.kind, spec.host, spec.port, spec.label, spec.fio_arg) == (kind, host, port, label, fio_arg)
    assert hosts.parse(spec.fio_arg) == spec and hosts.parse(spec.label) == spec
    assert hosts.label_of(spec.host, spec.port) == label


@pytest.mark.parametrize(("text", "message"), [
    ("", "expected a host"), ("10.0.0.1:0", "port must be a number 1..65535"), ("h:99999", "1..65535"),
    ("ip:fd00::1,8765", "needs ip6:"), ("sock:relative", "absolute path"), ("bad_name!", "not an IPv4 address"),
    ("ip6:not an address", "expected a host"), ("a b", "expected a host"),
])
def test_bad_host_specs_say_why(text, message):
    with pytest.raises(ValueError, match=message):
        hosts.parse(text)


def test_hosts_file(tmp_path):
    path = tmp_path / "hosts.list"
    path.write_text("ip:127.0.0.1,8765\n# comment\n10.0.0.2:8766   fd00::3  # trailing\n")
    assert [h.label for h in hosts.read_file(path)] == ["127.0.0.1:8765", "10.0.0.2:8766", "[fd00::3]:8765"]
    path.write_text("10.0.0.1\n10.0.0.2:x\n")
    with pytest.raises(ValueError, match=r"hosts.list:2: .*port"):
        hosts.read_file(path)
    path.write_text("# nobody\n")
    with pytest.raises(ValueError, match="no hosts"):
        hosts.read_file(path)
    with pytest.raises(ValueError, match="listed twice"):
        hosts.check_unique([hosts.parse("10.0.0.1"), hosts.parse("ip:10.0.0.1,8765")])


def test_crc16_and_message_framing():
    assert protocol.crc16(b"123456789") == 0xBB3D  # CRC-16/ARC check value
    one = protocol.encode(97, protocol.CMD_PROBE, b"x" * 10, tag=7)
    # a payload over 1 KiB arrives in fragments flagged F_MORE (fio_net_send_cmd, server.c)
    big = b"".join(
        protocol.HEADER.pack(97, 6, protocol.F_MORE if last is False else 0, 9, len(part), 0, 0)[:20]
        + struct.pack("<HH", protocol.crc16(protocol.HEADER.pack(97, 6, protocol.F_MORE if last is False else 0, 9,
                                                                 len(part), 0, 0)[:20]), protocol.crc16(part))
        + part
        for part, last in ((b"a" * 1024, False), (b"b" * 100, True))
    )
    reader = protocol.MessageReader()
    stream = one + big
    messages = [m for i in range(0, len(stream), 7) for m in reader.feed(stream[i:i + 7])]
    assert [(m.opcode, m.tag, len(m.payload)) for m in messages] == [(10, 7, 10), (6, 9, 1124)]
    with pytest.raises(protocol.NotFio):
        protocol.MessageReader().feed(b"HTTP/1.0 400 Bad Request\r\n\r\n")


def test_eta_layout():
    values = [2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 100, 50, 0, 0, 0, 0, 0, 0, 0, 25, 12, 0, 0, 7, 3, 1, 0, 3, 0, 2, 0]
    payload = struct.pack("<4I3Q3Q3Q3I3I3IIQQ4III", *values) + b"RR"
    eta = protocol.decode_eta(protocol.Message(97, protocol.CMD_ETA, 0, payload))
    assert eta == protocol.Eta(running=2, ramping=0, pending=0, setting_up=0, iops=37.0, bw_bytes_s=150 * 1024,
                               elapsed_s=7.0, eta_s=3.0)
    assert protocol.decode_eta(protocol.Message(79, protocol.CMD_ETA, 0, payload)) is None  # before fio-3.16
    assert protocol.decode_eta(protocol.Message(97, protocol.CMD_TEXT, 0, payload)) is None


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
    data = _captured_probe()
    version, opcode, _flags, _tag, length, cmd_crc, pdu_crc = protocol.HEADER.unpack_from(data)
    assert version == protocol.local_protocol_version() and opcode == protocol.CMD_PROBE
    assert protocol.crc16(data[:20]) == cmd_crc and protocol.crc16(data[24:24 + length]) == pdu_crc
    (message,) = protocol.MessageReader().feed(data)
    assert message.payload[8:].split(b"\0")[0] == b"127.0.0.1"  # cmd_client_probe_pdu.server


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


def test_every_remote_job_has_a_time_bound():
    from iolab.fio import jobfile
    from iolab.run.remote import DEFAULT_BOUND_S, time_bound_s

    timed = jobfile.parse("[global]\nruntime=30s\nramp_time=5\n[a]\nrw=read\n[b]\nruntime=1m\n")
    assert time_bound_s(timed, 300) == 2 * 65 + 300  # the longest job, ramp included, twice, plus slack
    assert time_bound_s(jobfile.parse("[a]\nsize=1g\n"), 300) == DEFAULT_BOUND_S + 300  # fio decides: still bounded


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
