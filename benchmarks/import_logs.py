"""How fast does `iolab import DIR` take in a sweep with its logs, and how much room does it take?

A generated bench-fio sweep in its nested layout (``sdb/4k/<rw>-<iodepth>-<numjobs>.json``): randread
and randwrite × iodepth 1-64 × numjobs 1-16, 60 s each, every thread logging IOPS, bandwidth and
the three latencies at 250 ms (``log_avg_msec=250``): 70 fio JSON outputs (varied copies of a real
fio 3.33 report, their figures consistent with their logs) and 2,170 logs of 240 rows, 520,800
samples in all. The logs are named by an absolute prefix on the machine that ran them
(``/bench/sdb/4k/randread-iodepth-8-numjobs-4``), as bench-fio names them, so the import must find
them beside each output.

Baseline, in the same run: bare ``numpy.loadtxt`` of every log plus ``json.load`` of every output,
which reads the same numbers and stores nothing. ``iolab import`` of the directory into a fresh SQLite
database (one run; every log checked against the attribution rules, stored as compact arrays). The
two alternate for ``--rounds`` rounds and the best of each counts. Targets: import throughput >= 1/5
of the bare read; the database <= 2x the text imported.

Then the command as people run it, on a bench-fio directory pair shaped like the real sweeps users
import (fio-plot's flat layout: ``randread-16-8.json``, randread and randwrite × iodepth 1-64 ×
numjobs 1-64, 98 outputs per directory; logs named by queue depth and thread only,
``random-read-depth-16_iops.8.log`` at 1 s over 60 s, so later runs overwrite earlier ones: 2,240
per directory): ``iolab import DIR1 DIR2`` timed from process start to exit, against the bare read
of the same files in this process, the two alternating, the best of each. The command runs with its
compiled modules cached, as an installed iolab has them (``ratios.installed_env``; a first run fills
the cache and is not timed). Target: <= 3x (issue 44; 5x before).

The files go to ``--dir``; the databases to the default temporary directory (iolab writes no
database under /dev, so ``--dir /dev/shm`` keeps only the files in memory).

``--against SRC`` also times the command with another checkout's ``src`` first on the path in the
same rounds (its turn alternating with this one's), and prints its ratio beside: an A/B of a change
on a machine whose speed varies.

    .venv/bin/python benchmarks/import_logs.py [--rounds 3] [--dir /dev/shm] [--against SRC] [--json]
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from iolab.store.database import Store
from iolab.workflows import importer
from ratios import Ratio, add_json_option, emit, installed_env, say

TEMPLATE = Path(__file__).resolve().parents[1] / "tests" / "data" / "fio" / "fio-3.33_randrw_libaio.json"
RWS = ("randread", "randwrite")
DEPTHS = (1, 2, 4, 8, 16, 32, 64)
NUMJOBS = (1, 2, 4, 8, 16)
RUNTIME_MS, WINDOW_MS = 60_000, 250
KINDS = ("bw", "iops", "lat", "clat", "slat")


def total_iops(rw: str, depth: int, numjobs: int) -> float:
    """A device that saturates at 200k (read) or 80k (write) IOPS, at 12k per outstanding I/O before."""
    ceiling = 200_000 if rw == "randread" else 80_000
    return ceiling * (1 - np.exp(-12_000 * depth * numjobs / ceiling))


def output(template: dict, rw: str, depth: int, numjobs: int, prefix: str) -> dict:  # type: ignore[type-arg]
    doc = copy.deepcopy(template)
    job = doc["jobs"][0]
    job["jobname"] = "bench"
    job["job options"] = {"rw": rw, "bs": "4k", "ioengine": "libaio", "iodepth": str(depth), "direct": "1",
                          "numjobs": str(numjobs), "group_reporting": "1", "time_based": "1", "runtime": "60",
                          "size": "10g", "filename": "/dev/sdb", "write_bw_log": prefix, "write_iops_log": prefix,
                          "write_lat_log": prefix, "log_avg_msec": str(WINDOW_MS)}
    doc.pop("global options", None)
    done, idle = ("read", "write") if rw == "randread" else ("write", "read")
    total_ios = int(total_iops(rw, depth, numjobs) * RUNTIME_MS / 1000)
    d = job[done]
    d.update(total_ios=total_ios, runtime=RUNTIME_MS, io_bytes=total_ios * 4096, io_kbytes=total_ios * 4,
             iops=total_ios * 1000 / RUNTIME_MS, bw_bytes=total_ios * 4096 * 1000 // RUNTIME_MS,
             bw=total_ios * 4 * 1000 // RUNTIME_MS)
    for lat in ("slat_ns", "clat_ns", "lat_ns"):
        d[lat]["N"] = total_ios
    for key, value in list(job[idle].items()):
        if isinstance(value, int | float):
            job[idle][key] = 0
    doc["timestamp"] += depth * 100 + numjobs
    return doc


def log_text(rate: float, ddir: int, rng: random.Random) -> str:
    return "".join(f"{t}, {max(0, int(rate * rng.uniform(0.95, 1.05)))}, {ddir}, 0, 0\n"
                   for t in range(WINDOW_MS, RUNTIME_MS + 1, WINDOW_MS))


def make_sweep(root: Path) -> tuple[list[Path], list[Path]]:
    """The sweep's outputs and logs under ``root``."""
    template = json.loads(TEMPLATE.read_text())
    rng = random.Random(7)
    directory = root / "sdb" / "4k"
    directory.mkdir(parents=True)
    outputs, logs = [], []
    for rw in RWS:
        ddir = 0 if rw == "randread" else 1
        for depth in DEPTHS:
            for numjobs in NUMJOBS:
                name = f"{rw}-iodepth-{depth}-numjobs-{numjobs}"
                path = directory / f"{rw}-{depth}-{numjobs}.json"
                path.write_text(json.dumps(output(template, rw, depth, numjobs, f"/bench/sdb/4k/{name}"), indent=2))
                outputs.append(path)
                per_thread = total_iops(rw, depth, numjobs) / numjobs
                latency_ns = depth * numjobs / total_iops(rw, depth, numjobs) * 1e9
                rates = {"iops": per_thread, "bw": per_thread * 4, "lat": latency_ns, "clat": latency_ns * 0.97,
                         "slat": latency_ns * 0.03}
                for thread in range(1, numjobs + 1):
                    for kind in KINDS:
                        log = directory / f"{name}_{kind}.{thread}.log"
                        log.write_text(log_text(rates[kind], ddir, rng))
                        logs.append(log)
    return outputs, logs


