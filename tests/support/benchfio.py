"""Real fio sweeps laid out the way bench-fio (fio-plot) lays them out, for import tests.

bench-fio's older versions (fio-plot's benchmark_data, fio 3.1) wrote one JSON per run,
``{rw}-{iodepth}-{numjobs}.json``, every job named ``random-read``, and logs named by queue depth
only (``random-read-depth-{iodepth}_iops.N.log``), so each later run at a depth overwrote the logs
of the earlier ones. ``sweep`` reproduces that with real fio: iodepth × numjobs for each rw,
runs in bench-fio's order (rw, then depth, then numjobs), 1 s each.

The fast tier imports two sweeps recorded that way (``RECORDED``, ``recorded``; made by ``record``,
``python tests/support/benchfio.py``): no fio runs there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from paths import DATA

RWS = ("randread", "randwrite")
DEPTHS = (1, 4, 16)
NUMJOBS = (1, 2)
#: Sweeps recorded with real fio (``record``): ``ssd``, the whole sweep, and ``randread``, a
#: randread-only sweep of the same file; ``mtimes.json`` holds each file's modification time as fio
#: left it (the importer weighs a log's age against the report's time; git does not keep it).
RECORDED = DATA / "bench-fio"


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


def recorded(name: str, directory: Path) -> Path:
    """A copy of the recorded sweep ``name`` (``ssd`` or ``randread``) in ``directory`` (made), each file
    with the modification time fio left it; returns ``directory``."""
    mtimes = json.loads((RECORDED / "mtimes.json").read_text())[name]
    shutil.copytree(RECORDED / name, directory)
    for file, mtime in mtimes.items():
        os.utime(directory / file, (mtime, mtime))
    return directory


def record(root: Path = RECORDED) -> None:
    """Run both sweeps with real fio (a scratch file in a temporary directory) and write them to
    ``root`` with their files' modification times: ``python tests/support/benchfio.py``."""
    scratch = Path(tempfile.mkdtemp(prefix="iolab-bench-fio-"))
    try:
        sweep(scratch / "ssd", scratch / "data.bin")
        sweep(scratch / "randread", scratch / "data.bin", rws=("randread",))
        mtimes = {}
        for name in ("ssd", "randread"):
            shutil.rmtree(root / name, ignore_errors=True)
            shutil.copytree(scratch / name, root / name)
            mtimes[name] = {p.name: p.stat().st_mtime for p in sorted((scratch / name).iterdir())}
        (root / "mtimes.json").write_text(json.dumps(mtimes, indent=1) + "\n")
    finally:
        shutil.rmtree(scratch)


if __name__ == "__main__":
    record()
