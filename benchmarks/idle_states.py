"""The idle-state effect: fio's 4k random reads as the machine is, and with a CPU latency request of 0 held.

Job: 4k random read, QD8, io_uring, direct, 6 s per run (``--runtime``), on a loop device over tmpfs (a
file in ``/dev/shm``, written once so that every read finds a page): a device fast enough that the time
a CPU takes to wake from an idle state is much of each I/O's latency. Arm "as is": fio alone, whatever
idle states the machine lets its CPUs enter. Arm "held at 0": the same fio while this process holds
``/dev/cpu_dma_latency`` at 0 through ``iolab.run.tuning.hold_latency``, the code ``iolab run --tune
cpu_dma_latency=0`` holds it with (idle CPUs then stay in states without exit latency: POLL).
Three rounds (``--rounds``); the order inside a round alternates so drift favours neither arm.

Prints each round's IOPS and clat mean for both arms, then the median ratios held/as-is: IOPS (target
>= 1.0: holding the limit must not cost throughput) and clat mean (target <= 1.0). With ``--json`` one
object (``ratios.py``) that also holds every run (``runs``: arm, round, IOPS, clat mean in ns, the limit
in force while it ran) and the machine's idle states (``idle``).

The "as is" arm is only as-is when nobody else holds a request: the limit in force is read before each
run (``limit_us``; 2,000,000,000 means none held) and a lower one is reported with the figures. Any
other CPU load on the machine keeps CPUs out of idle states and shrinks the effect: state the load.

    .venv/bin/python benchmarks/idle_states.py [--runtime 6] [--rounds 3] [--size-mib 1024] [--json]

Needs root (loop devices, /dev/cpu_dma_latency). The loop device and its file are removed afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from iolab.facts import idle
from iolab.run import tuning
from ratios import Ratio, add_json_option, emit, say

JOB = """\
[randread-4k-qd8]
filename={device}
rw=randread
bs=4k
iodepth=8
ioengine=io_uring
direct=1
time_based=1
runtime={runtime}
randrepeat=0
"""

ARMS = ("as is", "held at 0")


@contextlib.contextmanager
def tmpfs_loop(size_mib: int) -> Iterator[str]:
    """A loop device over a file of ``size_mib`` MiB in /dev/shm (tmpfs), detached and removed after."""
    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="iolab-bench-idle-") as tmp:
        image = Path(tmp, "image")
        image.write_bytes(b"")
        os.truncate(image, size_mib << 20)
        device = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True, text=True,
                                check=True).stdout.strip()
        try:
            subprocess.run(["fio", "--name=layout", f"--filename={device}", "--rw=write", "--bs=1m", "--direct=1",
                            "--ioengine=psync", "--output-format=json"], capture_output=True, check=True)
            yield device
        finally:
            subprocess.run(["losetup", "-d", device], check=False)


def fio(job: Path) -> tuple[float, float]:
    """(IOPS, clat mean ns) of the job's reads."""
    out = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True, text=True, check=True)
    read = json.loads(out.stdout[out.stdout.index("{"):])["jobs"][0]["read"]
    return float(read["iops"]), float(read["clat_ns"]["mean"])


def one(arm: str, job: Path) -> dict[str, Any]:
    """One fio run in ``arm``; the limit in force is read while it is (or is not) held."""
    with contextlib.ExitStack() as held:
        if arm == "held at 0":
            held.enter_context(tuning.hold_latency(0))
        limit = idle.latency_limit_us(path=tuning.PM_QOS)
        iops, clat_ns = fio(job)
    return {"arm": arm, "iops": iops, "clat_mean_ns": clat_ns, "limit_us": limit}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", type=int, default=6, help="seconds per fio run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both arms")
    parser.add_argument("--size-mib", type=int, default=1024, help="the tmpfs-backed loop device's size")
    add_json_option(parser)
    args = parser.parse_args()
    states: dict[str, Any] = {"load_average_before": os.getloadavg()[0], "driver": idle.driver(),
                              "governor": idle.governor(), "states": idle.describe_states(idle.states()),
              "limit_us_before": idle.latency_limit_us(path=tuning.PM_QOS)}
    say(f"cpuidle {states['driver'] or 'none'} / {states['governor'] or 'none'}: {states['states'] or 'no states'}; "
        f"limit in force: {idle.describe_limit(states['limit_us_before']) or 'unknown'}; "
        f"load average {states['load_average_before']:.2f}", args.json)
    runs: list[dict[str, Any]] = []
    with tmpfs_loop(args.size_mib) as device, tempfile.TemporaryDirectory(prefix="iolab-bench-idle-") as tmp:
        job = Path(tmp, "job.fio")
        job.write_text(JOB.format(device=device, runtime=args.runtime))
        for i in range(args.rounds):
            for arm in ARMS if i % 2 == 0 else ARMS[::-1]:
                runs.append({**one(arm, job), "round": i + 1})
                r = runs[-1]
                say(f"round {i + 1}, {arm}: {r['iops']:,.0f} IOPS, clat mean {r['clat_mean_ns'] / 1000:.1f} µs "
                    f"(limit {idle.describe_limit(r['limit_us']) or 'unknown'})", args.json)
    states["load_average_after"] = os.getloadavg()[0]
    by_arm = {arm: [r for r in runs if r["arm"] == arm] for arm in ARMS}
    as_is = [r for r in by_arm["as is"] if r["limit_us"] is not None and r["limit_us"] < idle.NO_LIMIT_US]
    if as_is:
        say(f"note: another process held a CPU latency request during {len(as_is)} 'as is' run(s): that arm was "
            "not the machine as it is", args.json)

    def median(arm: str, key: str) -> float:
        return statistics.median(r[key] for r in by_arm[arm])

    ratios = [Ratio(f"median IOPS ratio held at 0/as is over {args.rounds} rounds",
                    median("held at 0", "iops") / median("as is", "iops"), 1.0, "higher"),
              Ratio(f"median clat mean ratio held at 0/as is over {args.rounds} rounds",
                    median("held at 0", "clat_mean_ns") / median("as is", "clat_mean_ns"), 1.0, "lower")]
    emit("idle_states", ratios, args.json, states, {"runs": runs, "runtime_s": args.runtime})


if __name__ == "__main__":
    main()
