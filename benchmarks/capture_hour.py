"""An hour of capture in bounded memory: a real capture's events fed through the capture pipeline.

1. **Sample.** fio 4k random reads and writes (70/30, QD8, ``rate_iops`` summing to ``--rate``,
   50,000 requests/s) on a loop device over tmpfs, captured for ``--sample`` seconds (3) by iolab's
   tracefs capture: a real trace, whose requests are turned back into the kernel's events (an issue
   and a completion each, with the task, rwbs, sector and size the tracepoints carry).
2. **Feed.** In a child process (its peak RSS from ``wait4`` is the figure), the sample's events,
   shifted by the sample's length again and again, are fed to the capture's parser
   (``stream.Parser.add``) a quarter of a second of events at a time until ``--hours`` (1) of them
   went through, as the ring-buffer reader feeds it; then the spool is put in order and ``record.save``
   stores the capture (fingerprint, fio-shaped report, replay job, trace chunks) in a SQLite database.
   Beside it, the same for ``--baseline`` seconds (36): the baseline, long enough that every stage
   works in full chunks (so that what grows with the duration shows).
3. **Read.** ``iolab show`` and ``iolab report`` of the hour's capture and of the baseline's, as
   commands (compiled modules cached, as installed), best of 3, interleaved.

Ratios: the hour's peak RSS (MiB, target ≤ 256), the hour's peak RSS over the baseline's (≤ 1.15:
memory independent of duration), ``show`` and ``report`` of the hour (s, ≤ 2 each) and over the
baseline's (≤ 1.2). The pipeline's rate (requests/s fed and stored) is printed.

    .venv/bin/python benchmarks/capture_hour.py [--hours 1] [--rate 50000] [--sample 3] [--baseline 36] [--json]

Needs root (a loop device, tracefs). Its files go to a temporary directory under ``--dir`` (the
spool of an hour is ~7 GB, its database ~1 GB), removed afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from capture import _rss_kib, loop
from ratios import Ratio, add_idle_option, add_json_option, emit, idle_states, say


def sample(tmp: Path, seconds: float, rate: int, out: Path, as_json: bool) -> None:
    """Capture ``seconds`` of fio randrw at ``rate`` requests/s on a loop device over ``tmp``; store
    its events in ``out`` (npz: ``t_ns``, ``issue``, ``pid``, ``task``, ``rwbs``, ``sector``,
    ``nr_sectors`` in time order, and ``span_ns``)."""
    from iolab.workflows.capture import record, stream

    with loop(tmp, "sample.img", 256) as device:
        fio = subprocess.Popen(["fio", "--name=sample", f"--filename={device}", "--rw=randrw", "--rwmixread=70",
                                "--bs=4k", "--direct=1", "--ioengine=io_uring", "--iodepth=8",
                                f"--rate_iops={rate * 7 // 10},{rate * 3 // 10}", "--time_based",
                                f"--runtime={seconds + 4}", "--randrepeat=0"], stdout=subprocess.DEVNULL)
        try:
            time.sleep(1.5)
            captured = record.capture(device, duration_s=seconds)
            trace = captured.trace.load()
            captured.close()
        finally:
            fio.terminate()
            fio.wait()
    # requests without a completion (in flight at the end, or paired wrongly) would be in flight for
    # the whole hour, once per repetition
    trace = trace.select(trace.complete_ns >= 0)
    say(f"sample: {len(trace):,} requests in {seconds:g} s ({len(trace) / seconds:,.0f}/s), "
        f"{trace.lost_events} events lost", as_json)
    events = stream.events_of(trace)
    np.savez(out, **{f.name: getattr(events, f.name) for f in dataclasses.fields(events)},
             span_ns=np.array([max(trace.duration_ns, trace.span_ns + 1)]))


def feed(events: Path, seconds: float, db: Path, device: str, label: str) -> None:
    """The child: ``seconds`` of the sample's events, repeated, through the parser into ``db``."""
    from datetime import UTC, datetime

    from iolab.facts import targets
    from iolab.store.database import Store
    from iolab.workflows.capture import record, stream

    with np.load(events) as data:
        sample_events = {k: data[k] for k in ("t_ns", "issue", "pid", "task", "rwbs", "sector", "nr_sectors")}
        period = int(data["span_ns"][0])
    quarter = 250_000_000
    cuts = np.searchsorted(sample_events["t_ns"], np.arange(quarter, period, quarter))
    parts = [{k: v[a:b] for k, v in sample_events.items()}
             for a, b in zip(np.concatenate([[0], cuts]), np.append(cuts, sample_events["t_ns"].size), strict=True)]
    parser = stream.Parser()
    started, fed, shift = time.monotonic(), 0, 0
    while shift < seconds * 1e9:
        for part in parts:
            parser.add(stream.Events(**{**part, "t_ns": part["t_ns"] + shift}))
            fed += int(part["issue"].sum())
        shift += period
    spooled = parser.finish(duration_ns=shift)
    fed_s = time.monotonic() - started
    capture = record.Capture(trace=spooled, device=targets.inspect(device), started_at=datetime.now(UTC),
                             how="events of a sample capture fed through the pipeline (benchmarks/capture_hour.py)")
    run_id = record.save(Store(str(db)), capture, label=label)
    print(f"{label}: run {run_id}, {fed:,} requests fed in {fed_s:.1f} s, stored in "
          f"{time.monotonic() - started - fed_s:.1f} s more", file=sys.stderr)


