"""Real fio sweeps laid out the way bench-fio (fio-plot) lays them out, for import tests.

bench-fio's older versions (fio-plot's benchmark_data, fio 3.1) wrote one JSON per run,
``{rw}-{iodepth}-{numjobs}.json``, every job named ``random-read``, and logs named by queue depth
only (``random-read-depth-{iodepth}_iops.N.log``), so each later run at a depth overwrote the logs
of the earlier ones. ``sweep`` reproduces that with real fio: iodepth × numjobs for each rw,
runs in bench-fio's order (rw, then depth, then numjobs), 1 s each.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

RWS = ("randread", "randwrite")
DEPTHS = (1, 4, 16)
NUMJOBS = (1, 2)


def job_text(data: Path, rw: str, depth: int, numjobs: int, runtime: int = 1) -> str:
    prefix = f"random-read-depth-{depth}"
    return (f"[random-read]\nfilename={data}\nsize=16m\nioengine=libaio\ndirect=1\nrw={rw}\nbs=4k\n"
            f"iodepth={depth}\nnumjobs={numjobs}\ngroup_reporting=1\ntime_based=1\nruntime={runtime}\n"
            f"write_bw_log={prefix}\nwrite_lat_log={prefix}\nwrite_iops_log={prefix}\nlog_avg_msec=500\n")


def sweep(directory: Path, data: Path, rws: Sequence[str] = RWS, depths: Sequence[int] = DEPTHS,
          numjobs: Sequence[int] = NUMJOBS, wrapper: Sequence[str] = ()) -> list[Path]:
    """Run the sweep into ``directory`` (fio's working directory, so the logs land there too);
    returns the JSON outputs in run order. ``wrapper`` prefixes the fio command (a cgroup)."""
    directory.mkdir(parents=True, exist_ok=True)
    outputs = []
    for rw in rws:
        for depth in depths:
            for n in numjobs:
                job = directory / "job.fio"
                job.write_text(job_text(data, rw, depth, n))
                out = directory / f"{rw}-{depth}-{n}.json"
                fio = subprocess.run([*wrapper, "fio", "--output-format=json", f"--output={out.name}", job.name],
                                     cwd=directory, capture_output=True, text=True, timeout=60)
                assert fio.returncode == 0, fio.stderr
                outputs.append(out)
    (directory / "job.fio").unlink()
    return outputs
