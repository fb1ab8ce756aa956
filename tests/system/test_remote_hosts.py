"""Remote targets end to end: network namespaces as hosts, a real fio server in each (netns.py),
the CLI in a subprocess, a real SQLite database. The protocol, the relay and host specs in-process:
tests/unit/remote; what a dry run refuses: tests/cli/test_remote.py."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clirun import iolab, popen, wait_for
from iolab.check import remote as remote_checks
from iolab.describe import suite as suite_mod
from iolab.errors import HostError, SafetyError, UsageError
from iolab.facts.host import fio_version, host_facts
from iolab.fio.merge import summarize
from iolab.remote import hosts as host_specs
from iolab.remote import protocol, server
from iolab.report import document
from iolab.report.results import run_document
from iolab.run import execute
from iolab.run import remote as remote_run
from iolab.run.job import JobEvent
from iolab.run.plan import RunOptions, prepare
from iolab.store.database import Store
from netns import lab, requires_netns, requires_sshd, start_sshd
from remoteruns import check_aggregates

pytestmark = [requires_netns, pytest.mark.root]


def suite_text(specs: list[str], data: Path, runtime: str = "1s", extra: str = "",
               workloads: str = "  - {rw: randread, bs: 4k, iodepth: [1, 4]}\n") -> str:
    return (f"name: remote\ntargets:\n  many:\n    hosts: {json.dumps(specs)}\n    path: {data}\n    size: 16m\n{extra}"
            f"defaults: {{ioengine: libaio, direct: 1, time_based: 1, runtime: {runtime}}}\nworkloads:\n{workloads}")


def test_three_hosts_from_the_cli_with_per_host_and_aggregate_rows(tmp_path):
    db = tmp_path / "db.sqlite"
    with lab(3) as hosts:
        for h in hosts[:2]:
            h.start_fio_server()
        hosts[2].start_fio_server(ipv6=True)
        specs = [hosts[0].spec(), hosts[1].spec(port=8765), hosts[2].spec(ipv6=True)]
        suite = tmp_path / "suite.yaml"
        suite.write_text(suite_text(specs, tmp_path / "data.bin"))
        proc = iolab("run", str(suite), db=db, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "on 3 host(s) through fio's client/server mode" in proc.stderr
        assert "fence on this machine: not needed — every job runs on the remote hosts' fio servers" in proc.stderr
        assert "no job runs fio on this machine" not in proc.stderr
        labels = [host_specs.parse(s).label for s in specs]
        assert all(label in proc.stderr for label in labels)  # plan and per-host progress rows
        doc = json.loads(iolab("show", "1", "--format", "json", db=db).stdout)
    # run prints `show`'s table (lint notes below it name the workload too)
    results = proc.stdout.split("every host's cost")[0]  # the cost table below has rows of its own
    lines = [line for line in results.splitlines()
             if "randread-4k-qd4" in line and line.lstrip().startswith("many")]
    order = [next(label for label in [*labels, "all hosts"] if label in line) for line in lines]
    assert order == [*labels, "all hosts"]
    assert doc["run"]["status"] == "complete" and doc["run"]["options"]["remote"]["many"]["ssh"] is False
    first = doc["results"][0]
    assert [h["host"] for h in first["extra"]["hosts"]] == labels
    assert {h["status"] for h in first["extra"]["hosts"]} == {"ok"}
    assert first["extra"]["hosts"][0]["server"]["fio_version"].startswith("fio-")
    assert sorted(first["summary_by_host"]) == sorted(labels)
    assert {d["hostname"] for d in first["disk_util"]} == {host_specs.parse(s).host for s in specs}
    check_aggregates(Store(f"sqlite:///{db}"), 1, doc)
    # the report draws the target as its all-hosts aggregate: one bar, one point per iodepth
    report = document.build([Store(f"sqlite:///{db}").get_run(1)])
    data = {c.name: c.spec["data"]["values"] for c in report.charts}
    aggregate = {r["workload"]: r["iops"]["values"][0] for r in doc["summary"] if r["host"] == "all hosts"}
    assert {r["category"]: r["iops"] for r in data["iops-bars"]} == pytest.approx(aggregate, rel=1e-12)
    assert sorted((r["subject"], r["iodepth"]) for r in data["sweep-iops-iodepth"]) == [("many", 1), ("many", 4)]


def test_two_hosts_through_the_library_with_live_progress_per_host(tmp_path):
    with lab(2) as hosts:
        for h in hosts:
            h.start_fio_server()
        specs = [h.spec() for h in hosts]
        suite = suite_mod.load_yaml(suite_text(specs, tmp_path / "data.bin", runtime="2s",
                                               workloads="  - {rw: randread, bs: 4k, iodepth: 4}\n"), "s.yaml")
        options = RunOptions()
        plan = prepare(suite, options)
        assert plan.remote["many"].kind == "file" and len(plan.remote["many"].hosts) == 2
        store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
        run_id = execute.start(store, plan, options)
        events: list[JobEvent] = []
        assert execute.execute(store, run_id, options, on_event=events.append) == "complete"
    rates = {e.host for e in events if e.host and e.status is not None and e.status.iops}
    assert rates == {host_specs.parse(s).label for s in specs}
    (result,) = store.get_run(run_id).results
    assert result.status == "ok" and result.report.source_format == "client-json"
    merged = summarize(result.report.jobs)["read"]
    assert merged.iops == pytest.approx(sum(j.directions["read"].iops for j in result.report.jobs), rel=1e-12)
    doc = json.loads(json.dumps(run_document(store.get_run(run_id))))
    check_aggregates(store, run_id, doc)
    # each host's 1 s logs came back through its relay and are stored under the host's label
    series = store.time_series(run_id)[result.id]
    labels = {host_specs.parse(s).label for s in specs}
    assert {(s.hostname, s.metric) for s in series} == {(h, m) for h in labels
                                                      for m in ("iops", "bw_bytes_s", "clat_ns", "lat_ns", "slat_ns")}
    report = document.build([store.get_run(run_id)], {result.id: series})
    lines = {r["subject"] for c in report.charts if c.group == "Time series" for r in c.spec["data"]["values"]}
    assert lines == {f"many · {h}" for h in labels}  # one line per host


def test_killing_a_server_mid_run_gives_a_partial_run_and_exit_1(tmp_path):
    db = tmp_path / "db.sqlite"
    with lab(3) as hosts:
        servers = [h.start_fio_server() for h in hosts]
        specs = [h.spec() for h in hosts]
        suite = tmp_path / "suite.yaml"
        suite.write_text(suite_text(specs, tmp_path / "data.bin", runtime="4s",
                                    workloads="  - {name: long, rw: randread, bs: 4k, iodepth: 4}\n"
                                              "  - {name: after, rw: randread, bs: 4k, iodepth: 1, runtime: 1s}\n"))
        proc = popen("run", str(suite), db=db, cwd=tmp_path)
        try:
            wait_for_running(db)
            wait_for(lambda: _jobs(servers[1].pid), 60)  # the job runs on the host
            time.sleep(0.5)
            hosts[1].kill_all()  # the host dies: its server and the job it runs
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 1, stderr
    assert "is partial" in stderr and "lost" in stderr
    run = Store(f"sqlite:///{db}").get_run(1)
    assert run.info.status == "partial"
    lost = host_specs.parse(specs[1]).label
    for result in run.results:
        assert result.status == "partial"
        records = {r.host: r for r in remote_run.host_records(result)}
        assert records[lost].status == "lost" and lost in result.error
        survivors = [host_specs.parse(s) for s in (specs[0], specs[2])]
        assert sorted(j.hostname for j in result.report.jobs) == sorted(s.host for s in survivors)
        assert all(records[s.label].status == "ok" for s in survivors)
    first, second = run.results
    # iolab's and fio's words; a killed server's kernel closes (FIN) or, with unread data, resets the connection
    assert re.search(r"closed the connection|connection failed .*reset", first.error) and "disconnected" in first.error
    assert "not reachable when the job started" in second.error
    assert "(partial)" in stdout and f"partial: many/long repeat 1: {lost}" in stdout
    (all_hosts,) = [line for line in stdout.splitlines() if "all hosts" in line and "long" in line]
    assert " 0 " in all_hosts  # the row is there without values: no repeat had every host


def wait_for_running(db: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if db.exists():
            # read-only and plain: a Store opened here would create the schema itself if it came
            # before the run's, racing the run's own migration
            try:
                with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
                    row = conn.execute("SELECT status FROM results ORDER BY id LIMIT 1").fetchone()
                if row is not None and row[0] == "running":
                    return
            except sqlite3.Error:  # the run is not stored yet
                pass
        time.sleep(0.1)
    raise AssertionError("the run did not start")


def _jobs(server_pid: int) -> list[int]:
    """Processes a fio server forked for a run: children of its per-connection children."""
    def children(pid: int) -> list[int]:
        found = []
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                found += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
        return found
    return [g for c in children(server_pid) for g in children(c)]


@pytest.mark.alone  # times each probe and the preflight of a whole run against their bounds
def test_preflight_names_each_failing_host_within_the_timeout(tmp_path):
    with lab(1) as (host,):
        host.start_garbage_listener(8766)
        host.start_garbage_listener(8767, reply=None)  # accepts, then says nothing
        server = host.start_fio_server(8768)
        version = protocol.local_protocol_version()
        cases = {
            host.spec(8765): "cannot connect: nothing listens there (connection refused)",
            host.spec(8766): "the listener does not speak fio's protocol",
            host.spec(8767): "connected, but no fio reply within 1.5 s",
        }
        for spec, message in cases.items():
            started = time.monotonic()
            with pytest.raises(HostError) as info:
                protocol.probe(host_specs.parse(spec), version, timeout_s=1.5)
            assert time.monotonic() - started < 2.5
            assert info.value.message.startswith(f"{spec}: {message}")
        with pytest.raises(HostError, match="another version"):  # a real server, spoken to in another version
            protocol.probe(host_specs.parse(host.spec(8768)), version + 1, timeout_s=1.5)
        assert server.poll() is None

        db = tmp_path / "db.sqlite"
        suite = tmp_path / "suite.yaml"
        suite.write_text(suite_text([host.spec(8765), host.spec(8766), host.spec(8768)], tmp_path / "d"))
        started = time.monotonic()
        proc = iolab("run", str(suite), db=db, cwd=tmp_path)
        assert time.monotonic() - started < remote_checks.PREFLIGHT_TIMEOUT_S + 5
    assert proc.returncode == 1
    assert "Error: target many: preflight failed for 2 of 3 host(s):" in proc.stderr
    assert f"{host.spec(8765)}: cannot connect: nothing listens there" in proc.stderr
    assert f"{host.spec(8766)}: the listener does not speak fio's protocol" in proc.stderr
    assert "Traceback" not in proc.stderr and not Store(f"sqlite:///{db}").list_runs()  # nothing ran


def test_iolab_server_start_status_stop(tmp_path):
    with lab(1) as (host,), reaping_orphans():
        pidfile = tmp_path / "srv.pid"
        env = {**os.environ, "IOLAB_DB": str(tmp_path / "db.sqlite")}

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["ip", "netns", "exec", host.namespace, sys.executable, "-m", "iolab", *args],
                                  capture_output=True, text=True, env=env, timeout=120, check=False)

        with pytest.raises(UsageError, match="refusing to bind"):
            server.start(host_specs.parse("0.0.0.0"), pidfile)
        started = cli("server", "start", "--bind", host.address, "--port", "8770", "--pidfile", str(pidfile))
        assert started.returncode == 0, started.stderr
        assert f"fio server listening on {host.address}:8770" in started.stdout
        assert "no authentication" in started.stderr and "private interface" in started.stderr
        pid = int(pidfile.read_text().splitlines()[0])
        assert protocol.probe(host_specs.parse(host.spec(8770)), protocol.local_protocol_version()).cpus >= 1
        with pytest.raises(UsageError, match="already running"):
            server.start(host_specs.parse(host.spec(8770)), pidfile)
        with pytest.raises(UsageError, match=r"something already listens on .* SO_REUSEPORT"):
            server.start(host_specs.parse(host.spec(8770)), tmp_path / "other.pid")  # fio itself would not mind
        status = cli("server", "status", "--pidfile", str(pidfile))
        assert status.returncode == 0 and "running" in status.stdout and "fio-" in status.stdout
        stopped = cli("server", "stop", "--pidfile", str(pidfile))
        assert stopped.returncode == 0 and "stopped" in stopped.stdout
        os.waitpid(pid, 0)  # it was gone already; the reaper collects its exit status
        assert not pidfile.exists() and server.status(pidfile) == (None, False, None)


@contextlib.contextmanager
def reaping_orphans() -> Iterator[None]:
    """Make this process the reaper of its orphaned descendants (a server started by `iolab server
    start` outlives that command) so the test can collect them; init does not everywhere."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
    try:
        yield
    finally:
        libc.prctl(36, 0)


