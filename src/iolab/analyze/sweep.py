"""Sweeps: many workloads that differ in a few fio options, named and laid out by those options. Pure.

Storage engineers rarely run one job: they sweep iodepth × numjobs (× block size, × rw) to see
where a device saturates (fio-plot's bench-fio, iolab suites with matrix axes). What tells such
results apart is the options that vary among them, so rows are named by those options
(``randread 4k QD16 ×8``, or columns rw / bs / iodepth / numjobs) rather than by a job name that a
sweep's files may all share.

Options are canonical (``describe.canonical.Options``: ``4k`` = ``4096``, defaults filled in where the source
is complete), given as plain ``{option: value}`` mappings; a value iolab does not know is None.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .. import units
from ..describe import canonical

#: Options that name a workload, in this order; other varying options follow alphabetically.
AXES = ("rw", "rwmixread", "bs", "iodepth", "numjobs")
#: The two axes of a sweep's grid: rows and columns.
GRID = ("iodepth", "numjobs")
#: Options that never make two workloads of a sweep different (how they are measured, how large the
#: file is); ``runtime`` does, when it varies (a saturation search's short probes and long repetitions).
_IGNORED = (canonical.SOFT - {"runtime"}) | {"size"}

Options = Mapping[str, str | None]


def host_setting(key: str) -> bool:
    """Whether ``key`` names a setting iolab applies around fio, not a fio option: a host tuning value
    (``tune.scheduler``) or the CPU pinning mode (``pin``), as a result's ``params`` hold them."""
    return key.startswith("tune.") or key == "pin"


def option_table(workloads: Sequence[canonical.Options]) -> list[dict[str, str | None]]:
    """Each workload's value of the naming axes and of every option any of them sets: its own, fio's
    default (``describe.canonical.Options.get``), or None when unknown (an imported normal report) or not
    applicable (``rwmixread`` of a workload that does not mix reads and writes; a host setting,
    ``host_setting``, the workload did not change)."""
    keys = [*AXES, *sorted({k for w in workloads for k in w.values} - set(AXES))]
    table = []
    for w in workloads:
        row = {k: w.values.get(k) if host_setting(k) else w.get(k) for k in keys}
        if row.get("rw") not in ("rw", "randrw"):
            row["rwmixread"] = None
        table.append(row)
    return table


def varying(workloads: Iterable[Options]) -> list[str]:
    """The options whose values differ among ``workloads`` (an option some set and others do not
    counts), axes first (``AXES`` order), then alphabetically; measurement options (``ramp_time``,
    seeds …, ``describe.canonical.SOFT`` but ``runtime``) and ``size`` are left out."""
    listed = list(workloads)
    keys = {k for w in listed for k in w}
    found = [k for k in keys if k not in _IGNORED and len({w.get(k) for w in listed}) > 1]
    return sorted(found, key=lambda k: (AXES.index(k) if k in AXES else len(AXES), k))


def part(option: str, value: str | None) -> str:
    """One option as a label part: ``randread``, ``4k``, ``QD16``, ``×8``, ``70% read``, ``direct=1``;
    empty for a value that is unknown or does not apply."""
    if value is None:
        return ""
    if option in ("rw", "bs"):
        return value
    if option == "iodepth":
        return f"QD{value}"
    if option == "numjobs":
        return f"×{value}"
    if option == "rwmixread":
        return f"{value}% read"
    return f"{option}={value}"


def label(options: Options, keys: Sequence[str]) -> str:
    """``options`` named by ``keys`` (``varying``): ``randread 4k QD16 ×8``."""
    return " ".join(filter(None, (part(k, options.get(k)) for k in keys)))


def full_label(options: Options, extra: Sequence[str] = ()) -> str:
    """A workload's name from its axes (those known) and ``extra`` options: ``randwrite 4k QD8 ×4``."""
    keys = [k for k in AXES if options.get(k) is not None] + [k for k in extra if k not in AXES]
    return label(options, keys)


def is_sweep(workloads: Iterable[Options]) -> bool:
    """Whether some workloads agree on everything but ``GRID`` options and cover at least three
    grid points, or two values of each grid axis: enough to draw a curve or a grid (two points,
    such as CrystalDiskMark's Q1 and Q32, are a pair, not a sweep)."""
    families: dict[tuple[object, ...], set[tuple[str | None, ...]]] = {}
    listed = list(workloads)
    other = [k for k in varying(listed) if k not in GRID]
    for w in listed:
        families.setdefault(tuple(w.get(k) for k in other), set()).add(tuple(w.get(k) for k in GRID))
    for points in families.values():
        if len(points) >= 3 or all(len({p[i] for p in points}) >= 2 for i in range(len(GRID))):
            return True
    return False


