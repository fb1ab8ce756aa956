"""Capture, replay and fit: what recording costs, how faithfully a replay reproduces, how close a fit is.

1. **Capture overhead.** An application's throughput captured / not captured, rounds alternating (best
   of each counts: this machine is shared, other jobs only ever slow a measurement down). Two
   applications on loop devices: SQLite committing 3 KB transactions with synchronous=FULL on ext4
   (commits/s), and fio 4k random reads at QD8 (IOPS; the hard case: every request is two events).
   Target >= 0.95.
2. **Replay fidelity.** fio randrw 4k 70/30 at QD4, rate-limited (``rate_iops``) so that the
   recorded timing matters, captured; the capture replayed on the same device with its original
   timing (``iolab replay``), in each of ``--rounds`` rounds. Per direction: replay IOPS / original
   IOPS, each as fio reported it (the same I/Os over each run's own runtime; target within 5 %), and
   replay clat p99 / original clat p99 (target within 20 %); the median over rounds of each round's
   ratio, printed as |ratio - 1|.
3. **Fit error.** A randrw 70/30, bssplit 4k/60:64k/40, zipf:1.2, QD8 job captured, fitted
   (``iolab fit --check``: the fitted job run through iolab on the same device and captured), and the
   fingerprints compared metric by metric: error in percentage points for shares, relative for the rest;
   the median over ``--rounds`` rounds (each a capture and its fit).
4. **Application replay fidelity** (``--only apps``). pgbench (``-c 4 -T 10`` after ``-i -s 10``,
   a PostgreSQL cluster on ext4 on a loop device, fsync on) and a SQLite program (1,000 commits of a
   3 KB insert, synchronous=FULL) captured with ``iolab capture``, each replayed with its recorded
   timing on a second loop device (``iolab replay``), quiet and beside 4 busy processes
   (``while 1: pass``), each replay captured in turn: the replay's write IOPS over the original's
   (write requests at the device over the writes' own span, first issue to last completion) and its
   flushes (flush requests and REQ_PREFLUSH writes) over the original's. Target >= 0.95 quiet; the
   loaded figures are stated (no target: printed as >= 0). ``/sys/block/X/stat``'s write count is
   printed beside: on a loop device it counts each flush as a write too (and no flushes).
5. **Long capture.** ``--window`` (60) seconds of fio 4k random reads at QD8 captured, beside a small
   1-second capture in the same run (its start-up and storing are the baseline): requests/s captured
   (the load: >= 40k), the capture's peak RSS (target <= 256 MiB), its seconds after the window closed
   (<= 10), events the kernel dropped (0), and ``iolab show`` and ``iolab report`` of it (<= 1.5 s
   each; and against the same command on the small capture).

6. **Full rate** (``--only full``). fio's 4k random reads at QD8 through io_uring as fast as a loop
   device over tmpfs goes; ``--rounds`` 12 s captures (``iolab capture DEV --duration 12s``) and one of
   ``--full-window`` (36) s: events lost (target 0), requests stored over the reads the device completed
   while the capture's events were enabled (>= 0.97), the capture process's CPU seconds per second
   captured while its events were enabled (what competes with the workload: <= 0.5) and in all (its
   ``wait4`` rusage, start-up and storing after the window included: <= 0.5), its peak RSS at 12 s (<= 256
   MiB) and at the longer window (<= 256 MiB, within 15 % of 12 s). ``--baseline SRC`` measures another
   iolab (e.g. a worktree of main) in the same rounds, arms alternating; the ratios are this iolab's.

Every part runs with a CPU latency request of 0 held (``ratios.idle_states``): the capture's own CPU use
would otherwise keep CPUs out of idle states in the captured arm alone and "speed up" the application
there (on this 2-CPU VM, fio's 4k random reads at QD8 ran 2.3× as fast with idle CPUs polling).
``--idle-as-is`` leaves the machine as it is.

    .venv/bin/python benchmarks/capture.py [--rounds 3] [--runtime 5] [--only fidelity] [--window 60] [--idle-as-is]
        [--full-window 36] [--baseline SRC] [--json]

Needs root (loop devices, tracefs). Everything it creates is removed afterwards, by id.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ratios import Ratio, add_idle_option, add_json_option, emit, idle_states, installed_env, say

APP = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v BLOB)")
start, n = time.monotonic(), int(sys.argv[2])
for i in range(n):
    db.execute("BEGIN"); db.execute("INSERT INTO t (v) VALUES (randomblob(3000))"); db.execute("COMMIT")
print(n / (time.monotonic() - start))
"""


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def loop(directory: Path, name: str, size_mib: int) -> Iterator[str]:
    image = directory / name
    image.write_bytes(b"")
    os.truncate(image, size_mib << 20)
    device = sh("losetup", "-f", "--show", str(image))
    try:
        yield device
    finally:
        subprocess.run(["losetup", "-d", device], check=False)


