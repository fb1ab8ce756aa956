"""One table model, many renderers: terminal (rich), Markdown, CSV.

A Table holds display text per cell plus, for CSV and JSON, the raw value behind it (numbers
in SI base units), so a spreadsheet gets ``71314.6`` where the terminal shows ``71314.6``.

The terminal form fits the width it is given (``to_terminal``): the identifying columns
(``Column.identifying``: target, workload, host, direction, metric, verdict …) are never cut,
wrapped or dropped; other columns wrap at spaces, never inside a word; and a table that cannot
fit so becomes a vertical listing, one block of ``column  value`` lines per row.

Numbers are formatted alike in every table (``format_value``): IOPS with one decimal, MiB/s with
two, latencies with one in the largest unit that keeps them >= 1, percentages with one.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table as RichTable
from rich.text import Text

from ..units import format_iops, format_ns, format_rate

#: Column keys whose values say which row it is: kept whole in the terminal, at any width.
IDENTIFYING = frozenset({"target", "workload", "host", "direction", "metric", "verdict", "job", "side", "item",
                         "option", "fact"})
#: Before a table becomes a listing, a column that wraps keeps at least this many characters (or its
#: whole width when narrower): a column one word wide reads worse than a listing.
WRAP_MIN = 12


@dataclass(frozen=True)
class Column:
    """``key`` names the raw value in CSV; ``numeric`` columns are right-aligned; ``unit`` is the
    unit of the raw values (``IOPS``, ``B/s``, ``ns``, ``%``, ``s`` …), named in the CSV header
    (``csv_header``); ``csv_only`` columns carry raw values the display shows inside another cell
    (a spread, a unit) and appear in CSV only; ``whole`` columns, and those whose key is one of
    ``IDENTIFYING`` (the names a row is read by: target, workload, host, direction, metric,
    verdict), are never cut or wrapped in the terminal: other columns wrap first, and a table that
    cannot keep them whole is listed row by row (``to_terminal``)."""

    key: str
    title: str
    numeric: bool = False
    unit: str | None = None
    csv_only: bool = False
    whole: bool = False

    @property
    def identifying(self) -> bool:
        """Whether the terminal keeps this column's values whole (see the class docstring)."""
        return self.whole or self.key in IDENTIFYING

    @property
    def csv_header(self) -> str:
        """``key``, with the unit appended unless the key already ends with it: ``slo_ns``,
        ``iops``, ``bw_bytes_s``, ``lat_mean_ns``, ``a_mean`` (no unit: the row says it)."""
        if self.unit is None:
            return self.key
        slug = _UNIT_SLUGS.get(self.unit, self.unit)
        return self.key if self.key == slug or self.key.endswith(f"_{slug}") else f"{self.key}_{slug}"


#: Units as they end a CSV header (``units in names``, docs/design.md).
_UNIT_SLUGS = {"IOPS": "iops", "B/s": "bytes_s", "MiB/s": "mib_s", "ns": "ns", "µs": "us", "ms": "ms", "s": "s",
               "%": "pct", "bytes": "bytes", "ratio": "ratio"}


@dataclass(frozen=True)
class Cell:
    text: str
    value: Any = None
    style: str | None = None


@dataclass(frozen=True)
class Table:
    """Rows of cells under ``columns``, a ``title`` and ``notes`` (said below it; not in CSV).
    ``name`` is what ``--table`` selects it by (``compare``'s ``comparison``, ``summary`` …;
    ``select``); tables of one name are one CSV table (``to_csv``)."""

    title: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]
    notes: tuple[str, ...] = field(default=())
    name: str = ""


def shown(table: Table) -> Table:
    """The table as people see it: without its ``csv_only`` columns."""
    keep = [i for i, c in enumerate(table.columns) if not c.csv_only]
    if len(keep) == len(table.columns):
        return table
    return Table(table.title, tuple(table.columns[i] for i in keep),
                 tuple(tuple(row[i] for i in keep) for row in table.rows), table.notes, table.name)


