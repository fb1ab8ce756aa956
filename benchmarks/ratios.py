"""What every benchmark ends with: its ratios, for people or (``--json``) as one JSON object.

    {"benchmark": NAME, "ratios": [{"name": ..., "value": ..., "target": ..., "better": "higher"|"lower"}],
     "idle": {"held_us": 0, "limit_us": 0, "driver": "haltpoll", "states": "POLL (…), haltpoll idle (…)"}}

With ``--json`` a benchmark prints nothing else on stdout (its progress goes to stderr), so CI and
users can track the object. ``installed_env``: the environment that times iolab commands as an
installed iolab runs them.

**Idle states held equal in both arms** (``idle_states``). On a machine whose idle CPUs may enter
states with an exit latency, an arm that keeps a CPU busy (an observer, a capture, iolab's own
process beside fio) keeps CPUs out of those states and so "speeds up" fio: on this 2-CPU VM, 4k
random reads at QD8 ran ~110 k IOPS alone and ~270 k beside a busy loop (benchmarks/RESULTS.md). So every
benchmark of iolab's own costs holds a CPU latency request of 0 for its whole run, as
``iolab run --tune cpu_dma_latency=0`` holds one for a job: both arms then run with idle CPUs
polling, and the difference measured is the thing compared. ``--idle-as-is`` leaves the machine as
it is (both arms then carry the idle-state effect, unequally); the object's ``idle`` says which.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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


def add_idle_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--idle-as-is", action="store_true",
                        help="leave CPU idle states as they are (default: a CPU latency request of 0 held for the "
                             "whole benchmark, so that both arms run with idle CPUs polling)")


@contextlib.contextmanager
def idle_states(as_is: bool, as_json: bool) -> Iterator[dict[str, Any]]:
    """Both arms under the same idle-state conditions (the module docstring): a CPU latency request of 0
    held for the block (``iolab.run.tuning.hold_latency``) unless ``as_is``; yields what ``emit`` stores
    as ``idle``: ``held_us`` (0, or None when nothing was held), ``limit_us`` (the limit in force once
    held: the least of every process's request; None where it cannot be read), the cpuidle driver and
    states. Without root nothing can be held: it says so and goes on as it is."""
    from iolab.facts import idle
    from iolab.run import tuning

    found = {"driver": idle.driver(), "states": idle.describe_states(idle.states())}
    with contextlib.ExitStack() as stack:
        held: int | None = None
        if not as_is:
            try:
                stack.enter_context(tuning.hold_latency(0))
                held = 0
            except tuning.TuningError as exc:
                say(f"idle states: not held ({exc.message}); both arms run as the machine is", as_json)
        limit = idle.latency_limit_us()
        condition: dict[str, Any] = {"held_us": held, "limit_us": limit, **found}
        say(f"idle states: {'held at 0 µs' if held == 0 else 'as they are'} for both arms (cpuidle "
            f"{found['driver'] or 'none'}: {found['states'] or 'no states'}; limit in force: "
            f"{idle.describe_limit(limit) or 'unknown'})", as_json)
        yield condition


def say(text: str, as_json: bool) -> None:
    """A progress or result line: stdout for people, stderr when stdout carries the JSON object."""
    print(text, file=sys.stderr if as_json else sys.stdout, flush=True)


def emit(benchmark: str, ratios: list[Ratio], as_json: bool, idle: dict[str, Any] | None = None,
         extra: dict[str, Any] | None = None) -> None:
    """The ratios; ``idle`` (``idle_states``) joins the JSON object as ``idle``, and ``extra``'s keys
    (a benchmark's own figures) join it as they are."""
    if as_json:
        print(json.dumps({"benchmark": benchmark, "ratios": [asdict(r) for r in ratios],
                          **({"idle": idle} if idle is not None else {}), **(extra or {})}))
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
