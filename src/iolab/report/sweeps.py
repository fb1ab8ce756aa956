"""A sweep's figures as grids: iodepth down, numjobs across, one grid per target, family (the other
options that vary: ``randread 4k``) and direction. ``iolab show`` prints IOPS and p99 latency grids
of a sweep, ``iolab compare`` the grid of the ratio between two sweeps with its geometric mean and
its best and worst cells (``sweep.Grid``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..analyze import sweep
from ..model import Run
from ..units import format_iops, format_ns
from .results import ALL_HOSTS, ResultRow, result_rows
from .table import Cell, Column, Table

if TYPE_CHECKING:  # only annotations: `show` of a sweep imports no comparison code
    from ..analyze.compare import Comparison, SideComparison

#: The figures ``iolab show`` draws as grids for a sweep: (ResultRow summary, title, format, higher is better).
SHOWN: tuple[tuple[str, str, Callable[[float], str], bool], ...] = (
    ("iops", "IOPS", format_iops, True), ("clat_p99", "clat p99", format_ns, False))


def grid_table(grid: sweep.Grid, title: str, fmt: Callable[[float], str], higher: bool,
               ratio: bool = False) -> Table:
    """One grid as a table: a row per iodepth, a column per numjobs; notes name the best and the
    worst cell (and for ratios the geometric mean)."""
    columns = (Column("iodepth", "iodepth \\ numjobs", True),
               *(Column(f"numjobs_{c}", c, True) for c in grid.columns))
    rows = tuple((Cell(r, int(r) if r.isdigit() else r),
                  *(_cell(grid.cells.get((r, c)), fmt) for c in grid.columns)) for r in grid.rows)
    notes = []
    if ratio and grid.geomean is not None:
        notes.append(f"geometric mean ×{grid.geomean:.3g}")
    best, worst = grid.best(higher), grid.best(not higher)
    if best is not None and worst is not None and best != worst:
        notes.append(f"best QD{best[0][0]} ×{best[0][1]} ({fmt(best[1])}), worst QD{worst[0][0]} ×{worst[0][1]} "
                     f"({fmt(worst[1])})")
    return Table(title=title, columns=columns, rows=rows, notes=tuple(notes))


def _cell(value: float | None, fmt: Callable[[float], str]) -> Cell:
    return Cell("–" if value is None else fmt(value), value)


def _ratio(value: float) -> str:
    return f"×{value:.3g}"


def run_grids(run: Run) -> list[Table]:
    """IOPS and p99 completion-latency grids of a sweep run (none for a run that is no sweep)."""
    rows = [r for r in result_rows(run) if r.host in (None, ALL_HOSTS) and r.direction != "–"]
    if not sweep.is_sweep([r.options for r in rows]):
        return []
    tables = []
    targets = {r.target for r in rows}
    for (target, direction), mine in _groups(rows).items():
        for field, title, fmt, higher in SHOWN:
            points = [(r.options, getattr(r, field).mean) for r in mine]
            for grid in sweep.grids(points):
                tables.append(grid_table(grid, f"{title} · {_where(target, grid, direction, len(targets) > 1)}",
                                         fmt, higher))
    return tables


def _groups(rows: Sequence[ResultRow]) -> dict[tuple[str, str], list[ResultRow]]:
    groups: dict[tuple[str, str], list[ResultRow]] = {}
    for r in rows:
        groups.setdefault((r.target, r.direction), []).append(r)
    return groups


def _where(target: str, grid: sweep.Grid, direction: str, several_targets: bool) -> str:
    """``ssd · randread 4k``: the target (when there are several), the family, and the direction
    when the family's rw does not tell it (a mixed workload has a grid per direction)."""
    implied = grid.family.split(" ")[0] in ("read", "randread", "write", "randwrite", "trim", "randtrim")
    return " ".join(filter(None, (f"{target} ·" if several_targets else "", grid.family,
                                  "" if implied else direction)))


def comparison_grids(comparison: Comparison, c: SideComparison) -> list[Table]:
    """For two sweeps: the ratio (other / baseline) of the comparison's first metric as grids, one per
    target, family and direction, with the geometric mean and the best and worst cell."""
    if not comparison.metrics:
        return []
    metric = comparison.metrics[0]
    pairs = [p for p in c.pairs if p.a is not None and p.b is not None]
    table = sweep.option_table([(p.a or p.b).options for p in pairs])  # type: ignore[union-attr]
    if not sweep.is_sweep(table):
        return []
    groups: dict[tuple[str, str], list[tuple[sweep.Options, float | None]]] = {}
    for pair, options in zip(pairs, table, strict=True):
        row = next((m for m in pair.metrics if m.metric.name == metric.name), None)
        if row is not None:
            groups.setdefault((pair.target, pair.direction), []).append((options, row.ratio))
    several = len({target for target, _ in groups}) > 1
    tables = []
    for (target, direction), points in groups.items():
        for grid in sweep.grids(points):
            where = _where(target, grid, direction, several)
            title = f"{metric.title} ratio {c.other.selector} / {c.baseline.selector} · {where}"
            tables.append(grid_table(grid, title, _ratio, metric.higher_is_better, ratio=True))
    return tables
