"""This host observed without setup (``observe.local``): which observers a suite gets, /proc and /sys
reduced to node_exporter's series, compared with a real exporter's scrape recorded between two reads
(``tests/data/observe``, ``tests/support/procsnapshot.py``). Live: ``tests/integration/test_observe_local.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import procsnapshot
from iolab.describe.observe import Observe, with_args
from iolab.observe import config, exporter, local
from iolab.observe.sampler import Endpoint


def test_default_observers_read_this_host_directly_and_an_exporter_here_is_the_local_row():
    plain = Observe()
    assert config.endpoints(plain, {}) == [(Endpoint("local", "local", local.SELF), None)]
    named_here = with_args(plain, ["127.0.0.1:19100", "nvmet=10.0.0.5:9100"])
    assert config.endpoints(named_here, {}) == [(Endpoint("local", "local", "127.0.0.1:19100"), None),
                                                (Endpoint("nvmet", "observed", "10.0.0.5:9100"), None)]
    hostname_here = with_args(plain, [f"{os.uname().nodename}:19100"])
    assert [e.role for e, _ in config.endpoints(hostname_here, {})] == ["local"]
    assert not config.is_this_host("10.0.0.5:9100") and config.is_this_host("[::1]:9100")


def test_proc_and_sys_give_the_counters_node_exporter_gives():
    """Every counter both read lies, in node_exporter's scrape, between this reader's value just
    before and just after it: the same sources, units and sums (counters only grow). Recorded."""
    snapshot = procsnapshot.load()
    ticks = float(snapshot["ticks_per_s"])
    before, after = (procsnapshot.reduced(snapshot[k], ticks) for k in ("before", "after"))
    theirs = exporter.reduce(exporter.parse(snapshot["exporter"]))
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
    assert before.cpu_count == theirs.cpu_count == snapshot["cpu_count"]
    assert set(before.values) - set(theirs.values) == set()  # the exporter here keeps loop devices too
    for name, labels in set(theirs.values) - set(before.values):
        # left out here as node_exporter leaves them out by default: zram, partitions; an unknown link speed
        assert local.EXCLUDED_DEVICE.match(dict(labels)["device"]) or (
            name == "node_network_speed_bytes" and theirs.values[(name, labels)] < 0), (name, labels)


def test_scrape_reads_the_files_it_is_pointed_at(tmp_path: Path):
    """``local.scrape`` on a copy of the recorded /proc and /sys texts gives ``reduce`` of them."""
    snapshot = procsnapshot.load()["before"]
    (tmp_path / "net").mkdir()
    for name in ("stat", "diskstats", "net/dev"):
        (tmp_path / name).write_text(snapshot[name])
    for nic, speed in snapshot["speeds"].items():
        (tmp_path / "class" / nic).mkdir(parents=True)
        if speed is not None:
            (tmp_path / "class" / nic / "speed").write_text(speed)
    found = local.scrape(str(tmp_path), str(tmp_path / "class"))
    assert found == procsnapshot.reduced(snapshot, float(os.sysconf("SC_CLK_TCK")))


@pytest.mark.parametrize("text", ["", "cpu  1 2 3\n"])
def test_a_proc_without_per_cpu_lines_counts_no_cpus(tmp_path: Path, text: str):
    (tmp_path / "net").mkdir()
    (tmp_path / "stat").write_text(text)
    found = local.scrape(str(tmp_path), str(tmp_path / "none"))
    assert found.cpu_count is None and found.values == {}
