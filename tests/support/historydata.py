"""Histories made of real fio output: one short real fio run (``real_output``, or its recording
``recorded_output``, which the fast tier uses), then copies of its JSON output with totals scaled
consistently, written as the outputs of runs at chosen times (for ``iolab import``).

``scale_job(job, f)`` is the job as if the device had been ``f`` times as fast over the same runtime:
``total_ios`` × f (rounded), ``io_bytes`` = total_ios × the job's block size, ``iops``/``bw_bytes``
recomputed from them as fio computes them (``stat.c``), the periodic bandwidth and IOPS samples × f,
and every latency (min, max, mean, stddev, percentiles, json+ histogram buckets) ÷ f (the same queue
depth: Little's law). Everything else stays as fio wrote it. ``benchmarks/history.py`` uses it too.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from paths import DATA

DIRECTIONS = ("read", "write", "trim")
LATENCIES = ("slat_ns", "clat_ns", "lat_ns")
SAMPLES = ("bw_min", "bw_max", "bw_mean", "bw_dev", "iops_min", "iops_max", "iops_mean", "iops_stddev")
#: ``real_output``'s run as it came out of real fio once (``tests/data/history/README.md``).
RECORDED = DATA / "history" / "fio-3.33_randread_psync.jsonplus.json"
#: The SQLite database (xz) of 16 real runs on a throttled loop device, before and after a change
#: (tests/system/test_history_loop.py writes it with ``IOLAB_RECORD=1``; ``tests/data/history/README.md``).
LOOP_RUNS = DATA / "history" / "throttled-loop-runs.db.xz"


def recorded_output() -> dict[str, Any]:
    """The json+ output of ``real_output``'s job (defaults), recorded once with real fio: no fio runs."""
    return json.loads(RECORDED.read_text())  # type: ignore[no-any-return]


def real_output(directory: Path, runtime_s: int = 1, fmt: str = "json+") -> dict[str, Any]:
    """A real fio run (4k random reads, psync, one 16 MiB file in ``directory``): its JSON output."""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / "base.json"
    fio = subprocess.run(["fio", f"--output-format={fmt}", f"--output={out}", "--name=base", "--rw=randread",
                          "--bs=4k", "--ioengine=psync", "--size=16m", f"--filename={directory / 'data.bin'}",
                          "--time_based", f"--runtime={runtime_s}"], capture_output=True, text=True, timeout=120)
    assert fio.returncode == 0, fio.stderr
    (directory / "data.bin").unlink()
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def scale_job(job: Mapping[str, Any], factor: float) -> dict[str, Any]:
    """``job`` (one element of fio's ``jobs``) scaled by ``factor`` (see the module docstring)."""
    scaled = copy.deepcopy(dict(job))
    for name in DIRECTIONS:
        d = scaled.get(name)
        if not d or not d.get("total_ios"):
            continue
        bs, runtime = round(d["io_bytes"] / d["total_ios"]), d["runtime"]
        total = max(1, round(d["total_ios"] * factor))
        d.update(total_ios=total, io_bytes=total * bs, io_kbytes=total * bs >> 10, iops=1000.0 * total / runtime,
                 bw_bytes=total * bs * 1000 // runtime, bw=total * bs * 1000 // runtime // 1024)
        for key in SAMPLES:
            if key in d:
                d[key] = type(d[key])(d[key] * factor)
        for key in LATENCIES:
            lat = d.get(key)
            if lat and lat.get("N"):
                _scale_latency(lat, factor)
    return scaled


def _scale_latency(lat: dict[str, Any], factor: float) -> None:
    for stat in ("min", "max", "mean", "stddev"):
        lat[stat] = type(lat[stat])(lat[stat] / factor)
    if "percentile" in lat:
        lat["percentile"] = {p: int(v / factor) for p, v in lat["percentile"].items()}
    if "bins" in lat:
        bins: dict[str, int] = {}
        for key, count in lat["bins"].items():
            moved = str(int(int(key) / factor))
            bins[moved] = bins.get(moved, 0) + count
        lat["bins"] = bins


def output(base: Mapping[str, Any], jobs: Mapping[str, tuple[float, Mapping[str, str]]], timestamp_s: int,
           version: str | None = None) -> dict[str, Any]:
    """A fio output of the jobs ``name -> (factor, extra job options)``, each a scaled copy of the first job
    of ``base``, printed at ``timestamp_s`` (fio's ``timestamp``, ``timestamp_ms`` and ``time``)."""
    import time

    doc = {k: v for k, v in base.items() if k != "jobs"}
    doc.update(timestamp=timestamp_s, timestamp_ms=timestamp_s * 1000 + 7,
               time=time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(timestamp_s)))
    if version is not None:
        doc["fio version"] = version
    doc["jobs"] = []
    for name, (factor, options) in jobs.items():
        job = scale_job(base["jobs"][0], factor)
        job["jobname"] = name
        job["job options"] = {**job["job options"], **options}
        doc["jobs"].append(job)
    return doc


def write_runs(directory: Path, docs: Sequence[Mapping[str, Any]]) -> list[Path]:
    """Each output as ``run-NNNN.json`` in ``directory``; their paths, in order."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, doc in enumerate(docs):
        path = directory / f"run-{i:04d}.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths
