"""This host observed without setup, in real runs (the cost table's figures need time really passing while
fio runs): /proc and /sys read directly give node_exporter's figures, a plain run shows the local host's
CPU µs per I/O with no exporter running, an exporter named on this machine is the local row, not a second
one, and the target's device comes first. In-process: tests/unit/observe/test_local.py (the same
comparison on a recording, which observers a suite gets), tests/cli/test_observe.py (a job too short to
measure)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from clirun import iolab, wait_for
from iolab.observe import exporter, local
from netns import local_node_exporter, requires_node_exporter

JOB = ("[global]\nioengine=libaio\ndirect=1\nsize=32m\ntime_based=1\nruntime=2s\nramp_time=1s\n"
       "[rr]\nrw=randread\nbs=4k\niodepth=8\n")


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


@pytest.mark.root
def test_the_targets_device_comes_first_and_names_stay_whole(tmp_path: Path):
    """On a busy shared host, another tenant's device busier than the target's: the cost table lists the
    target's own device first, and the target and workload names whole in a narrow terminal."""
    import subprocess

    from loopdev import MiB, loop_device, requires_loop
    if requires_loop.args[0]:
        pytest.skip(requires_loop.kwargs["reason"])
    with loop_device(tmp_path, 64 * MiB, "mine.img") as mine, loop_device(tmp_path, 64 * MiB, "other.img") as other:
        (tmp_path / "a-rather-long-workload-name-qd1.fio").write_text(
            "[j]\nrw=randread\nbs=4k\nioengine=psync\ndirect=1\nsize=16m\ntime_based\nruntime=3\nrate_iops=200\n")
        noisy = subprocess.Popen(["fio", "--name=tenant", f"--filename={other.path}", "--rw=randread", "--bs=4k",
                                  "--direct=1", "--iodepth=16", "--ioengine=libaio", "--time_based", "--runtime=20"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:  # the tenant is busy before the run starts (fio starts slowly on a loaded machine)
            wait_for(lambda: int(Path(f"/sys/block/{other.name}/stat").read_text().split()[0]) > 100, 60)
            proc = iolab("run", "a-rather-long-workload-name-qd1.fio", "--target", f"long-target-name={mine.path}",
                         db=tmp_path / "db.sqlite", cwd=tmp_path, env={"COLUMNS": "100"})
        finally:
            noisy.kill()
            noisy.wait()
    assert proc.returncode == 0, proc.stderr
    document = json.loads(iolab("show", "latest", "--format", "json", db=tmp_path / "db.sqlite").stdout)
    (cost,) = document["results"][0]["host_costs"]
    devices = cost["devices"]
    assert next(iter(devices)) == mine.name  # first, though the tenant's device did far more I/O (ours: 200 IOPS)
    assert devices[other.name]["ios_per_fio_io"] > 2 * devices[mine.name]["ios_per_fio_io"]
    # at 100 columns the cost table is listed row by row (``report.table.to_listing``): a value per line, whole
    listed = {line.split()[0]: line.split()[1:] for line in proc.stdout.split("every host's cost")[1].splitlines()
              if len(line.split()) > 1}
    assert listed["target"] == ["long-target-name"] and listed["workload"] == ["a-rather-long-workload-name-qd1"]
    devices_cell = proc.stdout.split("every host's cost")[1].split("devices:")[1].split()
    assert next(t for t in devices_cell if t.startswith("loop")) == mine.name  # the devices cell starts with it