def test_remote_device_writes_need_ssh_and_destroy(tmp_path):
    with lab(1) as (host,):
        host.start_fio_server()
        text = suite_text([host.spec()], Path("/dev/iolab-remote-disk"),
                          workloads="  - {rw: randwrite, bs: 4k}\n")
        with pytest.raises(SafetyError, match="cannot check a remote device for data without ssh"):
            prepare(suite_mod.load_yaml(text, "s.yaml"), RunOptions())


@requires_sshd
def test_ssh_true_gathers_the_same_facts_as_for_a_local_target(tmp_path, monkeypatch):
    db = tmp_path / "db.sqlite"
    data = tmp_path / "data.bin"
    data.write_bytes(b"\0" * (16 << 20))
    with lab(1) as (host,):
        host.start_fio_server()
        env = start_sshd(host, tmp_path)
        suite = tmp_path / "suite.yaml"
        suite.write_text(suite_text([host.spec()], data, extra="    ssh: true\n",
                                    workloads="  - {rw: randread, bs: 4k}\n"))
        proc = iolab("run", str(suite), db=db, cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
        # the plan wraps at 160 columns: the host's line holds the data path (longer under xdist, popen-gwN/)
        assert "(facts over ssh)" in proc.stderr and f"{data}: file" in " ".join(proc.stderr.split())
        monkeypatch.setenv("IOLAB_SSH", env["IOLAB_SSH"])
        missing = suite_mod.load_yaml(suite_text([host.spec()], Path("/nonexistent/x"), extra="    ssh: true\n"),
                                      "s.yaml")
        assert prepare(missing, RunOptions()).remote["many"].hosts[0].facts.target.kind == "missing"
        monkeypatch.setenv("IOLAB_SSH", "ssh -F /dev/null -o Port=1")
        with pytest.raises(HostError, match=rf"{host.address}:8765: gathering facts over ssh failed"):
            prepare(missing, RunOptions())
    (result,) = Store(f"sqlite:///{db}").get_run(1).results
    (record,) = remote_run.host_records(result)
    local = host_facts(fio_version())
    assert record.facts is not None and record.facts.kernel == local.kernel
    assert record.facts.cpu_count == local.cpu_count and record.facts.fio_version == local.fio_version
    assert record.target_facts is not None and record.target_facts.kind == "file"
    assert record.target_facts.size_bytes == 16 << 20 and record.target_facts.fs_type


def test_namespaces_are_gone_afterwards():
    with lab(2) as hosts:
        hosts[0].start_fio_server()
        names = [h.namespace for h in hosts]
        veths = [h.veth for h in hosts]
        pid = hosts[0].processes[0].pid
    assert not any(n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout for n in names)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert not any(v in links for v in veths)
    assert not Path(f"/proc/{pid}").exists()


def test_a_remote_jobs_log_names_cannot_lead_the_local_client_out_of_its_work_directory(tmp_path):
    """fio's client, on this machine and outside the fence, writes the logs its servers send under
    the job's log names: an absolute name or one that climbs out with ``..`` is refused (exit 2), and
    nothing is written there; a plain relative name runs. (The same refused in a dry run, before any
    host is asked: tests/cli/test_remote.py.)"""
    with lab(1) as (host,):
        host.start_fio_server()
        db = tmp_path / "t.db"
        for log in ("/tmp/iolab-test-victim", "../../iolab-test-victim"):
            suite = tmp_path / "s.yaml"
            suite.write_text(suite_text([host.spec()], tmp_path / "remote.bin", workloads=(
                f"  - {{rw: randread, bs: 4k, write_bw_log: '{log}', log_avg_msec: 500}}\n")))
            proc = iolab("run", str(suite), "--no-observe", db=db, cwd=tmp_path)
            assert proc.returncode == 2, proc.stderr
            assert f"the log '{log}' would be written by fio's client on this machine outside" in proc.stderr
        assert not list(Path("/tmp").glob("iolab-test-victim*"))
        suite.write_text(suite_text([host.spec()], tmp_path / "remote.bin", workloads=(
            "  - {rw: randread, bs: 4k, write_bw_log: own, log_avg_msec: 500}\n")))
        proc = iolab("run", str(suite), "--no-observe", db=db, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert not list(tmp_path.glob("own_bw*"))  # in iolab's work directory, not the user's
