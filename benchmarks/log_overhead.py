"""What do iolab's time series cost? The same fio job with and without the 1 s averaged IOPS,
bandwidth and latency logs that `iolab run` asks for (fio.logs.command_options), interleaved.

Averaging still touches every I/O (each completion is added to the window's running mean,
``add_log_sample()`` in stat.c), so the worst case is the highest I/O rate: ``ioengine=null``,
where fio does nothing but its own bookkeeping (~4 M IOPS per core here). Also run on a real
file (4k random read, QD32, libaio, direct). Prints each round and the median IOPS ratio
logs/none per job; the target is >= 0.98 on the file job. Both arms run with a CPU latency request
of 0 held (``ratios.idle_states``).

    .venv/bin/python benchmarks/log_overhead.py [--runtime 5] [--rounds 5] [--dir DIR] [--idle-as-is] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

from iolab.fio.logs import command_options
from ratios import Ratio, add_idle_option, add_json_option, emit, idle_states, say

JOBS = {
    "null-4k": "[null]\nioengine=null\nsize=1g\nrw=randread\nbs=4k\ntime_based=1\nruntime={runtime}\n",
    "file-4k-qd32": "[file]\nfilename={path}\nsize=256m\nrw=randread\nbs=4k\niodepth=32\nioengine=libaio\n"
                    "direct=1\ntime_based=1\nruntime={runtime}\nrandrepeat=0\n",
}


def fio_iops(job: Path, extra: tuple[str, ...]) -> float:
    out = subprocess.run(["fio", "--output-format=json", *extra, str(job)], cwd=job.parent, capture_output=True,
                         text=True, check=True)
    return float(json.loads(out.stdout[out.stdout.index("{"):])["jobs"][0]["read"]["iops"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="where the file job's 256 MiB file goes")
    add_json_option(parser)
    add_idle_option(parser)
    args = parser.parse_args()
    medians = []
    with idle_states(args.idle_as_is, args.json) as idle, tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        work = Path(tmp)
        logs = command_options(work / "iolab")
        for name, template in JOBS.items():
            job = work / f"{name}.fio"
            job.write_text(template.format(runtime=args.runtime, path=work / "data"))
            fio_iops(job, ())  # lay out the file, warm up
            ratios = []
            for i in range(args.rounds):
                order = [(), logs] if i % 2 == 0 else [logs, ()]
                result = {bool(extra): fio_iops(job, extra) for extra in order}
                ratios.append(result[True] / result[False])
                say(f"{name} round {i + 1}: none {result[False]:,.0f} IOPS, logs {result[True]:,.0f} IOPS, "
                    f"ratio {ratios[-1]:.3f}", args.json)
            # the null engine shows the worst case; the claim is the file job's
            medians.append(Ratio(f"{name}: median IOPS ratio logs/none", statistics.median(ratios),
                                 0.98 if name.startswith("file") else 0.0, "higher"))
    emit("log_overhead", medians, args.json, idle)


if __name__ == "__main__":
    main()
