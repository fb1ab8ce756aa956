"""Does observing cost throughput? The same fio job by `iolab run`, observed and not, interleaved.

Observed: a node_exporter (Debian prometheus-node-exporter, started here on a free loopback port and
stopped afterwards) scraped once a second by iolab's observer for the whole job. Unobserved:
`--no-observe`. Job: 4k random read, QD32, libaio, direct, on a scratch file (default 10 s per run, 7
rounds; the order inside a round alternates so drift favours neither side). Prints each round and the
median IOPS ratio observed/unobserved; the target is >= 0.99. Both arms run with a CPU latency
request of 0 held (``ratios.idle_states``): the observer's and the exporter's CPU use would otherwise
keep CPUs out of idle states in the observed arm alone, a "speed-up" that hides the observer's cost.

    .venv/bin/python benchmarks/observe_overhead.py [--runtime 10] [--rounds 7] [--dir DIR] [--idle-as-is] [--json]

With --json it prints exactly one JSON object (``ratios.py``); progress then goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from overhead import JOB  # the same job as benchmarks/overhead.py (this script's folder is on sys.path)
from ratios import Ratio, add_idle_option, add_json_option, emit, idle_states, say

TARGET = 0.99


def start_exporter() -> tuple[subprocess.Popen[bytes], str]:
    exporter = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"
    if not os.access(exporter, os.X_OK):
        sys.exit("node_exporter is not installed: apt-get install prometheus-node-exporter")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    proc = subprocess.Popen([exporter, f"--web.listen-address={address}"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    host, port = address.split(":")
    for _ in range(100):
        try:
            socket.create_connection((host, int(port)), timeout=0.5).close()
            return proc, address
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit(f"node_exporter did not listen on {address}")


def via_iolab(job: Path, db: Path, observe: list[str]) -> float:
    env = {**os.environ, "IOLAB_DB": str(db)}
    iolab = [sys.executable, "-m", "iolab"]
    subprocess.run([*iolab, "run", str(job), "--keep-files", *observe], env=env, capture_output=True, text=True,
                   check=True)
    doc = json.loads(subprocess.run([*iolab, "show", "latest", "--format", "json"], env=env, capture_output=True,
                                    text=True, check=True).stdout)
    if observe[0] != "--no-observe":
        observed = doc["results"][0]["extra"].get("observed") or []
        if not observed or observed[0]["window_s"] is None:
            sys.exit("the observed run has no observation: is the exporter answering?")
    return float(doc["summary"][0]["iops"]["mean"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", type=int, default=10, help="seconds per fio run")
    parser.add_argument("--rounds", type=int, default=7, help="rounds (>= 5 for the claim)")
    parser.add_argument("--dir", default=None, help="where the scratch file goes (default: a temp dir here)")
    add_json_option(parser)
    add_idle_option(parser)
    args = parser.parse_args()
    proc, address = start_exporter()
    try:
        with idle_states(args.idle_as_is, args.json) as idle, \
                tempfile.TemporaryDirectory(dir=args.dir or ".", prefix="iolab-bench-") as tmp:
            job = Path(tmp, "job.fio")
            job.write_text(JOB.format(path=Path(tmp, "data").resolve(), runtime=args.runtime))
            db = Path(tmp, "bench.db")
            observed, unobserved = ["--observe", f"local={address}"], ["--no-observe"]
            via_iolab(job, db, unobserved)  # lay out the file once, outside the measurements
            ratios = []
            for i in range(args.rounds):
                if i % 2 == 0:
                    plain, watched = via_iolab(job, db, unobserved), via_iolab(job, db, observed)
                else:
                    watched, plain = via_iolab(job, db, observed), via_iolab(job, db, unobserved)
                ratios.append(watched / plain)
                say(f"round {i + 1}: unobserved {plain:,.0f} IOPS, observed {watched:,.0f} IOPS, "
                    f"ratio {ratios[-1]:.3f}", args.json)
    finally:
        proc.kill()
        proc.wait()
    emit("observe_overhead", [Ratio(f"median IOPS ratio observed/unobserved over {args.rounds} rounds",
                                    statistics.median(ratios), TARGET, "higher")], args.json, idle)


if __name__ == "__main__":
    main()
