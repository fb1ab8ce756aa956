"""History at scale, and how well it finds changes: `iolab history` over 1,000 runs × 20 workloads, and the
change-point accuracy on series made by importing fio outputs.

Everything starts from one real fio run (4k random reads, psync, 1 s, on a file in the working directory;
json+ for the scale database, json for the accuracy series), copied with its totals scaled consistently
(tests/support/historydata.py: I/Os × f, latencies ÷ f).

* **Scale.** One SQLite database of 1,000 runs × 20 workloads (20,000 results, json+ reports with their
  histograms), stored through the store API as ``iolab import`` stores outputs (``importer.plan_results``
  of each scaled output), runs 6 h apart, 3 % noise, workloads w00–w09 10 % slower from run 500. Timed as
  people run it, each a fresh process from start to exit (wall clock), median of ``--rounds``: ``iolab
  history`` of every series (20 workloads × IOPS, bandwidth, clat mean and p99 = 80 series; the default
  CPU µs/IO is unmeasured in imports) against the target 2 s, and ``iolab history --workload w07 --metric
  iops`` (one series) against 0.5 s; and, in the same rounds, ``iolab runs`` on the same database (the
  floor every command pays: Python, the database code, opening the database), as ratios; with compiled
  modules cached, as an installed iolab has them (``ratios.installed_env``). The rounds show
  a history again: the change points found by the first ``history`` after the database was written
  (timed once and printed, not a target) are kept in the database (``change_points``) and read back.
* **Accuracy.** 100 series of 60 runs with a 5 % step at a random run from 20 to 40 (at least 20 runs on
  each side) and 100 flat series of 30 runs, 3 % run-to-run noise, written as 60 fio outputs a day apart
  (every series a job of its own in each) and imported with ``importer.import_sources`` as ``iolab import``
  does; ``analyze.history`` on what the store holds. Targets: the step found within 5 runs of where it
  happened in >= 95 % of the step series; any change point in <= 1 % of the flat series. ``--series N``
  makes N of each (the rates' sampling error is about ±2 % at 100).

    .venv/bin/python benchmarks/history.py [--rounds 5] [--series 100] [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))  # historydata: scaled fio output

import historydata
from iolab.analyze import history
from iolab.fio import parse_output
from iolab.store.database import Store
from iolab.store.records import FinishedResult, FinishedRun, ImportedFile
from iolab.workflows import importer
from ratios import Ratio, add_json_option, emit, installed_env, say

IOLAB = [str(Path(sys.executable).parent / "iolab")]
RUNS, WORKLOADS, STEP_AT = 1000, 20, 500
T0 = 1_760_000_000
NOISE, STEP = 0.03, 0.05


def scaled_run(base: dict[str, Any], i: int, rng: random.Random) -> FinishedRun:
    """Run ``i`` of the scale database: 20 results, each a scaled copy of ``base`` parsed as an import parses it."""
    results = []
    for w in range(WORKLOADS):
        factor = rng.gauss(1, NOISE) * (0.9 if w < WORKLOADS // 2 and i >= STEP_AT else 1)
        doc = historydata.output(base, {f"w{w:02d}": (factor, {"iodepth": str(w + 1)})}, T0 + i * 6 * 3600 + w)
        text = orjson.dumps(doc).decode()
        (planned,) = importer.plan_results(parse_output(text, f"w{w:02d}.json"), f"w{w:02d}.json")
        results.append(FinishedResult(
            seq=w, target=planned.target, target_path=planned.target_path, workload=planned.workload, repeat=0,
            job_text=planned.job_text, job_hash=planned.job_hash, params=planned.params, report=planned.report,
            raw_text=text, ended_at=_ended(planned.report.timestamp_ms),
            extra={"unknown_options": list(planned.unknown_options)}))
    return FinishedRun(suite_name=f"run{i:04d}", origin="imported", source={"format": "json+"}, files=(
        ImportedFile(f"{i:08d}{'0' * 56}", f"run{i:04d}"),), results=tuple(results), label="nightly",
        fio_version="3.33")


def _ended(timestamp_ms: int | None) -> Any:
    from datetime import UTC, datetime
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC) if timestamp_ms else None


def build_scale(db: Path, base: dict[str, Any], as_json: bool) -> None:
    store = Store(f"sqlite:///{db}")
    rng = random.Random(1)
    started = time.perf_counter()
    for first in range(0, RUNS, 50):
        store.add_finished_runs([scaled_run(base, i, rng) for i in range(first, min(RUNS, first + 50))])
    store.close()
    say(f"scale database: {RUNS} runs × {WORKLOADS} workloads, {db.stat().st_size / 2**20:.0f} MiB, built in "
        f"{time.perf_counter() - started:.0f} s", as_json)


def elapsed_s(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return time.perf_counter() - started


def time_commands(db: Path, rounds: int, as_json: bool) -> dict[str, list[float]]:
    commands = {"all series": [*IOLAB, "--db", str(db), "history"],
                "one series": [*IOLAB, "--db", str(db), "history", "--workload", "w07", "--metric", "iops"],
                "iolab runs": [*IOLAB, "--db", str(db), "runs"]}
    times: dict[str, list[float]] = {name: [] for name in commands}
    env = installed_env(db.parent / "pycache")
    say(f"first history after the database was written (every series detected, then kept): "
        f"{elapsed_s(commands['all series'], env):.2f} s", as_json)
    for i in range(rounds + 1):
        for name, argv in (commands.items() if i % 2 else reversed(commands.items())):
            took = elapsed_s(argv, env)
            if i:
                times[name].append(took)  # round 0 warms the page cache and the compiled modules
    for name, values in times.items():
        say(f"{name:11} median {statistics.median(values):6.2f} s  (all: "
            f"{', '.join(f'{v:.2f}' for v in values)})", as_json)
    return times


def accuracy(directory: Path, base: dict[str, Any], series: int, as_json: bool) -> tuple[float, float]:
    """(share of step series whose step was found within 5 runs, share of flat series with a change point)."""
    rng = random.Random(7)
    steps = {f"s{k:03d}": rng.randint(20, 40) for k in range(series)}
    docs = []
    for i in range(60):
        jobs = {name: (rng.gauss(1, NOISE) * (1 - STEP if i >= at else 1), {}) for name, at in steps.items()}
        if i < 30:
            jobs.update({f"f{k:03d}": (rng.gauss(1, NOISE), {}) for k in range(series)})
        docs.append(historydata.output(base, jobs, T0 + i * 86_400))
    paths = historydata.write_runs(directory / "outputs", docs)
    store = Store(f"sqlite:///{directory / 'accuracy.db'}")
    outcomes = list(importer.import_sources(store, importer.discover(paths)))
    index = {o.run_id: int(Path(o.path).stem.split("-")[1]) for o in outcomes}
    found = history.build(store.history(), ["iops"])
    store.close()
    hits = flat_hits = 0
    for s in found.series:
        changes = [index[c.run_id] for c in s.changes]
        if s.key.workload in steps:
            hits += any(abs(at - steps[s.key.workload]) <= 5 for at in changes)
        else:
            flat_hits += bool(changes)
    assert len(found.series) == 2 * series, len(found.series)
    say(f"accuracy: {hits} of {series} steps found within 5 runs; {flat_hits} of {series} flat series with a "
        "change point", as_json)
    return hits / series, flat_hits / series


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--series", type=int, default=100)
    parser.add_argument("--dir", type=Path, default=None, help="where the databases go (default: a temp dir)")
    add_json_option(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="iolab-history-", dir=args.dir) as tmp:
        found, flat = accuracy(Path(tmp), historydata.real_output(Path(tmp) / "fio-json", fmt="json"), args.series,
                               args.json)
        db = Path(tmp) / "scale.db"
        build_scale(db, historydata.real_output(Path(tmp) / "fio"), args.json)
        times = time_commands(db, args.rounds, args.json)
    median = {name: statistics.median(values) for name, values in times.items()}
    emit("history", [
        Ratio("iolab history, all 80 series of 1,000 runs × 20 workloads (s)", round(median["all series"], 3), 2.0,
              "lower"),
        Ratio("iolab history, one series of 1,000 runs (s)", round(median["one series"], 3), 0.5, "lower"),
        Ratio("all series / iolab runs on the same database", round(median["all series"] / median["iolab runs"], 2),
              4.0, "lower"),
        Ratio("one series / iolab runs on the same database", round(median["one series"] / median["iolab runs"], 2),
              2.0, "lower"),
        Ratio("5 % steps found within 5 runs (share of step series)", round(found, 3), 0.95, "higher"),
        Ratio("flat series with a change point (share)", round(flat, 3), 0.01, "lower"),
    ], args.json)


if __name__ == "__main__":
    main()