def to_terminal(table: Table, width: int) -> RenderableType:
    """The table for a terminal ``width`` characters wide: as a grid whose identifying columns keep
    every value on one line and whose other columns wrap at spaces (``column_widths``), or, when
    that cannot fit, as a listing (``to_listing``). Never cuts a value."""
    table = shown(table)
    for compact in (False, True):  # 3 characters between columns, else 2
        widths = column_widths(table, width, compact)
        if widths is not None:
            return to_rich(table, widths, compact)
    return to_listing(table, width)


def _words(text: str) -> int:
    """The widest word of ``text`` (in terminal cells)."""
    return max((cell_len(w) for w in text.split()), default=0)


def _lines(text: str) -> int:
    return max((cell_len(line) for line in text.splitlines()), default=0)


def column_widths(table: Table, width: int, compact: bool = False) -> list[int] | None:
    """Each column's width (without padding) so that the grid is at most ``width`` wide, or None
    when it cannot be: identifying columns as wide as their widest value, the others at least
    their widest word (``WRAP_MIN`` for text that wraps), narrowed widest first. The grid adds 3
    characters per column and 1 (``box.SIMPLE_HEAVY``'s padding, separators and edges), or when
    ``compact`` 2 between columns and none at the edges (``to_rich``)."""
    natural, least = [], []
    for i, col in enumerate(table.columns):
        texts = [row[i].text for row in table.rows]
        full = max([_lines(col.title), *map(_lines, texts)])
        words = max([_words(col.title), *map(_words, texts)])
        if col.identifying:
            words = max([words, *map(_lines, texts)])
        elif not col.numeric:
            words = max(words, min(full, WRAP_MIN))
        natural.append(full)
        least.append(min(words, full) if not col.identifying else max(words, _words(col.title)))
    room = width - (2 * (len(natural) - 1) if compact else 3 * len(natural) + 1)
    if sum(least) > room:
        return None
    if sum(natural) <= room:
        return natural
    # Every column that can be narrowed is capped at one width (not below its least): the widest cap
    # that fits, and what is left over goes one character each to the capped columns, left first.
    def capped(cap: int) -> list[int]:
        return [max(low, min(full, cap)) for low, full in zip(least, natural, strict=True)]

    low, high = 0, max(natural)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if sum(capped(middle)) <= room else (low, middle - 1)
    widths = capped(low)
    spare = room - sum(widths)
    for i, full in enumerate(natural):
        if spare > 0 and widths[i] < full:
            widths[i] += 1
            spare -= 1
    return widths


def to_rich(table: Table, widths: list[int] | None = None, compact: bool = False) -> RichTable:
    """A rich Table (the grid), its columns ``widths`` wide when given (``column_widths``); ``compact``:
    without edges, two characters between columns."""
    table = shown(table)
    out = RichTable(title=_escape(table.title), box=box.SIMPLE_HEAVY, title_justify="left", title_style="bold",
                    show_edge=not compact, pad_edge=not compact, collapse_padding=compact)
    for i, col in enumerate(table.columns):
        out.add_column(_escape(col.title), justify="right" if col.numeric else "left", no_wrap=col.identifying,
                       width=None if widths is None else widths[i], overflow="fold")
    for row in table.rows:
        out.add_row(*(f"[{c.style}]{_escape(c.text)}[/]" if c.style else _escape(c.text) for c in row))
    return out


def to_listing(table: Table, width: int | None = None) -> Group:
    """The table as a vertical listing: its title, then per row a block of ``column  value`` lines
    (values wrap after the names), blocks apart by an empty line. When an identifying value would
    not fit beside the names in ``width``, every value goes on the line under its name instead."""
    table = shown(table)
    names = [col.title or col.key for col in table.columns]
    named = max(map(cell_len, names), default=0)
    longest = max((cell_len(row[i].text) for row in table.rows for i, col in enumerate(table.columns)
                   if col.identifying), default=0)
    stacked = width is not None and 2 + named + 2 + longest > width
    blocks: list[RenderableType] = [Text(table.title, style="bold")] if table.title else []
    for row in table.rows:
        grid = RichTable.grid(padding=(0, 2))
        if stacked:
            grid.add_column(overflow="fold")
            for name, cell in zip(names, row, strict=True):
                grid.add_row(Text(name, style="bold"))
                grid.add_row(Padding(Text(cell.text, style=cell.style or ""), (0, 0, 0, 2)))
        else:
            grid.add_column(no_wrap=True, style="bold", min_width=named)
            grid.add_column(overflow="fold")
            for name, cell in zip(names, row, strict=True):
                grid.add_row(Text(name), Text(cell.text, style=cell.style or ""))
        blocks.append(Padding(grid, (1, 0, 0, 2), expand=False))
    return Group(*blocks, Text(""))