def bare_read(outputs: list[Path], logs: list[Path]) -> int:
    """numpy.loadtxt of every log and json.load of every output; returns the samples read."""
    samples = 0
    for log in logs:
        samples += len(np.loadtxt(log, delimiter=",", ndmin=2))
    for path in outputs:
        with path.open() as f:
            json.load(f)
    return samples


def import_once(root: Path, db: Path) -> importer.Outcome:
    store = Store(f"sqlite:///{db}")
    try:
        (outcome,) = importer.import_sources(store, importer.discover([root / "sdb"]))
        return outcome
    finally:
        store.close()  # the last connection checkpoints the write-ahead log into the file


BENCHFIO_DEPTHS = BENCHFIO_NUMJOBS = (1, 2, 4, 8, 16, 32, 64)


def make_benchfio_dir(directory: Path, template: dict, rng: random.Random,  # type: ignore[type-arg]
                      start_s: int = 0) -> tuple[list[Path], list[Path]]:
    """One bench-fio directory (see the module docstring), written in bench-fio's run order; its
    runs ended ``start_s`` seconds after the template's."""
    directory.mkdir(parents=True)
    outputs, logs = [], {}
    for rw in RWS:
        ddir = 0 if rw == "randread" else 1
        for depth in BENCHFIO_DEPTHS:
            for numjobs in BENCHFIO_NUMJOBS:
                prefix = f"random-read-depth-{depth}"
                doc = output(template, rw, depth, numjobs, prefix)
                doc["jobs"][0]["jobname"] = "random-read"
                doc["jobs"][0]["job options"].update(log_avg_msec="1000", filename="/dev/sdb")
                doc["timestamp"] += start_s
                path = directory / f"{rw}-{depth}-{numjobs}.json"
                path.write_text(json.dumps(doc, indent=2))
                outputs.append(path)
                per_thread = total_iops(rw, depth, numjobs) / numjobs
                latency_ns = depth * numjobs / total_iops(rw, depth, numjobs) * 1e9
                rates = {"iops": per_thread, "bw": per_thread * 4, "lat": latency_ns, "clat": latency_ns * 0.97,
                         "slat": latency_ns * 0.03}
                for thread in range(1, numjobs + 1):
                    for kind in KINDS:
                        log = directory / f"{prefix}_{kind}.{thread}.log"
                        log.write_text("".join(f"{t}, {max(0, int(rates[kind] * rng.uniform(0.95, 1.05)))}, {ddir}, "
                                               "0, 0\n" for t in range(1000, RUNTIME_MS + 1, 1000)))
                        logs[log] = None
    return outputs, list(logs)


