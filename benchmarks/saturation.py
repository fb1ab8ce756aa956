"""Is the adaptive search worth it? `iolab saturate` and `iolab autotune` against the exhaustive grids
they replace, on the same target in one run.

1. **Saturation.** The grid: every iodepth 1, 2, 4 … 256 × numjobs 1, 2 … CPUs as an `iolab run`
   suite, each point at ``--runtime``; its answer is the most IOPS among the points whose SLO metric
   meets the SLO. The search: `iolab saturate` with short probes (``--probe-runtime``) and one
   repetition of the chosen point at ``--runtime`` (the grid measures each point once too). The
   grid's best is the largest of many single measurements, biased upwards by their noise, so the
   two answers are compared, not the measurements: both chosen points (iodepth × numjobs) are
   measured again in ``CONFIRM_ROUNDS`` interleaved rounds, and the benchmark says whether search
   and grid chose the same point. Ratios: wall time search / grid (target <= 0.25) and IOPS under
   the SLO, search's point / grid's point, medians of the interleaved rounds (target >= 0.97; 1 when
   both chose the same point: the same answer, whatever the noise).
2. **Auto-tune** (root: on a loop device, whose host settings it may change). The grid: every
   combination of ioengine × scheduler × nomerges at the search's operating point, as an `iolab run`
   suite with tuning axes; `iolab autotune` over the same axes (its best three repeated at
   ``--runtime``, its default). The grid's best is the largest of 16 single measurements, biased
   upwards by their noise (the winner's curse), so both winners are then measured again in
   ``CONFIRM_ROUNDS`` interleaved rounds. Ratio: the median IOPS of autotune's best / that of the
   grid's best (target >= 0.95); the ratio of the first measurements is printed beside it.

Targets: a scratch file (default), and with ``--throttle IOPS`` (root) a loop device capped by the
blkio cgroup throttle, the device with a known answer (docs/development.md).

    .venv/bin/python benchmarks/saturation.py [--runtime 10s] [--slo p99<=2ms] [--throttle 500] [--json]

The capped device's SLO is ``--throttle-slo`` (p99<=150ms): the throttle releases I/O in slices of
about 100 ms, so its p99 is near that whatever the load (tests/test_cli_saturate.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from iolab.analyze import saturation
from iolab.facts.targets import block_device_facts
from iolab.run import tuning
from iolab.workflows import autotune
from ratios import Ratio, add_json_option, emit, say

DEPTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: Rounds in which autotune's and the grid's best configurations are measured again.
CONFIRM_ROUNDS = 3


def iolab(*args: str, db: Path, wrapper: Sequence[str] = ()) -> tuple[float, str]:
    """Run ``iolab ARGS``; returns (wall seconds, stdout). Raises on failure."""
    start = time.monotonic()
    proc = subprocess.run([*wrapper, sys.executable, "-m", "iolab", "--db", str(db), *args], capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"iolab {' '.join(args)} failed:\n{proc.stderr}")
    return time.monotonic() - start, proc.stdout


def run_doc(db: Path, run: str = "latest") -> dict[str, Any]:
    return json.loads(iolab("show", run, "--format", "json", db=db)[1])  # type: ignore[no-any-return]


def best_under(doc: dict[str, Any], slo: saturation.Slo) -> tuple[float, str]:
    """The most IOPS among a run's rows whose SLO metric meets ``slo``, and that row's workload."""
    metric = slo.metric.name.split("_", 1)[1]  # p99, mean
    key = "clat_p99_ns" if metric == "p99" else "clat_mean_ns"
    found = [(r["iops"]["mean"], r["workload"]) for r in doc["summary"] if r["iops"]["mean"] is not None
             and r[key]["mean"] is not None and r[key]["mean"] <= slo.limit_ns]
    return max(found, default=(0.0, "none"))


def grid_suite(path: Path, target: str, runtime: str, numjobs: Sequence[int], extra: str = "",
               depths: Sequence[int] = DEPTHS) -> Path:
    path.write_text(f"name: grid\ntargets: {{t: {{path: {target}, size: 1g}}}}\n"
                    f"defaults: {{ioengine: libaio, direct: 1, rw: randread, bs: 4k, time_based: 1, "
                    f"runtime: {runtime}, ramp_time: 1s, randrepeat: 0}}\n{extra}"
                    f"workloads:\n  - {{iodepth: {list(depths)}, numjobs: {list(numjobs)}}}\n")
    return path


def point_of(doc: dict[str, Any], workload: str) -> tuple[int, int]:
    """(iodepth, numjobs) of a run's summary row ``workload``."""
    options = next(r["options"] for r in doc["summary"] if r["workload"] == workload)
    return int(options["iodepth"]), int(options["numjobs"])