def _escape(text: str) -> str:
    from rich.markup import escape
    return escape(text)


def to_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table with its title as a heading and notes below.

    ``&``, ``<`` and ``>`` become entities: Markdown renderers pass raw HTML through, and cells
    hold user strings (target names, labels)."""
    def cell(text: str) -> str:
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        return text.replace("|", "\\|").replace("\n", " ")

    table = shown(table)
    lines = [f"### {cell(table.title)}", ""] if table.title else []
    lines.append("| " + " | ".join(cell(c.title) for c in table.columns) + " |")
    lines.append("|" + "|".join("---:" if c.numeric else "---" for c in table.columns) + "|")
    lines += ["| " + " | ".join(cell(c.text) for c in row) + " |" for row in table.rows]
    if table.notes:
        lines += [""] + [f"- {cell(n)}" for n in table.notes]
    return "\n".join(lines) + "\n"


def to_csv(tables: Sequence[Table], titled: bool | None = None) -> str:
    """CSV of the raw values (display text where there is no raw value), every header naming its
    unit (``Column.csv_header``).

    One table is one header row and its rows. Several tables (a comparison's metrics, summary and
    differences) are blocks separated by one empty line, each block a row ``# TITLE`` (one field)
    and then that table's header and rows: ``read_csv`` (or ``text.split("\\n\\n")`` and any CSV
    reader per block, skipping the ``#`` row) reads it back; ``titled`` says whether to write the ``#``
    rows (default: for several tables). Notes are not part of the CSV."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for index, table in enumerate(tables):
        if titled or (titled is None and len(tables) > 1):
            if index:
                buf.write("\n")
            writer.writerow([f"# {table.title}"])
        writer.writerow([c.csv_header for c in table.columns])
        for row in table.rows:
            writer.writerow(["" if c.value is None and c.text == "–" else (c.text if c.value is None else c.value)
                             for c in row])
    return buf.getvalue()


def read_csv(text: str) -> list[tuple[str | None, list[list[str]]]]:
    """``to_csv``'s output read back: ``(title, rows)`` per table, the header first among the rows
    (title None for a single table). Raises nothing; an empty text gives no table."""
    out: list[tuple[str | None, list[list[str]]]] = []
    for block in (b for b in text.split("\n\n") if b.strip()):
        rows = list(csv.reader(io.StringIO(block)))
        title = rows[0][0][2:] if len(rows[0]) == 1 and rows[0][0].startswith("# ") else None
        out.append((title, rows[1:] if title is not None else rows))
    return out


def compact_places(where: Sequence[str], shown: int = 3) -> str:
    """A finding's places (``WORKLOAD on TARGET``) in one short line: up to ``shown`` of them as they
    are, else per target ``N workloads on TARGET (first, …, last)``."""
    if len(where) <= shown:
        return ", ".join(where)
    by_target: dict[str, list[str]] = {}
    for place in where:
        workload, sep, target = place.rpartition(" on ")
        by_target.setdefault(target if sep else "", []).append(workload if sep else place)
    parts = []
    for target, workloads in by_target.items():
        names = ", ".join(workloads) if len(workloads) <= 2 else f"{workloads[0]}, …, {workloads[-1]}"
        if not target:
            parts.append(names)
        else:
            parts.append(f"{len(workloads)} workloads on {target} ({names})" if len(workloads) > 1
                         else f"{workloads[0]} on {target}")
    return "; ".join(parts)


def format_value(unit: str, value: float | None) -> str:
    """A metric value for people, as every table shows it: ``1197.5`` or ``71314.6`` IOPS
    (``units.format_iops``), ``18.76`` (MiB/s), ``180.0 ms``; ``–`` unknown."""
    if value is None:
        return "–"
    if unit == "B/s":
        return format_rate(value)
    if unit == "ns":
        return format_ns(value)
    return format_iops(value)