def iolab(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IOLAB_DB": str(db), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "iolab", *args], env=env, capture_output=True, text=True,
                          check=False)


def fio_iops(output: Path) -> float:
    job = json.loads(output.read_text())["jobs"][0]
    return float(job["read"]["iops"] + job["write"]["iops"])


def overhead(tmp: Path, rounds: int, runtime: int, as_json: bool) -> list[Ratio]:
    db = tmp / "overhead.db"
    out: list[Ratio] = []
    with loop(tmp, "app.img", 256) as disk:
        sh("mkfs.ext4", "-q", disk)
        mnt = tmp / "mnt"
        mnt.mkdir()
        sh("mount", disk, str(mnt))
        try:
            (tmp / "app.py").write_text(APP)
            sqlite = [sys.executable, str(tmp / "app.py"), str(mnt / "a.sqlite"), "400"]
            fio = ["fio", "--name=r", f"--filename={disk}", "--rw=randread", "--bs=4k", "--direct=1",
                   "--ioengine=libaio", "--iodepth=8", "--size=200M", f"--runtime={runtime}", "--time_based",
                   "--output-format=json", f"--output={tmp / 'fio.json'}"]
            for name, argv, measure in (("sqlite commits/s", sqlite, None), ("fio 4k randread IOPS", fio, "fio")):
                best = {"plain": 0.0, "captured": 0.0}
                for r in range(rounds):
                    for side in (("plain", "captured") if r % 2 == 0 else ("captured", "plain")):
                        if side == "plain":
                            text = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
                        else:
                            done = iolab(db, "capture", disk, "--format", "json", "--", *argv)
                            if done.returncode != 0:
                                sys.exit(done.stderr)
                            text = ""
                        if measure == "fio":
                            value = fio_iops(tmp / "fio.json")
                        elif side == "plain":
                            value = float(text.strip().splitlines()[-1])
                        else:
                            value = _app_rate(done)
                        best[side] = max(best[side], value)
                        say(f"  {name} round {r + 1} {side}: {value:,.0f}", as_json)
                out.append(Ratio(f"capture overhead: {name} captured / not", best["captured"] / best["plain"],
                                 0.95, "higher"))
        finally:
            subprocess.run(["umount", str(mnt)], check=False)
    return out


def _app_rate(done: subprocess.CompletedProcess[str]) -> float:
    """The SQLite app prints its commits/s on stdout before iolab's JSON document."""
    first = done.stdout.lstrip().split("\n", 1)[0]
    return float(first)


def fidelity(tmp: Path, rounds: int, runtime: int, as_json: bool) -> list[Ratio]:
    """Per round: the rate-limited job captured (its fio report is the original) and at once replayed
    on the same device; each round's replay/original ratio, the median over rounds counts (the
    machine is shared: p99s move by a factor of ten between minutes, but less within a pair)."""
    db = tmp / "fidelity.db"
    ratios: dict[str, list[float]] = {}
    originals: dict[str, list[float]] = {}
    with loop(tmp, "dev.img", 256) as device:
        for r in range(rounds):
            out = tmp / "orig.json"
            job = ["fio", "--name=orig", f"--filename={device}", "--rw=randrw", "--rwmixread=70", "--bs=4k",
                   "--direct=1", "--ioengine=libaio", "--iodepth=4", "--rate_iops=2100,900", "--size=200M",
                   f"--runtime={runtime}", "--time_based", "--output-format=json", f"--output={out}"]
            done = iolab(db, "capture", device, "--label", f"orig-{r}", "--", *job)
            if done.returncode != 0:
                sys.exit(done.stderr)
            original = json.loads(out.read_text())["jobs"][0]
            replayed = iolab(db, "replay", f"orig-{r}", "--target", f"same={device}", "--destroy", device,
                             "--format", "json")
            if replayed.returncode != 0:
                sys.exit(replayed.stderr)
            doc = json.loads(replayed.stdout)
            for direction in ("read", "write"):
                # both as fio reported them: the I/Os over the job's runtime, p99 of clat
                stats = [d for j in doc["results"][0]["jobs"] for k, d in j["directions"].items() if k == direction]
                iops = sum(d["iops"] for d in stats)
                p99 = max(d["clat"]["percentiles_ns"]["99"] for d in stats)
                orig_p99 = float(original[direction]["clat_ns"]["percentile"]["99.000000"])
                say(f"  round {r + 1} {direction}: IOPS {original[direction]['iops']:,.0f} -> {iops:,.0f}; clat p99 "
                    f"{orig_p99 / 1000:,.0f} -> {p99 / 1000:,.0f} µs", as_json)
                ratios.setdefault(f"{direction} IOPS", []).append(iops / original[direction]["iops"])
                ratios.setdefault(f"{direction} clat p99", []).append(p99 / orig_p99)
                originals.setdefault(f"{direction} clat p99", []).append(orig_p99)
    _noise_floor(originals, as_json)
    return [Ratio(f"replay fidelity: {name} |replay/original - 1| (median of {rounds})",
                  abs(statistics.median(values) - 1), 0.05 if "IOPS" in name else 0.20, "lower")
            for name, values in ratios.items()]


