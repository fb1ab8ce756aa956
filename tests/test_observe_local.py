"""This host observed without setup: /proc and /sys read directly give node_exporter's figures, a plain
run shows the local host's CPU µs per I/O with no exporter running, and an exporter named on this
machine is the local row, not a second one."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from clirun import iolab
from iolab.describe.observe import Observe, with_args
from iolab.observe import config, exporter, local
from iolab.observe.sampler import Endpoint
from netns import local_node_exporter, requires_node_exporter

JOB = ("[global]\nioengine=libaio\ndirect=1\nsize=32m\ntime_based=1\nruntime=3s\nramp_time=1s\n"
       "[rr]\nrw=randread\nbs=4k\niodepth=8\n")


def test_default_observers_read_this_host_directly_and_an_exporter_here_is_the_local_row():
    plain = Observe()
    assert config.endpoints(plain, {}) == [(Endpoint("local", "local", local.SELF), None)]
    named_here = with_args(plain, ["127.0.0.1:19100", "nvmet=10.0.0.5:9100"])
    assert config.endpoints(named_here, {}) == [(Endpoint("local", "local", "127.0.0.1:19100"), None),
                                                (Endpoint("nvmet", "observed", "10.0.0.5:9100"), None)]
    hostname_here = with_args(plain, [f"{os.uname().nodename}:19100"])
    assert [e.role for e, _ in config.endpoints(hostname_here, {})] == ["local"]
    assert not config.is_this_host("10.0.0.5:9100") and config.is_this_host("[::1]:9100")


@requires_node_exporter
def test_proc_and_sys_give_the_counters_node_exporter_gives():
    """Every counter both read lies, in node_exporter's scrape, between this reader's value just
    before and just after it: the same sources, units and sums (counters only grow)."""
    with local_node_exporter() as (address, _):
        exporter.scrape(address, 5.0)  # the exporter's first answer is slow
        before = local.scrape()
        theirs = exporter.scrape(address, 5.0)
        after = local.scrape()
    common = set(before.values) & set(theirs.values)
    names = {name for name, _ in common}
    assert {labels for name, labels in common if name == exporter.CPU} == {
        (("mode", m),) for m in local.CPU_MODES}
    assert {"node_disk_reads_completed_total", "node_disk_io_time_seconds_total", "node_disk_written_bytes_total",
            "node_network_receive_bytes_total", "node_network_transmit_bytes_total"} <= names
    for key in common:
        if key[0] == "node_network_speed_bytes":
            assert before.values[key] == theirs.values[key], key
            continue
        assert before.values[key] - 1e-6 <= theirs.values[key] <= after.values[key] + 1e-6, key
    assert before.cpu_count == theirs.cpu_count == os.cpu_count()
    assert set(before.values) - set(theirs.values) == set()  # the exporter here keeps loop devices too
    for name, labels in set(theirs.values) - set(before.values):
        # left out here as node_exporter leaves them out by default: zram, partitions; an unknown link speed
        assert local.EXCLUDED_DEVICE.match(dict(labels)["device"]) or (
            name == "node_network_speed_bytes" and theirs.values[(name, labels)] < 0), (name, labels)


def test_a_plain_run_shows_this_hosts_cost_without_an_exporter(tmp_path: Path):
    (tmp_path / "job.fio").write_text(JOB)
    db = tmp_path / "db.sqlite"
    proc = iolab("run", "job.fio", "--target", f"d={tmp_path}", db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Connection refused" not in proc.stderr + proc.stdout
    assert "local (local) from /proc and /sys" in proc.stderr
    cost_rows = [line for line in proc.stdout.splitlines() if line.strip().startswith("d ") and "local" in line]
    assert cost_rows, proc.stdout
    document = json.loads(iolab("show", "latest", "--format", "json", db=db).stdout)
    (observed,) = document["results"][0]["extra"]["observed"]
    assert observed["source"] == local.SOURCE and observed["gaps"] == []
    (cost,) = document["results"][0]["host_costs"]
    assert cost["host"] == "local" and 0 < cost["cpu_us_per_io"] < 10_000
    assert 0 < cost["cpu_busy_pct"] <= 100


@requires_node_exporter
def test_an_exporter_named_on_this_machine_is_the_local_row(tmp_path: Path):
    (tmp_path / "job.fio").write_text(JOB)
    db = tmp_path / "db.sqlite"
    with local_node_exporter() as (address, _):
        time.sleep(0.2)
        proc = iolab("run", "job.fio", "--target", f"d={tmp_path}", "--observe", address, db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    document = json.loads(iolab("show", "latest", "--format", "json", db=db).stdout)
    (observed,) = document["results"][0]["extra"]["observed"]
    assert observed["host"] == "local" and observed["source"] == exporter.metrics_url(address)
    assert [c["host"] for c in document["results"][0]["host_costs"]] == ["local"]


@pytest.mark.parametrize("text", ["", "cpu  1 2 3\n"])
def test_a_proc_without_per_cpu_lines_counts_no_cpus(tmp_path: Path, text: str):
    (tmp_path / "net").mkdir()
    (tmp_path / "stat").write_text(text)
    found = local.scrape(str(tmp_path), str(tmp_path / "none"))
    assert found.cpu_count is None and found.values == {}
