"""Observers end to end: real node_exporters (on this machine and in network-namespace hosts, as
the multi-host tests run fio servers), real fio, a real Prometheus server, a real SQLite database."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from clirun import iolab, popen, wait_for
from iolab.describe.suite import load_yaml
from iolab.errors import HostError
from iolab.observe import prometheus, usage
from iolab.run import execute
from iolab.run import remote as remote_run
from iolab.run.plan import RunOptions, prepare
from iolab.store.database import Store
from loopdev import MiB, loop_device, requires_loop
from netns import lab, local_node_exporter, requires_netns, requires_node_exporter, wait_listening

pytestmark = [requires_node_exporter, pytest.mark.root]


def run_suite(text: str, tmp_path: Path) -> tuple[Store, int]:
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    options = RunOptions()
    plan = prepare(load_yaml(text, "suite.yaml"), options)
    run_id = execute.start(store, plan, options)
    execute.execute(store, run_id, options)
    return store, run_id


@requires_loop
def test_cpu_per_io_tells_a_cpu_heavy_job_from_a_cpu_light_one(tmp_path):
    """psync through a loop device (a syscall, the loop driver and a copy per I/O) against fio's
    null engine (no I/O at all): per I/O the host's CPU differs by far more than other work on
    the machine can blur. The loop device counts exactly the heavy job's I/Os."""
    with local_node_exporter() as (address, _), loop_device(tmp_path, 32 * MiB) as loop:
        store, run_id = run_suite(
            f"name: cost\ntargets: {{dev: {loop.path}}}\nobserve: {{local: '{address}'}}\n"
            "defaults: {rw: randread, bs: 4k, time_based: 1, runtime: 2s, ramp_time: 1s}\n"
            "workloads:\n  - {name: heavy, ioengine: psync, direct: 1}\n"
            "  - {name: light, ioengine: 'null', size: 32m}\n",
            tmp_path)
        run = store.get_run(run_id)
        assert run.info.status == "complete"
        per_io = {}
        for result in run.results:
            (u,) = usage.usages(result)
            assert (u.host, u.role, u.gaps) == ("local", "local", ())
            assert u.window_s == pytest.approx(2.0, abs=0.2) and u.cpu_count == os.cpu_count()
            per_io[result.workload] = usage.cpu_us_per_io([u], usage.job_ios(result.report))
            (samples,) = store.host_samples(run_id)[result.id]
            assert samples.t_ms[0] < samples.window_ms[0] - 500  # the ramp is sampled, before the window
            assert samples.t_ms[-1] >= samples.window_ms[1]
        assert per_io["heavy"] > 10 * per_io["light"], per_io
        heavy = run.results[0]
        reads = usage.usages(heavy)[0].disks[loop.name].reads
        # the edges of a 2 s window are read at 1 s scrapes: on a loaded machine up to ~11 % off
        # (0.93 and 1.11 seen); a window or counter mixed up would be off by 50 % or more
        assert reads / usage.job_ios(heavy.report) == pytest.approx(1.0, abs=0.15)
        light_disks = usage.usages(run.results[1])[0].disks
        assert loop.name not in light_disks or light_disks[loop.name].reads < 10


def online_cpus() -> int:
    text = Path("/sys/devices/system/cpu/online").read_text().strip()
    return sum(int(b) - int(a) + 1 if "-" in part else 1 for part in text.split(",")
               for a, _, b in [part.partition("-")])


def mem_total() -> int:
    line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemTotal:"))
    return int(line.split()[1]) * 1024


@requires_netns
def test_every_host_observed_an_observer_killed_mid_run_and_remote_facts(tmp_path):
    """Two fio servers and a host only watched, each with its own node_exporter in its own
    namespace (and UTS name); the watched host's exporter is killed while the job runs: the run
    completes, the gap is recorded and shown. The servers' facts come from their exporters."""
    db = tmp_path / "db.sqlite"
    data = tmp_path / "shared.bin"
    with lab(3) as hosts, local_node_exporter() as (local_address, _):
        for h in hosts[:2]:
            h.start_fio_server()
            h.start_node_exporter(hostname=f"iolab-obs-h{h.index}")
        watched = hosts[2].start_node_exporter(hostname="iolab-obs-stor")
        suite = tmp_path / "suite.yaml"
        suite.write_text(
            f"name: observed\ntargets:\n  many:\n    hosts: {json.dumps([h.spec() for h in hosts[:2]])}\n"
            f"    path: {data}\n    size: 16m\n"
            f"observe: {{local: '{local_address}', hosts: {{stor: '{hosts[2].address}:9100'}}}}\n"
            "defaults: {ioengine: libaio, direct: 1, time_based: 1, runtime: 4s, ramp_time: 1s}\n"
            "workloads:\n  - {rw: randread, bs: 4k, iodepth: 4}\n")
        proc = popen("run", str(suite), db=db, cwd=tmp_path)
        wait_for(lambda: _status(db) == "running")
        time.sleep(2.0)
        watched.kill()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "stor (observed) at" in err and "iolab-obs-stor" in err  # the plan names each observer
    assert "every host's cost" in out and "gap: stor during many/randread-4k-qd4 repeat 1" in out
    store = Store(f"sqlite:///{db}")
    (result,) = store.get_run(1).results
    found = {u.host: u for u in usage.usages(result)}
    assert set(found) == {"local", hosts[0].spec(), hosts[1].spec(), "stor"}
    assert found["stor"].gaps and found["stor"].gaps[0].attempts >= 1 and found["stor"].window_s is None
    for h in hosts[:2]:
        u = found[h.spec()]
        assert u.role == "server" and not u.gaps and u.window_s == pytest.approx(4.0, abs=0.3)
        assert u.nics["eth0"].rx_bytes > 0 and u.nics["eth0"].speed_bytes_s  # fio's client traffic on the veth
    uname = os.uname()
    for h, record in zip(hosts[:2], remote_run.host_records(result), strict=True):
        facts = record.facts  # no ssh: from the server's node_exporter
        assert facts is not None and facts.hostname == f"iolab-obs-h{h.index}"
        assert facts.kernel == f"{uname.release} {uname.version}"
        assert (facts.cpu_count, facts.memory_bytes) == (online_cpus(), mem_total())
    shown = iolab("compare", "1", "1", "--metric", "iops,cpu_us_per_io@many,cpu_us_per_io@stor,cpu_util@local",
                  db=db)
    assert shown.returncode == 0, shown.stderr
    assert "CPU µs/IO @many" in shown.stdout and "CPU busy @local" in shown.stdout
    report = iolab("report", "1", "-o", str(tmp_path / "r.html"), db=db)
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "r.html").read_text()
    assert "host-cost-over-time" in html and "every host&#39;s cost" in html
    assert "Fio servers and observed hosts" in html and "iolab-obs-h1" in html and "iolab-obs-stor" in html