def _noise_floor(originals: dict[str, list[float]], as_json: bool) -> None:
    """How far the same original job moves between rounds: the median |next round / this round - 1|,
    the error a perfect reproduction would still show on this machine (printed, not a ratio)."""
    for name, values in originals.items():
        steps = [abs(b / a - 1) for a, b in itertools.pairwise(values) if a]
        if steps:
            say(f"  noise floor: the original's {name} round to round: {statistics.median(steps):.3g}", as_json)


FIT_TARGETS = {"%": 3.0, "": 0.25, "IOPS": 0.25, "µs": 0.5}


def fit_error(tmp: Path, rounds: int, runtime: int, as_json: bool) -> list[Ratio]:
    """Per round: the known job captured on one device, fitted and checked on another (``iolab fit
    --check``, which also replays the capture there); each metric's error (the fitted job against that
    replay) per round, the median over rounds counts."""
    db = tmp / "fit.db"
    errors: dict[tuple[str, str], list[float]] = {}
    originals: dict[str, list[float]] = {}
    with loop(tmp, "a.img", 256) as a, loop(tmp, "b.img", 256) as b:
        for r in range(rounds):
            job = ["fio", "--name=known", f"--filename={a}", "--rw=randrw", "--rwmixread=70",
                   "--bssplit=4k/60:64k/40", "--random_distribution=zipf:1.2", "--direct=1", "--ioengine=libaio",
                   "--iodepth=8", "--size=128M", f"--runtime={runtime}", "--time_based", "--output-format=terse",
                   f"--output={tmp / 'known.terse'}"]
            done = iolab(db, "capture", a, "--label", f"known-{r}", "--", *job)
            if done.returncode != 0:
                sys.exit(done.stderr)
            fitted = iolab(db, "fit", f"known-{r}", "-o", str(tmp / "fitted.fio"), "--check", f"b={b}", "--destroy",
                           b, "--format", "json")
            if fitted.returncode != 0:
                sys.exit(fitted.stderr)
            for row in json.loads(fitted.stdout)["closeness"]:
                # the fit error is against the capture's replay on the same device (fit --check runs it),
                # so the device's own difference (row["device_difference"]) is not counted as the fit's
                reference = row["replayed"] if row.get("replayed") is not None else row["original"]
                if reference in (None, 0) or row["fitted"] is None:
                    continue
                pct = row["unit"] == "%"
                value = abs(row["error"]) if pct else abs(row["fitted"] / reference - 1)
                say(f"  round {r + 1} {row['metric']}: {row['original']:.2f} (replayed {reference:.2f}) -> "
                    f"{row['fitted']:.2f}", as_json)
                errors.setdefault((row["metric"], row["unit"]), []).append(value)
                if not pct:
                    originals.setdefault(row["metric"], []).append(row["original"])
    _noise_floor(originals, as_json)
    return [Ratio(f"fit error: {metric} ({'points' if unit == '%' else 'relative'}, median of {len(values)})",
                  statistics.median(values), FIT_TARGETS.get(unit, 0.25), "lower")
            for (metric, unit), values in errors.items()]