def measure_again(db: Path, target: str, points: Sequence[tuple[int, int]], args: argparse.Namespace,
                  wrapper: Sequence[str], slo: saturation.Slo) -> list[float]:
    """The median IOPS (0 for a round over the SLO) of each (iodepth, numjobs) point over
    ``CONFIRM_ROUNDS`` rounds, the points interleaved within each round."""
    values: list[list[float]] = [[] for _ in points]
    for _ in range(CONFIRM_ROUNDS):
        for i, (depth, jobs) in enumerate(points):
            suite = grid_suite(db.parent / f"again-{depth}-{jobs}.yaml", target, args.runtime, [jobs], depths=[depth])
            iolab("run", str(suite), db=db, wrapper=wrapper)
            values[i].append(best_under(run_doc(db), slo)[0])
    return [statistics.median(v) for v in values]


def compare_saturation(db: Path, target: str, args: argparse.Namespace, wrapper: Sequence[str],
                       slo_text: str) -> list[Ratio]:
    slo = saturation.parse_slo(slo_text)
    cpus = os.cpu_count() or 1
    numjobs = [1 << i for i in range(cpus.bit_length()) if 1 << i <= cpus]
    grid_s, _ = iolab("run", str(grid_suite(db.parent / "grid.yaml", target, args.runtime, numjobs)), db=db,
                      wrapper=wrapper)
    grid_doc = run_doc(db)
    grid_best, where = best_under(grid_doc, slo)
    search_s, _ = iolab("saturate", "-t", f"t={target}", "--slo", slo_text, "--probe-runtime", args.probe_runtime,
                        "--runtime", args.runtime, "--repeat", "1", "ramp_time=1s", db=db, wrapper=wrapper)
    found = run_doc(db)["run"]["options"]["saturation"]
    final = run_doc(db)["summary"][-1]["iops"]["mean"]  # the chosen point's full-length repetition
    searched = (int(found["chosen"]["iodepth"]), int(found["chosen"]["numjobs"]))
    say(f"  grid: {len(DEPTHS) * len(numjobs)} points in {grid_s:.0f} s, best under {slo}: {grid_best:,.0f} IOPS "
        f"({where})", args.json)
    say(f"  search: {len(found['probes'])} probes + 1 repetition in {search_s:.0f} s, chosen "
        f"QD{searched[0]} ×{searched[1]}: {final:,.0f} IOPS", args.json)
    ratios = [Ratio(f"{target}: wall time search / grid", search_s / grid_s, 0.25, "lower")]
    if not grid_best:
        return [*ratios, Ratio(f"{target}: IOPS under the SLO, search's point / grid's point", 0.0, 0.97, "higher")]
    gridded = point_of(grid_doc, where)
    same = searched == gridded
    points = [searched] if same else [searched, gridded]
    again = measure_again(db, target, points, args, wrapper, slo)
    say(f"  same point: {'yes' if same else 'no'} (search QD{searched[0]} ×{searched[1]}, grid QD{gridded[0]} "
        f"×{gridded[1]}); measured again ({CONFIRM_ROUNDS} interleaved rounds, medians): "
        + ", ".join(f"QD{d} ×{j} {v:,.0f} IOPS" for (d, j), v in zip(points, again, strict=True))
        + f" (first measurements: ratio {final / grid_best:.3f})", args.json)
    # A grid point that misses the SLO when measured again (its one lucky measurement chose it) has no IOPS
    # under the SLO: the search's answer is then held against what the grid claimed, its first measurement.
    value = 1.0 if same else again[0] / (again[1] or grid_best)
    if not same and not again[1]:
        say(f"  the grid's point misses {slo} when measured again: the search's is held against the grid's claim "
            f"({grid_best:,.0f} IOPS)", args.json)
    return [*ratios, Ratio(f"{target}: IOPS under the SLO, search's point / grid's point, measured again "
                           f"(same point: {'yes' if same else 'no'})", value, 0.97, "higher")]


def tuning_suite(path: Path, device: str, point: dict[str, Any], runtime: str, tune: dict[str, Any],
                 ioengine: Any) -> Path:
    """A suite of random 4k reads at the operating ``point`` under host settings ``tune`` (each value
    or list of values an axis) and ``ioengine`` (one or a list)."""
    path.write_text(
        f"name: tuning-grid\ntargets: {{t: {device}}}\ntune: {json.dumps(tune)}\n"
        f"defaults: {{direct: 1, rw: randread, bs: 4k, time_based: 1, runtime: {runtime}, ramp_time: 1s, "
        f"randrepeat: 0, iodepth: {point['iodepth']}, numjobs: {point['numjobs']}}}\n"
        f"workloads:\n  - {{ioengine: {json.dumps(ioengine)}}}\n")
    return path