def _status(db: Path) -> str | None:
    """The first result's status; None before iolab has made the database."""
    if not db.exists():
        return None
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT status FROM results ORDER BY id LIMIT 1").fetchone()
    except sqlite3.OperationalError:  # the tables are not there yet
        return None
    return row[0] if row else None


PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(not os.access(PROMETHEUS, os.X_OK), reason="prometheus is not installed (Debian prometheus)")
def test_series_read_afterwards_from_a_prometheus_server(tmp_path):
    """A real Prometheus scraping the local exporter every second; iolab scrapes nothing itself
    and reads the job's samples back with a range-vector query."""
    with local_node_exporter() as (address, _):
        port = free_port()
        (tmp_path / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s}\n"
            f"scrape_configs:\n  - job_name: node\n    static_configs: [{{targets: ['{address}']}}]\n")
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            wait_listening("127.0.0.1", port, prom, timeout_s=30)
            url = f"http://127.0.0.1:{port}"
            wait_for(lambda: _scraped(url, address), 30)  # Prometheus scrapes a few seconds after it starts
            store, run_id = run_suite(
                f"name: prom\ntargets: {{scratch: {tmp_path / 'scratch.bin'}}}\n"
                f"observe: {{local: '{address}', prometheus: '{url}'}}\n"
                "defaults: {rw: randread, bs: 4k, ioengine: psync, size: 8m, time_based: 1, runtime: 3s, "
                "ramp_time: 1s}\nworkloads: [{name: read}]\n", tmp_path)
        finally:
            prom.kill()
            prom.wait(timeout=30)
    (result,) = store.get_run(run_id).results
    (u,) = usage.usages(result)
    assert u.source == f"{url} instance={address}" and not u.gaps
    assert u.window_s == pytest.approx(3.0, abs=0.2) and usage.cpu_us_per_io([u], usage.job_ios(result.report)) > 0
    (samples,) = store.host_samples(run_id)[result.id]
    assert len(samples.t_ms) >= 4  # Prometheus's own scrapes, with their times


def _scraped(url: str, address: str) -> bool:
    try:
        return bool(prometheus.query(url, f'up{{instance="{address}"}}[10s]', time.time()))
    except HostError:
        return False


@requires_netns
@requires_loop
def test_cloned_grouped_jobs_measure_the_measured_phase_on_every_repetition_and_host(tmp_path):
    """numjobs=4 + group_reporting + ramp_time=1 + runtime=4 (every field report's job), 3 repetitions,
    a host only watched: each repetition's window is the 4 s measured phase on this host and on the
    watched one (fio sums job_runtime over a group: 16 s, which had pulled the ramp into the window,
    counted ×1.2 device I/Os per fio I/O and left all but one repetition, and the watched host, unmeasured)."""
    with lab(1) as (watched,), loop_device(tmp_path, 64 * MiB) as loop:
        watched.start_node_exporter(hostname="iolab-obs-w")
        store, run_id = run_suite(
            f"targets: {{dev: {loop.path}}}\nobserve: {{hosts: {{w: '{watched.address}:9100'}}}}\n"
            "defaults: {ioengine: libaio, direct: 1, bs: 4k, iodepth: 4, numjobs: 4, group_reporting: 1, "
            "ramp_time: 1s, runtime: 4s, time_based: 1}\nrepeat: 3\nworkloads:\n  - {rw: randread}\n", tmp_path)
        results = store.get_run(run_id).results
    assert len(results) == 3
    for result in results:
        found = {u.host: u for u in usage.usages(result)}
        assert set(found) == {"local", "w"}
        for u in found.values():
            assert u.window_s == pytest.approx(4.0, abs=0.25), (result.repeat, u.host, u.window_s)
        (cost,) = [c for c in usage.host_costs(result) if c.host == "local"]
        ratio, busy = cost.disks[loop.name]
        assert ratio == pytest.approx(1.0, abs=0.05) and 0 < busy <= 1
        assert [c.cpu_util is not None for c in usage.host_costs(result)] == [True, True]