def _rss_kib(db: Path, *args: str) -> tuple[float, int, subprocess.CompletedProcess[str]]:
    """``iolab ARGS``: wall seconds, peak RSS (KiB, of that process alone: ``wait4``), the result; with
    compiled modules cached as an installed iolab has them (``ratios.installed_env``)."""
    env = {**installed_env(db.parent / "pycache"), "IOLAB_DB": str(db), "COLUMNS": "200"}
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "iolab", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}
    readers = [threading.Thread(target=lambda s=stream, k=key: chunks[k].append(s.read()))
               for stream, key in ((proc.stdout, "out"), (proc.stderr, "err"))]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    for reader in readers:
        reader.join()
    code = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss, subprocess.CompletedProcess(proc.args, code, b"".join(chunks["out"]).decode(),
                                                              b"".join(chunks["err"]).decode())


def _reads(device: str, seconds: int, *options: str) -> subprocess.Popen[bytes]:
    """fio 4k random reads of ``device`` for ``seconds``, in the background (its output discarded)."""
    return subprocess.Popen(["fio", "--name=load", f"--filename={device}", "--rw=randread", "--bs=4k", "--direct=1",
                             "--ioengine=libaio", "--size=32M", f"--runtime={seconds}", "--time_based",
                             "--randrepeat=0", *options], stdout=subprocess.DEVNULL)


def long_capture(tmp: Path, rounds: int, runtime: int, as_json: bool, window: int = 60) -> list[Ratio]:
    """A ``window``-second capture of fio 4k random reads at QD8 (as many requests as the loop
    device takes: ≥ 40k/s on a quiet machine), beside a small 1-second capture in the same run (reads
    at 200 IOPS, so that its report has the same tables and charts): the long one's peak RSS, its
    seconds after the window closed (its wall time less the window, less the small capture's wall
    time beyond its own second: start-up and storing), the events the kernel dropped, and ``iolab
    show`` and ``report`` of it against the same command on the small one."""
    db = tmp / "long.db"
    with loop(tmp, "long.img", 512) as device, loop(tmp, "small.img", 64) as small:
        load = _reads(small, 4, "--rate_iops=200")
        try:
            time.sleep(1)
            small_wall, small_rss, done = _rss_kib(db, "capture", small, "--duration", "1s", "--label", "small")
        finally:
            load.terminate()
            load.wait()
        if done.returncode != 0:
            sys.exit(done.stderr)
        load = _reads(device, window + 20, "--iodepth=8")
        try:
            time.sleep(3)
            wall, rss, done = _rss_kib(db, "capture", device, "--duration", f"{window}s", "--label", "long",
                                       "--format", "json")
        finally:
            load.terminate()
            load.wait()
        if done.returncode != 0:
            sys.exit(done.stderr)
    fp = json.loads(done.stdout)["fingerprint"]
    after = wall - window - max(0.0, small_wall - 1)
    rate = fp["requests"] / max(fp["active_s"], 1e-9)
    say(f"  long capture: {fp['requests']:,} requests in {window} s ({rate:,.0f}/s), {fp['lost_events']:,} events "
        f"lost; wall {wall:.1f} s, peak RSS {rss / 1024:.0f} MiB (small 1 s capture: wall {small_wall:.1f} s, "
        f"RSS {small_rss / 1024:.0f} MiB)", as_json)
    shows: dict[tuple[str, str], float] = {}
    for command in ("show", "report"):
        timed: dict[str, list[float]] = {"long": [], "small": []}
        # untimed: this run compiles the command's modules into the fresh cache, as installing iolab does
        _rss_kib(db, command, "small", *(("-o", str(tmp / "small.html")) if command == "report" else ()))
        for _ in range(3):  # the two interleaved: this machine's speed drifts by a third from minute to minute
            for label in timed:
                extra = ("-o", str(tmp / f"{label}.html")) if command == "report" else ()
                timed[label].append(_rss_kib(db, command, label, *extra)[0])
        for label, times in timed.items():
            shows[command, label] = min(times)
            say(f"  {command} {label}: {min(times):.2f} s (best of 3; all: "
                f"{', '.join(f'{t:.2f}' for t in times)})", as_json)
    return [Ratio(f"long capture: requests/s captured over {window} s (the load; needs >= 40k)", rate, 40_000,
                  "higher"),
            Ratio("long capture: peak RSS (MiB)", rss / 1024, 256, "lower"),
            Ratio("long capture: s after the window closed, less a small capture's start-up and store", after, 10,
                  "lower"),
            Ratio("long capture: events the kernel dropped", fp["lost_events"], 0, "lower"),
            *(ratio for command in ("show", "report") for ratio in (
                Ratio(f"{command} of the {fp['requests']:,}-request capture (s, best of 3)", shows[command, "long"],
                      1.5, "lower"),
                Ratio(f"{command}: long capture / small capture (time)",
                      shows[command, "long"] / shows[command, "small"], 1.2, "lower")))]