def cli_import_s(directories: list[Path], db: Path, env: dict[str, str]) -> float:
    """Wall-clock seconds of ``iolab --db DB import DIR…`` as a fresh process, start to exit."""
    argv = [str(Path(sys.executable).parent / "iolab"), "--db", str(db), "import", *map(str, directories)]
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"iolab import failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return took


def benchfio_pair(root: Path, dbs: Path, rounds: int, as_json: bool, against: Path | None = None) -> Ratio:
    """The CLI end to end on a bench-fio directory pair against the bare read (module docstring)."""
    template = json.loads(TEMPLATE.read_text())
    rng = random.Random(11)
    directories = [root / "HPDL380G8-MX200", root / "HPDL380G8-MX300"]
    outputs, logs = [], []
    for i, d in enumerate(directories):
        o, g = make_benchfio_dir(d, template, rng, start_s=i * 86_400)
        outputs += o
        logs += g
    mb = sum(p.stat().st_size for p in (*outputs, *logs)) / 1e6
    env = installed_env(dbs / "pycache")
    other = {**installed_env(dbs / "pycache-against"), "PYTHONPATH": str(against)} if against else None
    for name, e in (("warm-up", env), ("warm-up-against", other)):
        if e is not None:
            cli_import_s(directories, dbs / f"{name}.db", e)  # fills the module cache and the page cache
    bare = cli = cli_other = float("inf")
    for i in range(rounds):
        start = time.perf_counter()
        bare_read(outputs, logs)
        bare = min(bare, time.perf_counter() - start)
        if other is not None and i % 2:
            cli_other = min(cli_other, cli_import_s(directories, dbs / f"pair{i}-against.db", other))
        cli = min(cli, cli_import_s(directories, dbs / f"pair{i}.db", env))
        if other is not None and not i % 2:
            cli_other = min(cli_other, cli_import_s(directories, dbs / f"pair{i}-against.db", other))
    say(f"bench-fio pair: {len(outputs)} outputs, {len(logs)} logs, {mb:.1f} MB of text", as_json)
    say(f"numpy.loadtxt + json.load (baseline, in this process) {bare:.2f} s", as_json)
    say(f"iolab import DIR1 DIR2 (a new process, start to exit)  {cli:.2f} s, ratio {cli / bare:.2f}", as_json)
    if other is not None:
        say(f"the same with {against} first on the path       {cli_other:.2f} s, ratio {cli_other / bare:.2f}",
            as_json)
    return Ratio("iolab import DIR1 DIR2 of a bench-fio pair, process start to exit / bare numpy.loadtxt + json.load "
                 "read", cli / bare, 3.0, "lower")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="bare/import rounds, the best of each counts")
    parser.add_argument("--dir", default=None, help="where the files go (default: a temp dir)")
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout's src: its import of the pair timed in the same rounds")
    add_json_option(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="iolab-bench-logs-") as tmp, \
            tempfile.TemporaryDirectory(prefix="iolab-bench-logs-db-") as db_tmp:
        root, dbs = Path(tmp), Path(db_tmp)
        outputs, logs = make_sweep(root)
        text_bytes = sum(p.stat().st_size for p in (*outputs, *logs))
        bare = imported = float("inf")
        for i in range(args.rounds):
            start = time.perf_counter()
            samples = bare_read(outputs, logs)
            bare = min(bare, time.perf_counter() - start)
            db = dbs / f"round{i}.db"
            start = time.perf_counter()
            outcome = import_once(root, db)
            imported = min(imported, time.perf_counter() - start)
            assert outcome.results == len(outputs) and outcome.logs_attached == len(logs), outcome
            db_bytes = sum(p.stat().st_size for p in dbs.glob(f"round{i}.db*"))
        mb = text_bytes / 1e6
        say(f"sweep: {len(outputs)} outputs, {len(logs)} logs, {samples:,} samples, {mb:.1f} MB of text", args.json)
        say(f"numpy.loadtxt + json.load (baseline) {mb / bare:6.1f} MB/s ({bare:.2f} s)", args.json)
        say(f"iolab import DIR                     {mb / imported:6.1f} MB/s ({imported:.2f} s), all "
            f"{outcome.logs_attached} logs attached", args.json)
        say(f"database {db_bytes / 1e6:.1f} MB for {mb:.1f} MB of text", args.json)
        pair = benchfio_pair(root / "benchfio", dbs, args.rounds, args.json, args.against)
        emit("import_logs", [
            Ratio("import throughput / numpy.loadtxt read", bare / imported, 0.2, "higher"),
            Ratio("database size / text imported", db_bytes / text_bytes, 2.0, "lower"),
            pair,
        ], args.json)


if __name__ == "__main__":
    sys.exit(main())
