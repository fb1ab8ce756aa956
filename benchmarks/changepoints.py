"""The smallest step history finds, by run-to-run noise and by how many runs there are after it.

Series of 5, 10 or 20 runs at one level, then a step down by 2, 5, 10, 20 or 50 % and 3 to 20 runs at the
new level (``SHAPES``), with log-normal run-to-run noise of 1, 3, 5 or 10 % (seeded: the same table every
time), go through ``analyze.changepoints.detect`` as ``iolab history`` does for each series. A step is
**found** when a confirmed change point lies within ``NEAR`` runs of it, **shown** when one is there
confirmed or unconfirmed (too few runs after it to be significant: the history says how many more would
confirm it). For each noise level and shape, the table gives the smallest step found, and shown, in at
least 90 % of ``--series`` series (40: a share's sampling error is about ±5 %); and flat series (no
step) of each length say how often noise alone is called a change. (``benchmarks/history.py`` measures
5 % steps in 60-run series imported as fio outputs.)

    .venv/bin/python benchmarks/changepoints.py [--series 40] [--markdown] [--json]
"""

from __future__ import annotations

import argparse
import random
import time

from iolab.analyze import changepoints
from ratios import Ratio, add_json_option, emit, say

NOISES = (0.01, 0.03, 0.05, 0.10)
#: Runs before and after the step.
SHAPES = ((5, 3), (5, 5), (10, 5), (20, 3), (20, 10), (20, 20))
STEPS = (0.02, 0.05, 0.10, 0.20, 0.50)
#: A step counts as found (or shown) when this share of its series has it.
SHARE = 0.9
#: How far from the step a change point may be and still be it (runs).
NEAR = 3


def series(rng: random.Random, noise: float, before: int, after: int, step: float) -> list[float]:
    """``before`` runs at 10,000 IOPS, ``after`` at ``(1 - step)`` of that, each × a log-normal of sd ``noise``."""
    return [10_000 * (1 - step * (i >= before)) * rng.lognormvariate(0, noise) for i in range(before + after)]


def rates(noise: float, shape: tuple[int, int], step: float, count: int) -> tuple[float, float]:
    """The shares of ``count`` series with the step found (confirmed) and shown (confirmed or not)."""
    before, after = shape
    rng = random.Random(f"{noise}-{before}-{after}-{step}")
    found = shown = 0
    for _ in range(count):
        near = [c for c in changepoints.detect(series(rng, noise, before, after, step))
                if abs(c.index - before) <= NEAR]
        found += any(c.confirmed for c in near)
        shown += bool(near)
    return found / count, shown / count


def smallest(noise: float, shape: tuple[int, int], count: int) -> tuple[float | None, float | None]:
    """The smallest step found, and the smallest shown, in ``SHARE`` of the series (None: none of them)."""
    found_at = shown_at = None
    for step in STEPS:
        found, shown = rates(noise, shape, step, count)
        if shown_at is None and shown >= SHARE:
            shown_at = step
        if found >= SHARE:
            found_at = step
            return found_at, shown_at if shown_at is not None else step
    return found_at, shown_at


def flat_rate(noise: float, runs: int, count: int) -> float:
    """The share of ``count`` flat series of ``runs`` runs with any change point, confirmed or not."""
    rng = random.Random(f"flat-{noise}-{runs}")
    return sum(bool(changepoints.detect([10_000 * rng.lognormvariate(0, noise) for _ in range(runs)]))
               for _ in range(count)) / count


def _pct(step: float | None) -> str:
    return "–" if step is None else f"{step * 100:g} %"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=40, help="series per cell (default 40)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (for the docs)")
    add_json_option(parser)
    args = parser.parse_args()
    started = time.monotonic()
    table = {(noise, shape): smallest(noise, shape, args.series) for noise in NOISES for shape in SHAPES}
    flats = {runs: flat_rate(0.03, runs, args.series * 2) for runs in sorted({sum(s) for s in SHAPES})}
    say(f"{len(table)} cells × up to {len(STEPS)} steps × {args.series} series in {time.monotonic() - started:.0f} s",
        args.json)
    head = "| noise | " + " | ".join(f"{b} + {a} runs" for b, a in SHAPES) + " |"
    lines = [head, "|---|" + "---|" * len(SHAPES)]
    for noise in NOISES:
        cells = [_pct(found) + (f" ({_pct(shown)})" if shown != found else "")
                 for found, shown in (table[noise, shape] for shape in SHAPES)]
        lines.append(f"| {noise * 100:g} % | " + " | ".join(cells) + " |")
    say(f"smallest step down found (a confirmed change point within {NEAR} runs of it) in {SHARE:.0%} of series, "
        "by runs before + after it; in brackets the smallest shown, confirmed or unconfirmed, where smaller:",
        args.json)
    say("\n".join(lines) if args.markdown else "\n".join(line.replace("|", " ") for line in lines), args.json)
    say("flat series with a change point, confirmed or not (3 % noise): " + ", ".join(
        f"{runs} runs {rate:.1%}" for runs, rate in flats.items()), args.json)
    emit("changepoints", [
        Ratio("50 % steps at 3 % noise, 5 + 3 runs, shown (share)", rates(0.03, (5, 3), 0.5, args.series)[1], 0.9,
              "higher"),
        Ratio("flat series of 8 runs at 3 % noise with a change point (share)", flats[8], 0.02, "lower"),
        Ratio("flat series of 40 runs at 3 % noise with a change point (share)", flats[40], 0.02, "lower"),
    ], args.json)


if __name__ == "__main__":
    main()
