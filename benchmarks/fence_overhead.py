"""Does the fence cost throughput? The same fio job run by iolab's runner with and without the fence, interleaved.

Job: 4k random read, QD32, libaio, direct, on a scratch file (default 5 s per run after a 1 s ramp, 7 rounds;
the order inside a round alternates so drift does not favour one side). Both sides go through
``runner.local.run`` (the same status stream and logs); the fenced side runs fio inside bubblewrap
(``runner.fence``: read-only root, fresh read-only /dev, pid namespace, no capabilities). Prints each round
and the median IOPS ratio fenced/unfenced; the target is >= 0.99 (namespaces and bind mounts are set up
once, before fio starts; the I/O path is the kernel's either way). Both arms run with a CPU latency
request of 0 held (``ratios.idle_states``).

    .venv/bin/python benchmarks/fence_overhead.py [--runtime 5] [--rounds 7] [--dir DIR] [--idle-as-is] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
from pathlib import Path

from iolab.runner import fence, local
from ratios import RANDREAD_4K_QD32 as JOB
from ratios import Ratio, add_idle_option, add_json_option, emit, idle_states, say


def iops(job_text: str, work: Path, fenced: fence.Fence | None) -> float:
    outcome = local.run(job_text, work, fence=fenced)
    if outcome.status != "ok" or outcome.report is None:
        raise SystemExit(f"fio failed: {outcome.error}")
    return outcome.report.jobs[0].directions["read"].iops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", type=int, default=5, help="seconds per fio run")
    parser.add_argument("--rounds", type=int, default=7, help="A/B rounds (>= 5 for the claim)")
    parser.add_argument("--dir", default=None, help="where the scratch file goes (default: a temp dir here)")
    add_json_option(parser)
    add_idle_option(parser)
    args = parser.parse_args()
    fence.require()
    with idle_states(args.idle_as_is, args.json) as idle, \
            tempfile.TemporaryDirectory(dir=args.dir or ".", prefix="iolab-bench-") as tmp:
        data = Path(tmp, "data").resolve()
        job_text = JOB.format(path=data, runtime=args.runtime)
        subprocess.run(["fio", "--name=layout", f"--filename={data}", "--size=256m", "--rw=write", "--bs=1m"],
                       capture_output=True, check=True)  # lay out the file once, outside the measurements
        work = Path(tmp, "work").resolve()
        fenced = fence.build({str(data): fence.IOLAB}, work)
        ratios = []
        for i in range(args.rounds):
            if i % 2 == 0:
                plain, inside = iops(job_text, work, None), iops(job_text, work, fenced)
            else:
                inside, plain = iops(job_text, work, fenced), iops(job_text, work, None)
            ratios.append(inside / plain)
            say(f"round {i + 1}: unfenced {plain:,.0f} IOPS, fenced {inside:,.0f} IOPS, ratio {ratios[-1]:.3f}",
                args.json)
    emit("fence_overhead", [Ratio(f"median IOPS ratio fenced/unfenced over {args.rounds} rounds",
                                  statistics.median(ratios), 0.99, "higher")], args.json, idle)


if __name__ == "__main__":
    main()
