"""Does iolab cost throughput? The same fio job run by bare fio and by `iolab run`, interleaved.

Job: 4k random read, QD32, libaio, direct, on a scratch file (default 10 s per run, 7 A/B rounds; the
order inside a round alternates so drift does not favour one side). Prints each round and the median IOPS
ratio iolab/fio; the target is >= 0.98 (iolab's live status stream and bookkeeping must not cost
throughput). Both arms run with a CPU latency request of 0 held (``ratios.idle_states``): iolab's own
process beside fio must not count as a speed-up by keeping CPUs out of idle states.

    .venv/bin/python benchmarks/overhead.py [--runtime 10] [--rounds 7] [--dir DIR] [--idle-as-is] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from ratios import RANDREAD_4K_QD32 as JOB
from ratios import Ratio, add_idle_option, add_json_option, emit, idle_states, say


def bare_fio(job: Path) -> float:
    out = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout[out.stdout.index("{"):])["jobs"][0]["read"]["iops"])


def via_iolab(job: Path, db: Path) -> float:
    env = {**os.environ, "IOLAB_DB": str(db)}
    iolab = [sys.executable, "-m", "iolab"]
    subprocess.run([*iolab, "run", str(job), "--keep-files"], env=env, capture_output=True, text=True, check=True)
    doc = json.loads(subprocess.run([*iolab, "show", "latest", "--format", "json"], env=env, capture_output=True,
                                    text=True, check=True).stdout)
    return float(doc["summary"][0]["iops"]["mean"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", type=int, default=10, help="seconds per fio run")
    parser.add_argument("--rounds", type=int, default=7, help="A/B rounds (>= 5 for the claim)")
    parser.add_argument("--dir", default=None, help="where the scratch file goes (default: a temp dir here)")
    add_json_option(parser)
    add_idle_option(parser)
    args = parser.parse_args()
    with idle_states(args.idle_as_is, args.json) as idle, \
            tempfile.TemporaryDirectory(dir=args.dir or ".", prefix="iolab-bench-") as tmp:
        job = Path(tmp, "job.fio")
        job.write_text(JOB.format(path=Path(tmp, "data").resolve(), runtime=args.runtime))
        db = Path(tmp, "bench.db")
        bare_fio(job)  # lay out the file once, outside the measurements
        ratios = []
        for i in range(args.rounds):
            if i % 2 == 0:
                fio_iops, iolab_iops = bare_fio(job), via_iolab(job, db)
            else:
                iolab_iops, fio_iops = via_iolab(job, db), bare_fio(job)
            ratios.append(iolab_iops / fio_iops)
            say(f"round {i + 1}: fio {fio_iops:,.0f} IOPS, iolab {iolab_iops:,.0f} IOPS, ratio {ratios[-1]:.3f}",
                args.json)
    emit("overhead", [Ratio(f"median IOPS ratio iolab/fio over {args.rounds} rounds", statistics.median(ratios),
                            0.98, "higher")], args.json, idle)


if __name__ == "__main__":
    main()
