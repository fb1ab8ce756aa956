"""Observers end to end in network-namespace hosts: real node_exporters (on this machine and in the hosts, as
the multi-host tests run fio servers), real fio, a real SQLite database. Exporters on this machine alone and
Prometheus: tests/integration/test_observe_exporters.py; node_exporter's text and the figures in-process:
tests/unit/observe."""

from __future__ import annotations

import json
import os
import time

import pytest

from clirun import iolab, popen, wait_for
from iolab.observe import usage
from iolab.run import remote as remote_run
from iolab.store.database import Store
from loopdev import MiB, loop_device, requires_loop
from netns import lab, local_node_exporter, requires_netns, requires_node_exporter
from observedruns import first_status, mem_total, online_cpus, run_suite

pytestmark = [requires_node_exporter, pytest.mark.root]


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
        wait_for(lambda: first_status(db) == "running")
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


@requires_netns
@requires_loop
def test_cloned_grouped_jobs_measure_the_measured_phase_on_every_repetition_and_host(tmp_path):
    """numjobs=4 + group_reporting + ramp_time=1 + runtime=4 (every field report's job), 2 repetitions,
    a host only watched: each repetition's window is the 4 s measured phase on this host and on the
    watched one (fio sums job_runtime over a group: 16 s, which had pulled the ramp into the window,
    counted ×1.2 device I/Os per fio I/O and left all but one repetition, and the watched host, unmeasured)."""
    with lab(1) as (watched,), loop_device(tmp_path, 64 * MiB) as loop:
        watched.start_node_exporter(hostname="iolab-obs-w")
        store, run_id = run_suite(
            f"targets: {{dev: {loop.path}}}\nobserve: {{hosts: {{w: '{watched.address}:9100'}}}}\n"
            "defaults: {ioengine: libaio, direct: 1, bs: 4k, iodepth: 4, numjobs: 4, group_reporting: 1, "
            "ramp_time: 1s, runtime: 4s, time_based: 1}\nrepeat: 2\nworkloads:\n  - {rw: randread}\n", tmp_path)
        results = store.get_run(run_id).results
    assert len(results) == 2
    for result in results:
        found = {u.host: u for u in usage.usages(result)}
        assert set(found) == {"local", "w"}
        for u in found.values():
            assert u.window_s == pytest.approx(4.0, abs=0.25), (result.repeat, u.host, u.window_s)
        (cost,) = [c for c in usage.host_costs(result) if c.host == "local"]
        ratio, busy = cost.disks[loop.name]
        assert ratio == pytest.approx(1.0, abs=0.05) and 0 < busy <= 1
        assert [c.cpu_util is not None for c in usage.host_costs(result)] == [True, True]
