"""Observers, the pure parts: node_exporter's text reduced, counters over a window, the figures,
gaps of a failing scrape, the suite key. Real exporters: test_observe_hosts.py."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from iolab.analyze import compare as compare_mod
from iolab.describe.observe import with_args
from iolab.describe.suite import load_yaml
from iolab.errors import HostError, SuiteError, UsageError
from iolab.model import DirectionStats, FioReport, HostSamples, JobResult, ResultRecord, Series, to_jsonable
from iolab.observe import config, exporter, usage
from iolab.observe.sampler import Endpoint, Observation
from iolab.observe.watch import measured_window

EXPOSITION = """\
# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 100
node_cpu_seconds_total{cpu="0",mode="user"} 10
node_cpu_seconds_total{cpu="1",mode="idle"} 200
node_cpu_seconds_total{cpu="1",mode="user"} 20.5
# TYPE node_disk_reads_completed_total counter
node_disk_reads_completed_total{device="nvme0n1"} 1234
# TYPE node_network_speed_bytes gauge
node_network_speed_bytes{device="eth0"} 1.25e+09
# TYPE node_bcache_cache_hits_total counter
node_bcache_cache_hits_total{backing_device="sdb",uuid="ab12"} 900
# TYPE node_bcache_dirty_data_bytes gauge
node_bcache_dirty_data_bytes{backing_device="sdb",uuid="ab12"} 4096
# TYPE node_load1 gauge
node_load1 0.5
# TYPE node_uname_info gauge
node_uname_info{machine="x86_64",nodename="stor1",release="6.1.0-13-amd64",version="#1 SMP Debian 6.1.55-1"} 1
# TYPE node_os_info gauge
node_os_info{id="debian",pretty_name="Debian GNU/Linux 12 (bookworm)"} 1
# TYPE node_memory_MemTotal_bytes gauge
node_memory_MemTotal_bytes 6.8719476736e+10
# TYPE node_cpu_info gauge
node_cpu_info{core="0",cpu="0",family="6",model="85",model_name="Intel(R) Xeon(R)  Gold 6230",vendor="GenuineIntel"} 1
# TYPE node_disk_info gauge
node_disk_info{device="nvme0n1",major="259",minor="0",model="SAMSUNG MZQL2",path="",revision="",serial="S64",wwn=""} 1
"""


def test_a_scrape_keeps_cpu_per_mode_devices_and_bcache_counters():
    scrape = exporter.reduce(exporter.parse(EXPOSITION))
    assert scrape.cpu_count == 2
    assert scrape.values[("node_cpu_seconds_total", (("mode", "idle"),))] == 300
    assert scrape.values[("node_cpu_seconds_total", (("mode", "user"),))] == 30.5
    assert scrape.values[("node_disk_reads_completed_total", (("device", "nvme0n1"),))] == 1234
    assert scrape.values[("node_network_speed_bytes", (("device", "eth0"),))] == 1.25e9
    assert ("node_bcache_cache_hits_total", (("backing_device", "sdb"), ("uuid", "ab12"))) in scrape.values
    assert not any(name == "node_load1" for name, _ in scrape.values)


def test_host_facts_from_node_exporter():
    facts = exporter.node_facts(exporter.parse(EXPOSITION))
    h = facts.host
    assert (h.hostname, h.kernel) == ("stor1", "6.1.0-13-amd64 #1 SMP Debian 6.1.55-1")
    assert (h.cpu_count, h.memory_bytes, h.cpu_model) == (2, 64 * 1024**3, "Intel(R) Xeon(R) Gold 6230")
    assert h.distribution == "Debian GNU/Linux 12 (bookworm)"
    assert [(d.name, d.model, d.serial) for d in facts.devices] == [("nvme0n1", "SAMSUNG MZQL2", "S64")]


def test_text_that_is_not_the_exposition_format_is_a_host_error():
    with pytest.raises(HostError, match="not node_exporter's text format"):
        list(exporter.parse("<html>hello</html>\n"))


def test_value_at_interpolates_between_known_samples_and_bridges_gaps():
    t = (0, 1000, 2000, 3000)
    assert usage.value_at(t, (0.0, 10.0, None, 30.0), 500) == 5.0
    assert usage.value_at(t, (0.0, 10.0, None, 30.0), 2000) == 20.0  # across the failed scrape
    assert usage.value_at(t, (0.0, 10.0, None, 30.0), 3000) == 30.0
    assert usage.value_at(t, (0.0, 10.0, None, 30.0), 3001) is None  # nothing after: unknown
    assert usage.value_at(t, (None, 10.0, 20.0, 30.0), 500) is None


def samples(window_ms=(1400, 4400), gaps=()) -> HostSamples:
    """Four scrapes 1 s apart of a host with 2 CPUs: 1.2 CPU-s of user and 0.3 of softirq per
    second, 1 s idle; 900 MB/s received on a 1 GB/s link; 10000 reads/s on loop3, busy 0.8 s/s."""
    t = (0, 1000, 2000, 3000, 4000, 5000)

    def grow(rate, start=0.0):
        return tuple(start + rate * x / 1000 for x in t)

    series = (
        Series("node_cpu_seconds_total", {"mode": "user"}, grow(1.2, 50)),
        Series("node_cpu_seconds_total", {"mode": "softirq"}, grow(0.3)),
        Series("node_cpu_seconds_total", {"mode": "idle"}, grow(0.4, 1000)),
        Series("node_cpu_seconds_total", {"mode": "iowait"}, grow(0.1)),
        Series("node_network_receive_bytes_total", {"device": "eth0"}, grow(9e8)),
        Series("node_network_transmit_bytes_total", {"device": "eth0"}, grow(1e6)),
        Series("node_network_speed_bytes", {"device": "eth0"}, (1e9,) * 6),
        Series("node_disk_reads_completed_total", {"device": "loop3"}, grow(10000)),
        Series("node_disk_writes_completed_total", {"device": "loop3"}, grow(0)),
        Series("node_disk_read_bytes_total", {"device": "loop3"}, grow(4096e4)),
        Series("node_disk_io_time_seconds_total", {"device": "loop3"}, grow(0.8)),
        Series("node_bcache_cache_hits_total", {"backing_device": "sdb"}, grow(100)),
    )
    return HostSamples("stor1", "observed", "http://x/metrics", datetime.now(UTC), t, series, window_ms, gaps, 2)


def result_with(usages, ios=30000, target="data", hosts=()) -> ResultRecord:
    report = FioReport("json+", (JobResult("j", directions={"read": DirectionStats("read", total_ios=ios)}),))
    return ResultRecord(1, 1, 0, target, "w", 0, "ok", "", "", report=report,
                        extra={"observed": to_jsonable(list(usages)), **({"hosts": list(hosts)} if hosts else {})})


def test_host_usage_and_the_figures_over_the_measured_window():
    u = usage.host_usage(samples())
    assert u.window_s == 3.0
    assert u.cpu_seconds["user"] == pytest.approx(3.6)
    assert usage.busy_seconds(u) == pytest.approx(4.5)  # user + softirq; idle and iowait are not work
    assert usage.cpu_util(u) == pytest.approx(4.5 / 6)
    assert usage.cpu_us_per_io([u], 30000) == pytest.approx(150.0)
    assert usage.nic_use(u.nics["eth0"], 3.0) == pytest.approx(0.9)
    assert u.disks["loop3"].reads == pytest.approx(30000) and u.disks["loop3"].busy_s == pytest.approx(2.4)
    assert u.bcache == {"node_bcache_cache_hits_total{backing_device=sdb}": pytest.approx(300)}
    (cost,) = usage.host_costs(result_with([u]))
    assert cost.disks["loop3"] == (pytest.approx(1.0), pytest.approx(0.8))
    assert cost.nics["eth0"][1] >= usage.NIC_FLAG
    assert cost.cpu_by_mode["softirq"] == pytest.approx(0.15)


def test_at_the_edges_a_scrape_just_outside_the_window_stands_for_it():
    """A job without ramp (nothing before its start, the first scrape 100 ms before it) and whose
    I/O stops at its end (the last scrape 200 ms after it): both edges exact, no interpolation."""
    t = (0, 1100, 2100, 2300)
    reads = (0.0, 1000.0, 2000.0, 2000.0)
    found = usage.host_usage(HostSamples("h", "local", "x", datetime.now(UTC), t, (
        Series("node_cpu_seconds_total", {"mode": "user"}, (0.0, 1.0, 2.0, 2.0)),
        Series("node_disk_reads_completed_total", {"device": "sda"}, reads)), (100, 2100), (), 1))
    assert found.disks["sda"].reads == 2000.0 and found.cpu_seconds["user"] == 2.0
    assert usage.value_at(t, reads, 100) == pytest.approx(1000 / 11)  # what interpolation would have said


def test_no_figures_when_the_samples_do_not_reach_both_ends_of_the_window():
    assert usage.host_usage(samples(window_ms=(1500, 6000))).window_s is None
    assert usage.host_usage(samples(window_ms=None)).window_s is None
    assert usage.cpu_us_per_io([usage.host_usage(samples(window_ms=None))], 100) is None


def test_cost_metrics_pick_hosts_by_name_role_and_target():
    local = usage.host_usage(samples())
    server = usage.host_usage(samples())
    server = type(server)(**{**server.__dict__, "host": "10.0.0.2:8765", "role": "server"})
    local = type(local)(**{**local.__dict__, "host": "local", "role": "local"})
    result = result_with([local, server], hosts=[{"host": "10.0.0.2:8765"}], target="many")
    per_io = compare_mod.metric("cpu_us_per_io").of_result
    assert per_io(result) == pytest.approx(300.0)  # both hosts
    assert compare_mod.metric("cpu_us_per_io@local").of_result(result) == pytest.approx(150.0)
    assert compare_mod.metric("cpu_us_per_io@many").of_result(result) == pytest.approx(150.0)  # the target's servers
    assert compare_mod.metric("cpu_us_per_io@nobody").of_result(result) is None
    assert compare_mod.metric("cpu_util@10.0.0.2:8765").of_result(result) == pytest.approx(75.0)
    assert not compare_mod.metric("cpu_us_per_io@local").higher_is_better
    with pytest.raises(UsageError, match="name a host after @"):
        compare_mod.metric("cpu_us_per_io@")


def test_measured_window_ends_at_the_report_and_lasts_the_longest_job_runtime():
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = start + timedelta(seconds=10)
    report = FioReport("json+", (JobResult("a", job_runtime_ms=3000), JobResult("b", job_runtime_ms=5000)),
                       timestamp_ms=int((start + timedelta(seconds=9.5)).timestamp() * 1000))
    assert measured_window(report, start, end) == (start + timedelta(seconds=4.5), start + timedelta(seconds=9.5))
    whole_seconds = FioReport("client-json", report.jobs, timestamp_ms=int(start.timestamp() * 1000) + 9000)
    assert measured_window(whole_seconds, start, end) == (start + timedelta(seconds=5), end)  # the process's end
    assert measured_window(None, start, end) is None


def test_a_failing_observer_records_one_gap_and_sampling_goes_on():
    calls = []

    def scrape(address, timeout_s):
        calls.append(time.monotonic())
        if 2 <= len(calls) <= 4:
            raise HostError(f"node_exporter at {address}: Connection refused")
        return exporter.Scrape({("node_cpu_seconds_total", (("mode", "user"),)): float(len(calls))}, 1)

    with Observation([Endpoint("h", "observed", "10.0.0.9:9100")], interval_s=0.05, scrape=scrape) as obs:
        time.sleep(0.4)
        (found,) = obs.finish(None)
    (gap,) = found.gaps
    assert gap.attempts == 3 and "Connection refused" in gap.error and gap.start_ms < gap.end_ms
    assert len(found.t_ms) == len(calls) - 3 and found.series[0].values[0] == 1.0


def test_observe_settings_in_a_suite_and_on_the_command_line():
    text = ("name: s\nobserve:\n  port: 9200\n  hosts: {nvmet: 10.0.0.5, ceph: '[fd00::5]:9100'}\n"
            "workloads: [{rw: read}]\n")
    observe = load_yaml(text, "s.yaml").observe
    assert observe.hosts == {"nvmet": "10.0.0.5:9200", "ceph": "[fd00::5]:9100"}
    assert config.local_address(observe) == "self" and observe.asked  # this host read directly: no exporter needed
    default = load_yaml("name: s\nworkloads: [{rw: read}]\n", "s.yaml").observe
    assert default.enabled and not default.asked
    assert not load_yaml("name: s\nobserve: false\nworkloads: [{rw: read}]\n", "s.yaml").observe.enabled
    with pytest.raises(SuiteError, match=r"s.yaml:2: observe.port: expected a TCP port"):
        load_yaml("name: s\nobserve: {port: 0}\nworkloads: [{rw: read}]\n", "s.yaml")
    moved = with_args(default, ["local=127.0.0.1:19100", "stor1=10.0.0.7:9100", "10.0.0.8"])
    assert config.local_address(moved) == "127.0.0.1:19100" and moved.asked
    assert moved.hosts == {"stor1": "10.0.0.7:9100", "10.0.0.8": "10.0.0.8:9100"}
    assert not with_args(moved, [], off=True).enabled
    with pytest.raises(ValueError, match="unix socket"):
        with_args(default, ["sock:/run/x"])


def test_a_prometheus_server_that_does_not_answer_is_one_gap():
    from iolab.observe import prometheus

    start = datetime.now(UTC)
    found = prometheus.read("http://127.0.0.1:9", Endpoint("local", "local", "127.0.0.1:9100"), start,
                            start + timedelta(seconds=2), (500, 1500), wait_s=0)
    (gap,) = found.gaps
    assert gap.error.startswith("Prometheus at http://127.0.0.1:9:") and not found.t_ms
    assert usage.host_usage(found).window_s is None


def test_a_fio_servers_facts_are_compared_like_this_hosts():
    from iolab.model import HostFacts, Run, RunInfo

    def run(run_id, kernel):
        facts = to_jsonable(HostFacts(hostname="s1", kernel=kernel))
        record = {"host": "10.0.0.2:8765", "status": "ok", "facts": facts}
        result = ResultRecord(run_id, run_id, 0, "many", "w", 0, "ok", "", "", extra={"hosts": [record]})
        return Run(RunInfo(run_id, datetime.now(UTC), "complete", "run", "s"), (result,))

    found = {e.item: (e.a, e.b) for e in compare_mod.environment([run(1, "6.1.0-13")], [run(2, "6.1.0-18")])}
    assert found == {"kernel (10.0.0.2:8765)": ("6.1.0-13", "6.1.0-18")}


def test_every_figure_of_the_cost_table_is_in_the_json_csv_and_markdown():
    """Two hosts, two repetitions: each figure the table shows (and CSV carries) equals the run's
    JSON ``host_costs`` row, units in the keys; each result carries its own hosts' figures."""
    import csv
    import io
    from dataclasses import replace

    from iolab.cli.show import run_document
    from iolab.model import Run, RunInfo
    from iolab.report.costs import ALL_OBSERVED, cost_table
    from iolab.report.table import to_csv, to_markdown
    busy = usage.host_usage(samples())
    idle = replace(usage.host_usage(samples()), host="local", role="local",
                   cpu_seconds={"user": 0.3, "idle": 5.0, "softirq": 0.03})
    results = tuple(replace(result_with([idle, busy], ios=ios), id=i + 1, seq=i, repeat=i)
                    for i, ios in enumerate((30000, 20000)))
    run = Run(RunInfo(1, datetime.now(UTC), None, "complete", "run", "s"), results)
    document = run_document(run)
    table = cost_table(run)
    rows = document["host_costs"]
    assert [(r["host"], r["repeats"]) for r in rows] == [("local", 2), ("stor1", 2), (ALL_OBSERVED, 2)]
    assert [c.host for c in usage.host_costs(results[0])] == ["local", "stor1"]
    assert [c["host"] for c in document["results"][0]["host_costs"]] == ["local", "stor1", ALL_OBSERVED]
    keys = [c.key for c in table.columns]
    for row, cells in zip(rows, table.rows, strict=True):
        shown = dict(zip(keys, cells, strict=True))
        assert shown["host"].text == row["host"] and shown["repeats"].value == row["repeats"]
        assert shown["cpu_us_per_io"].value == row["cpu_us_per_io"]
        assert shown["cpu_us_per_io"].text == f"{row['cpu_us_per_io']:.2f}"
        if row["host"] == ALL_OBSERVED:
            assert row["cpu_us_per_io_values"] == [
                c["cpu_us_per_io"] for r in document["results"] for c in r["host_costs"] if c["host"] == ALL_OBSERVED]
            continue
        assert shown["cpu_busy_pct"].value == row["cpu_busy_pct"]
        assert shown["cpu_busy_pct"].text == f"{row['cpu_busy_pct']:.1f}%"
        for key, cell in shown.items():
            mode = key.removeprefix("cpu_").removesuffix("_pct")
            if key.startswith("cpu_") and key.endswith("_pct") and mode != "busy":
                assert cell.value == row["cpu_pct_by_mode"].get(mode), key  # absent: "–" in the table
        name, nic = next(iter(row["nics"].items()))
        assert shown["busiest_nic_bytes_s"].value == nic["bytes_s"] and shown["busiest_nic_bytes_s"].text.startswith(
            name if nic["bytes_s"] >= 0.005 * 2**20 else "idle")
        for device, figures in row["devices"].items():
            if figures["busy_pct"] >= 1:
                assert f"{device} ×{figures['ios_per_fio_io']:.2f} {figures['busy_pct']:.0f}%" in shown["devices"].text
        assert shown["gaps"].value == row["gaps"]
    stor1 = rows[1]
    assert stor1["cpu_busy_pct"] == pytest.approx(75.0) and stor1["cpu_us_per_io"] == pytest.approx(187.5)
    assert stor1["nics"]["eth0"]["link_pct"] == pytest.approx(90.0)
    assert stor1["devices"]["loop3"]["ios_per_fio_io"] == pytest.approx(1.25)
    parsed = list(csv.DictReader(io.StringIO(to_csv([table]))))
    assert [float(r["cpu_us_per_io"]) for r in parsed] == [pytest.approx(r["cpu_us_per_io"]) for r in rows]
    assert float(parsed[1]["cpu_busy_pct"]) == pytest.approx(75.0)  # CSV in the unit of its key
    markdown = to_markdown(table)
    assert f"| {rows[1]['cpu_us_per_io']:.2f} | 75.0% |" in markdown


def test_the_busiest_nic_of_idle_interfaces_is_idle_not_one_of_their_names():
    from iolab.report.costs import _network
    idle = {"nics": {"veth7": {"bytes_s": 120.0, "link_pct": 0.0}, "eth0": {"bytes_s": 0.0, "link_pct": 0.0}}}
    busy = {"nics": {"eth0": {"bytes_s": 2.0 * 2**20, "link_pct": 1.6}}}
    assert _network(idle).text == "idle" and _network(busy).text == "eth0 2.00 MiB/s 1.6%"
