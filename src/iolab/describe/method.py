"""A suite's method settings: CPU pinning, dropping the page cache, preconditioning.

Suite keys (all optional)::

    pin: mq                      # see facts/pinning.py
    drop_caches: true            # before every measured job
    precondition:
      fill: 2x                   # workload-independent: write the region N times sequentially
      bs: 128k                   #   with this block size (SNIA PTS: 2× capacity, 128 KiB)
      rounds: 25                 # workload-dependent: up to N rounds of the workload itself,
      round_time: 60s            #   each this long, until steady state (PTS: at most 25)
      track: iops                #   the variable judged: iops, bw or lat_mean

Validated here, at the suite's boundary; ``run.method`` applies them around each job (and holds
the steady-state rule, SNIA SSS PTS, docs/design.md section 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import units

#: The steady-state window, in rounds (SNIA PTS), and the most rounds a preconditioning may run.
WINDOW = 5
MAX_ROUNDS = 25
#: The variables a preconditioning's steady state may track.
TRACKS = ("iops", "bw", "lat_mean")


@dataclass(frozen=True)
class Precondition:
    """``fill``: how many times the region is written sequentially first (0: no fill);
    ``rounds``: the most workload rounds to run until steady state (0: none)."""

    fill: int = 0
    bs: str = "128k"
    rounds: int = 0
    round_time: str = "60s"
    track: str = "iops"


@dataclass(frozen=True)
class Method:
    """A suite's method settings (tuning lives on each JobSpec, being a matrix axis)."""

    pin: str | None = None
    drop_caches: bool = False
    precondition: Precondition | None = None


def check_precondition(raw: Any) -> Precondition:
    """Validate a suite's ``precondition:`` mapping. Raises ``ValueError`` (``fill: ...``)."""
    if not isinstance(raw, Mapping):
        raise ValueError("expected a mapping such as {fill: 2x, bs: 128k, rounds: 25}")
    unknown = set(raw) - {"fill", "bs", "rounds", "round_time", "track"}
    if unknown:
        raise ValueError(f"{sorted(unknown)[0]}: unknown key (use fill, bs, rounds, round_time, track)")
    fill_text = str(raw.get("fill", 0)).strip().lower().removesuffix("x")
    if not fill_text.isdigit():
        raise ValueError(f"fill: expected a whole multiple of the region such as 2x, got {raw.get('fill')!r}")
    rounds = raw.get("rounds", 0)
    if rounds is True:
        rounds = MAX_ROUNDS
    if not isinstance(rounds, int) or isinstance(rounds, bool) or not (rounds == 0 or WINDOW <= rounds <= 1000):
        raise ValueError(f"rounds: expected 0 or a whole number {WINDOW}..1000 (the steady-state window is "
                         f"{WINDOW} rounds), got {rounds!r}")
    bs, round_time, track = str(raw.get("bs", "128k")), str(raw.get("round_time", "60s")), raw.get("track", "iops")
    for key, check, value in (("bs", units.parse_size, bs), ("round_time", units.parse_duration_us, round_time)):
        try:
            check(value)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    if track not in TRACKS:
        raise ValueError(f"track: expected one of {', '.join(TRACKS)}, got {track!r}")
    if int(fill_text) == 0 and rounds == 0:
        raise ValueError("nothing to do: give fill (e.g. 2x) and/or rounds (e.g. 25)")
    return Precondition(fill=int(fill_text), bs=bs, rounds=rounds, round_time=round_time, track=track)