def compare_autotune(db: Path, device: str, args: argparse.Namespace) -> list[Ratio]:
    slo = saturation.parse_slo(args.slo)
    schedulers = tuning.scheduler_choices(block_device_facts(device))
    _, _ = iolab("autotune", "-t", f"t={device}", "--slo", args.slo, "--axes", "ioengine,scheduler,nomerges",
                 "--budget", "60m", "--probe-runtime", args.probe_runtime, "--runtime", args.runtime, "--repeat", "1",
                 "ramp_time=1s", "--write-suite", str(db.parent / "best.yaml"), db=db)
    found = run_doc(db)["run"]["options"]["autotune"]
    point = found["operating_point"]
    tuned = found["ranking"][0]["iops"]
    grid = tuning_suite(db.parent / "tune.yaml", device, point, args.runtime,
                        {"scheduler": list(schedulers), "nomerges": [0, 2]}, list(autotune.ENGINES))
    grid_s, _ = iolab("run", str(grid), db=db)
    grid_doc = run_doc(db)
    grid_best, where = best_under(grid_doc, slo)
    best = autotune.describe(tuple(found["ranking"][0]["config"].items()))
    say(f"  autotune: {len(found['probes'])} configurations, best {best}: {tuned:,.0f} IOPS; grid: "
        f"{2 * len(schedulers) * 2} configurations in {grid_s:.0f} s, best {grid_best:,.0f} ({where})", args.json)
    if not grid_best:
        return [Ratio(f"{device}: IOPS under the SLO, autotune / tuning grid", 0.0, 0.95, "higher")]
    # The grid's best is the largest of 16 single measurements, so it is biased upwards by the noise
    # (the winner's curse); both winners are measured again, interleaved, and their medians compared.
    chosen = next(r for r in grid_doc["results"] if r["workload"] == where)
    engine = next(row["options"]["ioengine"] for row in grid_doc["summary"] if row["workload"] == where)
    grid_winner = tuning_suite(db.parent / "grid-best.yaml", device, point, args.runtime,
                               chosen["extra"]["tuning"]["requested"], engine)
    again: dict[Path, list[float]] = {db.parent / "best.yaml": [], grid_winner: []}
    for _ in range(CONFIRM_ROUNDS):
        for suite, values in again.items():
            iolab("run", str(suite), db=db)
            values.append(run_doc(db)["summary"][0]["iops"]["mean"])
    tuned_again, grid_again = (statistics.median(v) for v in again.values())
    say(f"  measured again ({CONFIRM_ROUNDS} interleaved rounds, medians): autotune's best {tuned_again:,.0f} IOPS, "
        f"the grid's best {grid_again:,.0f} IOPS (first measurements: ratio {tuned / grid_best:.3f})", args.json)
    return [Ratio(f"{device}: IOPS, autotune's best / the tuning grid's best, measured again",
                  tuned_again / grid_again, 0.95, "higher")]


@contextlib.contextmanager
def throttled_loop(directory: Path, iops: int | None) -> Iterator[tuple[str, list[str]]]:
    """A loop device over a 1 GiB file, capped at ``iops`` reads and writes when given (a blkio
    cgroup; the wrapper joins it); removed afterwards."""
    image = directory / "loop.img"
    with image.open("wb") as f:
        f.truncate(1 << 30)
    device = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True, text=True,
                            check=True).stdout.strip()
    group = Path(f"/sys/fs/cgroup/blkio/iolab-bench-{os.getpid()}")
    try:
        wrapper: list[str] = []
        if iops:
            majmin = Path(f"/sys/class/block/{Path(device).name}/dev").read_text().strip()
            group.mkdir()
            for kind in ("read", "write"):
                (group / f"blkio.throttle.{kind}_iops_device").write_text(f"{majmin} {iops}\n")
            wrapper = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(group)]
        yield device, wrapper
    finally:
        with contextlib.suppress(OSError):
            group.rmdir()
        subprocess.run(["losetup", "-d", device], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="10s", help="each grid point and the chosen point's repetition")
    parser.add_argument("--probe-runtime", default="2s", help="each probe of the searches")
    parser.add_argument("--slo", default="p99<=2ms")
    parser.add_argument("--throttle", type=int, help="also a loop device capped at this many IOPS (root)")
    parser.add_argument("--throttle-slo", default="p99<=150ms", help="the SLO on the capped device")
    parser.add_argument("--dir", default=None, help="where the scratch file and databases go")
    add_json_option(parser)
    args = parser.parse_args()
    ratios: list[Ratio] = []
    with tempfile.TemporaryDirectory(dir=args.dir or ".", prefix="iolab-bench-sat-") as tmp:
        root = Path(tmp)
        say(f"scratch file {root / 'data.bin'}:", args.json)
        ratios += compare_saturation(root / "file.db", str(root / "data.bin"), args, (), args.slo)
        if os.geteuid() == 0:
            (root / "tune").mkdir()
            with throttled_loop(root / "tune", None) as (device, _):
                say(f"loop device {device}, auto-tune:", args.json)
                ratios += compare_autotune(root / "tune" / "tune.db", device, args)
        if args.throttle:
            (root / "cap").mkdir()
            with throttled_loop(root / "cap", args.throttle) as (device, wrapper):
                say(f"loop device {device} capped at {args.throttle} IOPS:", args.json)
                # the throttle releases I/O in ~100 ms slices: p99 sits near 100 ms whatever the load
                ratios += compare_saturation(root / "cap" / "cap.db", device, args, wrapper, args.throttle_slo)
    emit("saturation", ratios, args.json)


if __name__ == "__main__":
    main()
