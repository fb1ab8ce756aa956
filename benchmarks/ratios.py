"""What every benchmark ends with: its ratios, for people or (``--json``) as one JSON object.

    {"benchmark": NAME, "ratios": [{"name": ..., "value": ..., "target": ..., "better": "higher"|"lower"}]}

With ``--json`` a benchmark prints nothing else on stdout (its progress goes to stderr), so CI and
users can track the object. ``installed_env``: the environment that times iolab commands as an
installed iolab runs them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

#: The job the overhead benchmarks run with and without what they measure (``{path}``, ``{runtime}`` in s).
RANDREAD_4K_QD32 = """\
[randread-4k-qd32]
filename={path}
size=256m
rw=randread
bs=4k
iodepth=32
ioengine=libaio
direct=1
time_based=1
runtime={runtime}
ramp_time=1
randrepeat=0
"""


@dataclass(frozen=True)
class Ratio:
    name: str
    value: float
    target: float
    better: str  # "higher" or "lower"

    @property
    def met(self) -> bool:
        return self.value >= self.target if self.better == "higher" else self.value <= self.target


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print only one JSON object of the ratios on stdout")


def say(text: str, as_json: bool) -> None:
    """A progress or result line: stdout for people, stderr when stdout carries the JSON object."""
    print(text, file=sys.stderr if as_json else sys.stdout, flush=True)


def emit(benchmark: str, ratios: list[Ratio], as_json: bool) -> None:
    if as_json:
        print(json.dumps({"benchmark": benchmark, "ratios": [asdict(r) for r in ratios]}))
        return
    for r in ratios:
        sign = ">=" if r.better == "higher" else "<="
        print(f"{r.name}: {r.value:.3g} (target {sign} {r.target:g})  {'ok' if r.met else 'MISSED'}")


def installed_env(cache: Path) -> dict[str, str]:
    """This process's environment with compiled modules cached in ``cache`` (the benchmark's own):
    an installed iolab has its modules compiled (pip compiles them as it installs), but a checkout
    run with PYTHONDONTWRITEBYTECODE (set on this machine) compiles every module it imports anew on
    every start (0.1-0.3 s of a command's start-up). The first run fills the cache: leave it out of
    the timings."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
            "PYTHONPYCACHEPREFIX": str(cache)}