def _full_reads(device: str, seconds: int) -> subprocess.Popen[bytes]:
    """fio as fast as the device goes: 4k random reads at QD8, io_uring, direct, for ``seconds``."""
    return subprocess.Popen(["fio", "--name=full", f"--filename={device}", "--rw=randread", "--bs=4k", "--direct=1",
                             "--ioengine=io_uring", "--iodepth=8", "--size=200M", f"--runtime={seconds}",
                             "--time_based", "--randrepeat=0", "--output=/dev/null"], stdout=subprocess.DEVNULL)


def _reads_done(device: str) -> int:
    """Reads the device completed (``/sys/block/X/stat`` field 1, ``Documentation/block/stat.rst``)."""
    return int(Path(f"/sys/block/{Path(device).name}/stat").read_text().split()[0])


@dataclass
class Windowed:
    """One capture at full rate: its process's CPU seconds (all of it, and while its events were
    enabled), peak RSS (KiB), exit, output, and the reads the device completed while its events were
    enabled (``None``: the window was not seen)."""

    cpu_s: float
    rss_kib: int
    done: subprocess.CompletedProcess[str]
    device_reads: int | None
    window_cpu_s: float | None = None


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` used so far (``/proc/PID/stat`` fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _capture_window(db: Path, device: str, seconds: int, env: dict[str, str]) -> Windowed:
    """``iolab capture DEVICE --duration SECONDS`` while fio runs: its rusage (``wait4``: the process
    and nothing else, fio is not its child), and the device's completed reads and the process's CPU
    seconds between its events' enabling and disabling, seen by polling its instance's ``enable``
    every 2 ms (±2 ms of reads; CPU in clock ticks, 10 ms)."""
    out, err = db.parent / "capture.out", db.parent / "capture.err"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "iolab", "capture", device, "--duration", f"{seconds}s",
                                 "--format", "json"], env={**env, "IOLAB_DB": str(db), "COLUMNS": "200"},
                                stdout=stdout, stderr=stderr)
    enable: Path | None = None
    on = start = end = None
    cpu: list[float] = []
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if enable is None:
            found = sorted(Path("/sys/kernel/tracing/instances").glob(f"iolab-{proc.pid}-*"))
            enable = found[0] / "events/block/block_rq_complete/enable" if found else None
        if enable is not None and end is None:
            try:
                now = enable.read_text().strip() == "1"
            except OSError:
                now = False
            if now and not on:
                start = _reads_done(device)
                cpu.append(_cpu_s(proc.pid))
            elif on and not now:
                end = _reads_done(device)
                cpu.append(_cpu_s(proc.pid))
            on = now
        time.sleep(0.002)
    proc.returncode = os.waitstatus_to_exitcode(status)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out.read_text(), err.read_text())
    reads = end - start if start is not None and end is not None else None
    return Windowed(usage.ru_utime + usage.ru_stime, usage.ru_maxrss, done, reads,
                    cpu[1] - cpu[0] if len(cpu) == 2 else None)


def full_rate(tmp: Path, rounds: int, window: int, as_json: bool, baseline: str | None = None) -> list[Ratio]:
    """``rounds`` 12 s captures of fio at the device's full rate (4k random reads, QD8, io_uring,
    direct, on a loop device over tmpfs; idle states held as for every part), and one of ``window``
    (36) s: events lost, requests stored over the device's reads in the window, the capture
    process's CPU seconds per second captured, its peak RSS at 12 s and at ``window`` s. With
    ``baseline`` (another iolab's ``src``, e.g. main's worktree) the same for it, arms alternating
    round by round; the ratios are this iolab's, the baseline's are printed beside."""
    arms = {"this": installed_env(tmp / "pycache")}
    if baseline:
        arms["baseline"] = {**arms["this"], "PYTHONPATH": baseline}
    found: dict[str, dict[str, list[float]]] = {arm: {} for arm in arms}
    with tempfile.TemporaryDirectory(prefix="iolab-bench-full-", dir="/dev/shm") as shm, \
            loop(Path(shm), "full.img", 256) as device:
        for arm, env in arms.items():  # untimed: compiles each arm's modules into its cache, as installing does
            _capture_window(tmp / f"warm-{arm}.db", device, 1, env)
        plan = [(r, 12) for r in range(rounds)] + [(rounds, window)]
        for r, seconds in plan:
            for arm in (list(arms) if r % 2 == 0 else list(arms)[::-1]):
                load = _full_reads(device, seconds + 10)
                try:
                    time.sleep(2)
                    got = _capture_window(tmp / f"full-{arm}.db", device, seconds, arms[arm])
                finally:
                    load.terminate()
                    load.wait()
                if got.done.returncode != 0:
                    sys.exit(got.done.stderr)
                doc = json.loads(got.done.stdout)
                fp, how = doc["fingerprint"], _how(doc)
                share = fp["requests"] / got.device_reads if got.device_reads else float("nan")
                per_s = got.cpu_s / seconds
                in_window = (got.window_cpu_s or float("nan")) / seconds
                say(f"  {arm} {seconds} s: {fp['requests']:,} requests stored of {got.device_reads or 0:,} reads in "
                    f"the window ({share:.3f}, {fp['requests'] / seconds:,.0f}/s), {fp['lost_events']:,} events lost, "
                    f"{got.cpu_s:.2f} CPU-s ({per_s:.3f}/s; in the window {in_window:.3f}/s), peak RSS "
                    f"{got.rss_kib / 1024:.0f} MiB, load {os.getloadavg()[0]:.2f}; {how}", as_json)
                figures = found[arm]
                key = "long" if r == rounds else "12"
                for name, value in (("lost", fp["lost_events"]), ("share", share), ("cpu", per_s),
                                    ("window cpu", in_window), ("rss", got.rss_kib / 1024)):
                    figures.setdefault(f"{name} {key}", []).append(value)
    for arm, figures in found.items():
        say(f"  {arm}: " + "; ".join(f"{k} {', '.join(f'{v:.3g}' for v in vs)}" for k, vs in figures.items()), as_json)
    mine = found["this"]
    rss12, rss_long = max(mine["rss 12"]), max(mine["rss long"])
    return [Ratio(f"full rate: events lost, worst of {rounds} 12 s captures", max(mine["lost 12"]), 0, "lower"),
            Ratio(f"full rate: requests stored / device reads in the window, worst of {rounds}",
                  min(mine["share 12"]), 0.97, "higher"),
            Ratio(f"full rate: capture CPU-s per s while recording, worst of {rounds}", max(mine["window cpu 12"]), 0.5,
                  "lower"),
            Ratio(f"full rate: capture CPU-s per s captured, start-up and storing included, worst of {rounds}",
                  max(mine["cpu 12"]), 0.5, "lower"),
            Ratio("full rate: peak RSS of a 12 s capture (MiB)", rss12, 256, "lower"),
            Ratio(f"full rate: peak RSS of a {window} s capture (MiB)", rss_long, 256, "lower"),
            Ratio(f"full rate: peak RSS {window} s / 12 s", rss_long / rss12, 1.15, "lower")]


def _how(doc: dict[str, Any]) -> str:
    """Which path read the events, from the stored capture's options (``how``)."""
    text = json.dumps(doc)
    return "binary pages" if "binary ring-buffer pages" in text else "trace_pipe text"


PG_BIN = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/pgbench"), reverse=True)), None)


def _disk_stat(device: str) -> tuple[int, int]:
    """Writes and flushes the device completed (``/sys/block/X/stat``: fields 5 and 15,
    ``Documentation/block/stat.rst``): a count independent of iolab's trace and fio's report (a loop
    device counts no flushes there: they are counted in the traces, ``_traced``)."""
    fields = Path(f"/sys/block/{Path(device).name}/stat").read_text().split()
    return int(fields[4]), int(fields[14]) if len(fields) > 14 else 0


def _traced(db: Path, label: str) -> tuple[float, int, int]:
    """The span of a capture's writes and flushes, from the first one's issue to the last one's
    completion (s: the time the application, or its replay, took to make them), and its flushes
    (flush requests and writes with REQ_PREFLUSH, as the fingerprint counts them) and writes."""
    from iolab.store.database import Store
    from iolab.workflows.capture.record import load_trace
    from iolab.workflows.capture.trace import FLUSH, PREFLUSH, WRITE
    store = Store(f"sqlite:///{db}")
    (run_id,) = [r.id for r in store.list_runs() if getattr(r, "label", None) == label][:1]
    trace = load_trace(store, store.get_run(run_id))
    rows = (trace.op == WRITE) | (trace.op == FLUSH)
    issued, done = trace.issue_ns[rows], trace.complete_ns[rows]
    flushes = int(((trace.op == FLUSH) | (trace.flags & PREFLUSH > 0)).sum())
    return (float(max(int(done.max()), int(issued.max())) - int(issued.min())) / 1e9, flushes,
            int((trace.op == WRITE).sum()))


@contextlib.contextmanager
def _busy(count: int) -> Iterator[None]:
    """``count`` CPU-bound processes (``while 1: pass``) for the block's duration, ended by pid."""
    procs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _as_postgres(*argv: str) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv]


@contextlib.contextmanager
def _postgres(tmp: Path, disk: str) -> Iterator[list[str]]:
    """A PostgreSQL cluster on ext4 on ``disk`` (fsync on), initialised for pgbench scale 10; yields
    the pgbench command line (without the run's options), stops the cluster afterwards."""
    assert PG_BIN is not None
    bindir = PG_BIN.parent
    base = Path(tempfile.mkdtemp(prefix="iolab-bench-pg-"))  # postgres must reach it
    shutil.chown(base, "postgres")
    mnt, sock, port = base / "mnt", base / "sock", str(40000 + os.getpid() % 10000)
    sh("mkfs.ext4", "-q", "-F", disk)  # the previous round's file system: no question asked
    mnt.mkdir()
    sh("mount", disk, str(mnt))
    try:
        shutil.chown(mnt, "postgres")
        sock.mkdir()
        shutil.chown(sock, "postgres")
        subprocess.run(_as_postgres(f"{bindir}/initdb", "-D", str(mnt / "data"), "-U", "postgres", "--auth=trust"),
                       check=True, capture_output=True)
        subprocess.run(_as_postgres(f"{bindir}/pg_ctl", "-D", str(mnt / "data"), "-l", str(base / "log"), "-w", "-o",
                                    f"-p {port} -k {sock} -c listen_addresses=''", "start"),
                       check=True, capture_output=True)
        try:
            pgbench = [f"{bindir}/pgbench", "-h", str(sock), "-p", port, "-U", "postgres"]
            subprocess.run(_as_postgres(*pgbench, "-i", "-s", "10", "postgres"), check=True, capture_output=True)
            subprocess.run(["sync"], check=True)
            yield _as_postgres(*pgbench)
        finally:
            subprocess.run(_as_postgres(f"{bindir}/pg_ctl", "-D", str(mnt / "data"), "-m", "fast", "stop"),
                           check=False, capture_output=True)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def _app_fidelity(tmp: Path, db: Path, name: str, disk: str, target: str, argv: list[str], loads: dict[str, int],
                  as_json: bool) -> dict[str, tuple[float, float]]:
    """``argv`` captured on ``disk``, then replayed on ``target`` with its recorded timing once per
    CPU load in ``loads`` (that many busy processes), each replay captured in turn: per load, the
    replay's write IOPS over the original's (each the write requests its capture traced at the device
    over the writes' own span; ``/sys/block/X/stat``'s count printed beside) and its flush count over
    the original's."""
    before = _disk_stat(disk)
    done = iolab(db, "capture", disk, "--label", name, "--format", "json", "--", *argv)
    after = _disk_stat(disk)
    if done.returncode != 0:
        sys.exit(done.stderr)
    span, flushes, writes = _traced(db, name)
    say(f"  {name}: {writes:,} writes ({after[0] - before[0]:,} in /sys/block/X/stat) and {flushes:,} flushes "
        f"traced over {span:.2f} s ({writes / span:,.0f} write IOPS)", as_json)
    out = {}
    for load, busy in loads.items():
        # the application's disk written back first: its loop device's backing file shares a file system
        # with the target's, and a replay overlapping that write-back finds its flushes slowed (and merged)
        subprocess.run(["sync"], check=True)
        with _busy(busy):
            before = _disk_stat(target)
            replayed = iolab(db, "capture", target, "--label", f"{name}-replay-{load}", "--format", "json", "--",
                             sys.executable, "-m", "iolab", "replay", name, "--target", f"t={target}", "--destroy",
                             target, "--label", f"{name}-replayed-{load}")
            after = _disk_stat(target)
        if replayed.returncode != 0:
            sys.exit(replayed.stderr)
        r_span, r_flushes, r_writes = _traced(db, f"{name}-replay-{load}")
        iops = (r_writes / r_span) / (writes / span)
        flush = r_flushes / flushes if flushes else float("nan")
        say(f"  {name} replayed ({load}, {busy} busy processes): {r_writes:,} writes ({after[0] - before[0]:,} in "
            f"stat) and {r_flushes:,} flushes over "
            f"{r_span:.2f} s ({r_writes / r_span:,.0f} write IOPS): write IOPS ×{iops:.3f}, flushes ×{flush:.3f}",
            as_json)
        out[load] = (iops, flush)
    return out


SQLITE_APP = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v BLOB)")
for i in range(int(sys.argv[2])):
    db.execute("BEGIN"); db.execute("INSERT INTO t (v) VALUES (randomblob(3000))"); db.execute("COMMIT")
"""


def apps(tmp: Path, rounds: int, runtime: int, as_json: bool) -> list[Ratio]:
    """pgbench (``-c 4 -T 10`` after ``-i -s 10``) and a SQLite program (a commit per 3 KB insert,
    fsync each) captured on ext4 on a loop device and replayed (``iolab replay``, recorded timing) on
    another, quiet and beside 4 busy processes: write IOPS and flush count, replay / original, at the
    device (see ``_app_fidelity``); the median over ``rounds`` rounds."""
    db = tmp / "apps.db"
    loads = {"quiet": 0, "loaded": 4}
    results: dict[tuple[str, str, str], list[float]] = {}
    with loop(tmp, "appdisk.img", 768) as disk, loop(tmp, "apptarget.img", 768) as target:
        for r in range(rounds):
            if PG_BIN is not None:
                with _postgres(tmp, disk) as pgbench:
                    found = _app_fidelity(tmp, db, f"pgbench-{r}", disk, target,
                                          [*pgbench, "-c", "4", "-T", "10", "postgres"], loads, as_json)
                for load, (iops, flush) in found.items():
                    results.setdefault(("pgbench", load, "write IOPS"), []).append(iops)
                    results.setdefault(("pgbench", load, "flushes"), []).append(flush)
            else:
                say("  pgbench: PostgreSQL is not installed (scripts/system-packages test): skipped", as_json)
            sh("mkfs.ext4", "-q", "-F", disk)
            mnt = tmp / "appmnt"
            mnt.mkdir(exist_ok=True)
            sh("mount", disk, str(mnt))
            try:
                (tmp / "sqlite_app.py").write_text(SQLITE_APP)
                found = _app_fidelity(tmp, db, f"sqlite-{r}", disk, target,
                                      [sys.executable, str(tmp / "sqlite_app.py"), str(mnt / "a.sqlite"), "1000"],
                                      loads, as_json)
            finally:
                subprocess.run(["umount", str(mnt)], check=False)
            for load, (iops, flush) in found.items():
                results.setdefault(("sqlite", load, "write IOPS"), []).append(iops)
                results.setdefault(("sqlite", load, "flushes"), []).append(flush)
    return [Ratio(f"app replay: {app} {metric} replay/original, {load} (median of {len(values)})",
                  statistics.median(values), 0.95 if load == "quiet" else 0.0, "higher")
            for (app, load, metric), values in results.items()]


PARTS = {"full": ("full rate", full_rate), "overhead": ("capture overhead", overhead),
         "fidelity": ("replay fidelity", fidelity), "fit": ("fit error", fit_error),
         "long": ("long capture", long_capture),
         "apps": ("application replay fidelity", apps)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runtime", type=int, default=5, help="seconds per fio run")
    parser.add_argument("--only", action="append", choices=list(PARTS), help="run this part (repeatable; default all)")
    parser.add_argument("--window", type=int, default=60, help="seconds of the long capture")
    parser.add_argument("--full-window", type=int, default=36, help="seconds of the longer full-rate capture")
    parser.add_argument("--baseline", metavar="SRC",
                        help="another iolab's src directory (e.g. a worktree of main): the full-rate part measures "
                             "it too, arms alternating")
    add_json_option(parser)
    add_idle_option(parser)
    args = parser.parse_args()
    started = time.monotonic()
    ratios: list[Ratio] = []
    with idle_states(args.idle_as_is, args.json) as idle, \
            tempfile.TemporaryDirectory(prefix="iolab-bench-capture-") as tmp:
        for name in args.only or PARTS:
            title, part = PARTS[name]
            say(title, args.json)
            if name == "long":
                ratios += long_capture(Path(tmp), args.rounds, args.runtime, args.json, args.window)
            elif name == "full":
                ratios += full_rate(Path(tmp), args.rounds, args.full_window, args.json, args.baseline)
            else:
                ratios += part(Path(tmp), args.rounds, args.runtime, args.json)
    say(f"({time.monotonic() - started:.0f} s)", args.json)
    emit("capture", ratios, args.json, idle)


if __name__ == "__main__":
    main()
