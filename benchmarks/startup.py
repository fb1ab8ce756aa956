"""How long do the everyday commands take to start: `iolab --version`, `--help`, `runs`, `show N`?

Each command is a fresh process, timed from fork to exit (wall clock), against a bare Python process
that imports what the command cannot do without, measured in the same rounds:

* ``iolab --version`` and ``iolab --help`` against ``python -c "import click, rich.console"``
  (target <= 3x: a command line and a console, nothing else);
* ``iolab runs`` and ``iolab show 1`` against ``python -c "import click, rich.console, sqlalchemy"``
  (target <= 2x: they must open the database, nothing more), on a database holding one imported run
  (a real fio 3.33 json+ output).

Rounds are paired: in each round every command and its baseline run back to back, in an order that
alternates, so a burst of load on the machine hits both; each ratio is the median over the rounds of
command/baseline within a round.

    .venv/bin/python benchmarks/startup.py [--rounds 15] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ratios import Ratio, add_json_option, emit, say

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "data" / "fio" / "fio-3.33_randrw_libaio.json"
IOLAB = [str(Path(sys.executable).parent / "iolab")]  # the console script, as people run it
BASE_UI = [sys.executable, "-c", "import click, rich.console"]
BASE_DB = [sys.executable, "-c", "import click, rich.console, sqlalchemy"]


def elapsed_s(argv: list[str]) -> float:
    """Wall-clock seconds of one process, start to exit; its output is discarded."""
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[-3:])} failed ({done.returncode}): {done.stderr.strip()}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    add_json_option(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="iolab-startup-") as tmp:
        db = str(Path(tmp) / "bench.db")
        subprocess.run([*IOLAB, "--db", db, "import", str(SAMPLE)], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        commands = {
            "--version": ([*IOLAB, "--version"], BASE_UI),
            "--help": ([*IOLAB, "--help"], BASE_UI),
            "runs": ([*IOLAB, "--db", db, "runs"], BASE_DB),
            "show 1": ([*IOLAB, "--db", db, "show", "1"], BASE_DB),
        }
        ratios: dict[str, list[float]] = {name: [] for name in commands}
        times: dict[str, list[float]] = {name: [] for name in commands}
        for name in ("base ui", "base db"):
            times[name] = []
        for i in range(args.rounds + 1):
            for name, (command, base) in commands.items():
                pair = (command, base) if i % 2 else (base, command)
                a, b = (elapsed_s(argv) for argv in pair)
                took, base_s = (a, b) if i % 2 else (b, a)
                if i == 0:
                    continue  # a warm-up round: the page cache, .pyc files
                ratios[name].append(took / base_s)
                times[name].append(took)
                times["base ui" if base is BASE_UI else "base db"].append(base_s)
        for name in times:
            say(f"{name:10} median {statistics.median(times[name]) * 1000:7.1f} ms", args.json)
    targets = {"--version": 3.0, "--help": 3.0, "runs": 2.0, "show 1": 2.0}
    baseline = {"--version": "click+rich", "--help": "click+rich", "runs": "click+rich+sqlalchemy",
                "show 1": "click+rich+sqlalchemy"}
    emit("startup", [Ratio(f"iolab {name} / python -c import {baseline[name]}",
                           round(statistics.median(ratios[name]), 3), targets[name], "lower")
                     for name in commands], args.json)


if __name__ == "__main__":
    main()
