"""What the system tests of remote targets check on a stored run on many hosts: the all-hosts aggregate
rows and merged percentiles against the test's own merge of the hosts' histograms."""

from __future__ import annotations

import pytest

from iolab.store.database import Store


def merged_percentile(bins_per_host: list[dict[int, int]], pct: float) -> float:
    """The test's own merge: sum the hosts' json+ bins, then fio's rule (the first bucket whose
    cumulative count reaches pct % of all I/Os)."""
    total: dict[int, int] = {}
    for bins in bins_per_host:
        for value, count in bins.items():
            total[value] = total.get(value, 0) + count
    n = sum(total.values())
    running = 0
    for value in sorted(total):
        running += total[value]
        if running * 100 >= pct * n:
            return float(value)
    raise AssertionError("empty histogram")


def check_aggregates(store: Store, run_id: int, doc: dict) -> None:
    """Per result: all-hosts IOPS = sum of per-host IOPS; merged percentiles = the test's merge."""
    run = store.get_run(run_id)
    rows = {(r["workload"], r["host"]): r for r in doc["summary"]}
    for result in run.results:
        jobs = result.report.jobs
        per_host = [j.directions["read"] for j in jobs]
        summary = next(r for r in doc["results"] if r["id"] == result.id)["summary"]["read"]
        assert summary["iops"] == pytest.approx(sum(d.iops for d in per_host), rel=1e-12)
        assert summary["total_ios"] == sum(d.total_ios for d in per_host)
        for pct in ("50", "99", "99.9"):
            expected = merged_percentile([d.clat.bins_ns for d in per_host], float(pct))
            assert summary["clat"]["percentiles_ns"][pct] == expected
        aggregate = rows[(result.workload, "all hosts")]
        assert aggregate["iops"]["values"] == [pytest.approx(summary["iops"], rel=1e-12)]
        assert aggregate["clat_p99_ns"]["values"] == [summary["clat"]["percentiles_ns"]["99"]]
        host_rows = [r for (w, h), r in rows.items() if w == result.workload and h != "all hosts"]
        assert sum(r["iops"]["values"][0] for r in host_rows) == pytest.approx(aggregate["iops"]["values"][0])
