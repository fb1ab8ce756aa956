"""Runs stored through ``Store`` with constructed fio reports of known figures, for comparisons whose
statistics a test knows in advance (``compare``, its formats): ``store_run``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from iolab.model import DirectionStats, FioReport, HostFacts, JobResult, Latency
from iolab.store.database import Store
from iolab.store.records import PendingResult

JOB = "[{name}]\nrw={rw}\nbs={bs}\niodepth=8\nioengine=libaio\ndirect=1\nsize=64m\ntime_based\nruntime={runtime}\n"


def report(name: str, iops: float, clat_ns: float, direction: str = "read", error: int = 0) -> FioReport:
    total = round(iops * 2)  # 2 s runtime: iops = total * 1000 / 2000
    clat = Latency(min_ns=clat_ns / 4, max_ns=clat_ns * 10, mean_ns=clat_ns, stddev_ns=clat_ns / 10, samples=total,
                   percentiles_ns={"50": clat_ns * 0.9, "99": clat_ns * 3, "99.9": clat_ns * 5})
    d = DirectionStats(direction=direction, total_ios=total, io_bytes=total * 4096, runtime_ms=2000,
                       iops=total * 1000 / 2000, bw_bytes_s=total * 4096 / 2, clat=clat, lat=clat)
    return FioReport(source_format="json", jobs=(JobResult(name=name, error=error, directions={direction: d}),),
                     fio_version="3.33")


def store_run(store: Store, label: str, workloads: dict[str, Sequence[tuple[float, float]]], *, bs: str = "4k",
              rw: str = "randread", runtime: str = "2", kernel: str | None = "6.1.0",
              failed: Sequence[str] = (), host: HostFacts | None = None, extra: dict[str, Any] | None = None) -> int:
    """A run with one result per (workload, repeat): each repeat is (iops, clat mean ns). ``host``
    replaces the run's host facts, ``extra`` is stored with every result."""
    run_id = store.create_run(suite_name="t", suite_text="", label=label, fio_version="3.33",
                              host=host or HostFacts(hostname="lab", kernel=kernel, cpu_count=2))
    planned: list[PendingResult] = []
    values: list[tuple[str, tuple[float, float]]] = []
    for name, repeats in workloads.items():
        text = JOB.format(name=name, rw=rw, bs=bs, runtime=runtime)
        for repeat, value in enumerate(repeats):
            planned.append(PendingResult(seq=len(planned), target="disk", target_path="/dev/x", workload=name,
                                         repeat=repeat, job_text=text, job_hash="h", params={}))
            values.append((name, value))
    for result_id, (name, (iops, clat)) in zip(store.add_pending(run_id, planned), values, strict=True):
        if name in failed:
            store.save_result(result_id, status="failed", error="fio: engine failed")
        else:
            store.save_result(result_id, status="ok", report=report(name, iops, clat), **(
                {"extra": extra} if extra is not None else {}))
    store.finish_run(run_id, "complete")
    return run_id