@dataclass(frozen=True)
class Naming:
    """How rows of results name their workloads: by name (``keys`` empty), or by the options that
    vary among them (``keys``, in column order); ``same`` are the naming axes every row shares
    (``{"rw": "randread", "bs": "4k"}``), said once in a note; ``names``: the rows need their names
    too, beside the options (names tell apart rows whose options agree)."""

    keys: tuple[str, ...] = ()
    same: Mapping[str, str] = field(default_factory=dict)
    names: bool = False

    @property
    def by_options(self) -> bool:
        return bool(self.keys)

    def label(self, options: Options) -> str:
        return label(options, self.keys)

    def note(self) -> str | None:
        """``every row: randread 4k`` for the shared axes, None when there are none or names are used."""
        if not self.keys or not self.same:
            return None
        return "every row: " + label(self.same, list(self.same))

    def sort_key(self, options: Options) -> tuple[tuple[float, str], ...]:
        """Rows in option order, numbers numerically (QD2 before QD16)."""
        return tuple((_number(options.get(k)), options.get(k) or "") for k in self.keys)


def naming(names: Sequence[str], workloads: Sequence[Options]) -> Naming:
    """By name, unless the rows form a sweep (``is_sweep``) or a name stands for several workloads
    (a sweep's files often all run a job of one name); then by the options that vary among them, and
    by name as well when names tell apart rows whose options agree (an autotune's probe and its
    full-length repetitions of one configuration)."""
    by_name: dict[str, set[tuple[tuple[str, str | None], ...]]] = {}
    for name, w in zip(names, workloads, strict=True):
        by_name.setdefault(name, set()).add(tuple(sorted(w.items())))
    one_each = all(len(v) == 1 for v in by_name.values())
    if one_each and not is_sweep(workloads):
        return Naming()
    keys = varying(workloads)
    if not keys:
        return Naming()
    same = {k: v for k in AXES if k not in keys and (v := workloads[0].get(k)) is not None
            and all(w.get(k) == v for w in workloads)}
    return Naming(tuple(keys), same, one_each and len({o for v in by_name.values() for o in v}) < len(by_name))


@dataclass(frozen=True)
class Grid:
    """A sweep's figure over iodepth (rows) × numjobs (columns), for one family: the workloads
    that agree on every other option (``family`` names them, e.g. ``randread 4k``).

    ``cells`` maps ``(iodepth, numjobs)`` to the value (None: not measured); ``rows``/``columns``
    are the axis values in numeric order.
    """

    family: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    cells: Mapping[tuple[str, str], float | None]

    def values(self) -> list[tuple[tuple[str, str], float]]:
        return [(k, v) for k, v in self.cells.items() if v is not None]

    @property
    def geomean(self) -> float | None:
        """The geometric mean of the positive cells (for ratios: the typical change)."""
        positive = [v for _, v in self.values() if v > 0]
        return math.exp(sum(math.log(v) for v in positive) / len(positive)) if positive else None

    def best(self, higher: bool = True) -> tuple[tuple[str, str], float] | None:
        """The cell with the highest value (the lowest with ``higher=False``)."""
        found = self.values()
        if not found:
            return None
        return max(found, key=lambda kv: kv[1]) if higher else min(found, key=lambda kv: kv[1])


def _number(text: str | None) -> float:
    """An option's value as a number to sort by: a count, a size in bytes (``64k``) or a duration in µs
    (``10s``); infinity for anything else (it sorts last, by its text)."""
    if text is None:
        return math.inf
    for read in (float, units.parse_size, units.parse_duration_us):
        try:
            return float(read(text))
        except ValueError:
            continue
    return math.inf


def families(workloads: Sequence[Options]) -> list[str]:
    """Each workload's family: the name of the workloads that agree with it on every varying option
    but iodepth and numjobs, from their rw, mix and block size and those options (``randread 4k``)."""
    other = [k for k in varying(workloads) if k not in GRID]
    named = [k for k in AXES if k not in GRID] + [k for k in other if k not in AXES]
    return [label(w, named) for w in workloads]


def grids(points: Iterable[tuple[Options, float | None]]) -> list[Grid]:
    """The grids of ``(options, value)`` points: one per family (``families``), in order of first
    appearance. Families with a single point are left out."""
    listed = list(points)
    cells_of: dict[str, dict[tuple[str, str], float | None]] = {}
    for (options, value), family in zip(listed, families([o for o, _ in listed]), strict=True):
        cells_of.setdefault(family, {})[(options.get("iodepth") or "1", options.get("numjobs") or "1")] = value
    out = []
    for family, cells in cells_of.items():
        if len(cells) < 2:
            continue
        rows = tuple(sorted({r for r, _ in cells}, key=_number))
        columns = tuple(sorted({c for _, c in cells}, key=_number))
        out.append(Grid(family, rows, columns, cells))
    return out