def _fed(events: Path, seconds: float, db: Path, device: str, label: str) -> tuple[float, int]:
    """``feed`` in a child process: its wall seconds and peak RSS (KiB)."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, __file__, "--feed", str(events), "--seconds", str(seconds), "--db",
                             str(db), "--device", device, "--label", label])
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        sys.exit(f"feeding {label} failed")
    return time.monotonic() - started, usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--rate", type=int, default=50_000, help="requests/s of the sample")
    parser.add_argument("--sample", type=float, default=3.0, help="seconds of the sample capture")
    parser.add_argument("--baseline", type=float, default=36.0, help="seconds of the baseline's feed")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--feed", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--device", help=argparse.SUPPRESS)
    parser.add_argument("--label", help=argparse.SUPPRESS)
    add_json_option(parser)
    add_idle_option(parser)
    args = parser.parse_args()
    if args.feed:
        feed(args.feed, args.seconds, args.db, args.device, args.label)
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp_name, idle_states(args.idle_as_is, args.json) as idle:
        tmp = Path(tmp_name)
        os.environ["TMPDIR"] = str(tmp)  # the spool goes here
        events, db = tmp / "sample.npz", tmp / "hour.db"
        with loop(tmp, "facts.img", 64) as device:  # the stored captures' device facts
            sample(tmp, args.sample, args.rate, events, args.json)
            small_wall, small_rss = _fed(events, args.baseline, db, device, "baseline")
            wall, rss = _fed(events, args.hours * 3600, db, device, "hour")
        requests = args.rate * args.hours * 3600
        say(f"hour: {wall:.0f} s for ~{requests:,.0f} requests ({requests / wall:,.0f}/s), peak RSS "
            f"{rss / 1024:.0f} MiB; baseline: {small_wall:.1f} s, peak RSS {small_rss / 1024:.0f} MiB", args.json)
        timed: dict[tuple[str, str], list[float]] = {}
        for command in ("show", "report"):
            for label in ("baseline", "hour"):  # untimed first: compiles the modules into the benchmark's cache
                extra = ("-o", str(tmp / f"{label}.html")) if command == "report" else ()
                _rss_kib(db, command, label, *extra)
            for _ in range(3):
                for label in ("baseline", "hour"):
                    extra = ("-o", str(tmp / f"{label}.html")) if command == "report" else ()
                    seconds, _, done = _rss_kib(db, command, label, *extra)
                    if done.returncode:
                        sys.exit(done.stderr)
                    timed.setdefault((command, label), []).append(seconds)
        for (command, label), times in timed.items():
            say(f"{command} {label}: best {min(times):.2f} s (all: {', '.join(f'{t:.2f}' for t in times)})", args.json)
    best = {key: min(times) for key, times in timed.items()}
    hours = f"{args.hours:g} h at {args.rate:,}/s"
    emit("capture_hour", [
        Ratio(f"capture of {hours}: peak RSS (MiB)", rss / 1024, 256, "lower"),
        Ratio(f"capture of {hours} / of {args.baseline:g} s: peak RSS", rss / small_rss, 1.15, "lower"),
        *(ratio for command in ("show", "report") for ratio in (
            Ratio(f"{command} of the capture of {hours} (s, best of 3)", best[command, "hour"], 2.0, "lower"),
            Ratio(f"{command}: capture of {hours} / of {args.baseline:g} s (time)",
                  best[command, "hour"] / best[command, "baseline"], 1.2, "lower")))], args.json, idle)


if __name__ == "__main__":
    main()
