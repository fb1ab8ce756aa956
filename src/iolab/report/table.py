"""One table model, many renderers: terminal (rich), Markdown, CSV.

A Table holds display text per cell plus, for CSV and JSON, the raw value behind it (numbers
in SI base units), so a spreadsheet gets ``71314.6`` where the terminal shows ``71,315``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.table import Table as RichTable

from ..units import format_ns, format_rate


@dataclass(frozen=True)
class Column:
    """``key`` names the raw value in CSV; ``numeric`` columns are right-aligned; ``unit`` is the
    unit of the raw values (``IOPS``, ``B/s``, ``ns``, ``%``, ``s`` …), named in the CSV header
    (``csv_header``); ``csv_only`` columns carry raw values the display shows inside another cell
    (a spread, a unit) and appear in CSV only; ``whole`` columns (the names a row is read by: target,
    workload, host) are never cut or wrapped in the terminal: other columns wrap first."""

    key: str
    title: str
    numeric: bool = False
    unit: str | None = None
    csv_only: bool = False
    whole: bool = False

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
    title: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]
    notes: tuple[str, ...] = field(default=())


def shown(table: Table) -> Table:
    """The table as people see it: without its ``csv_only`` columns."""
    keep = [i for i, c in enumerate(table.columns) if not c.csv_only]
    if len(keep) == len(table.columns):
        return table
    return Table(table.title, tuple(table.columns[i] for i in keep),
                 tuple(tuple(row[i] for i in keep) for row in table.rows), table.notes)


def to_rich(table: Table) -> RichTable:
    """A rich Table for the terminal."""
    table = shown(table)
    out = RichTable(title=_escape(table.title), box=box.SIMPLE_HEAVY, title_justify="left", title_style="bold")
    for i, col in enumerate(table.columns):
        widest = max((len(row[i].text) for row in table.rows), default=0) if col.whole else None
        out.add_column(_escape(col.title), justify="right" if col.numeric else "left",
                       no_wrap=col.numeric or col.whole, min_width=widest)
    for row in table.rows:
        out.add_row(*(f"[{c.style}]{_escape(c.text)}[/]" if c.style else _escape(c.text) for c in row))
    return out


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


def to_csv(tables: Sequence[Table]) -> str:
    """CSV of the raw values (display text where there is no raw value), every header naming its
    unit (``Column.csv_header``).

    One table is one header row and its rows. Several tables (a comparison's metrics, summary and
    differences) are blocks separated by one empty line, each block a row ``# TITLE`` (one field)
    and then that table's header and rows: ``read_csv`` (or ``text.split("\\n\\n")`` and any CSV
    reader per block, skipping the ``#`` row) reads it back. Notes are not part of the CSV."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for index, table in enumerate(tables):
        if len(tables) > 1:
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
    """A metric value for people: ``1197.5`` or ``71315`` IOPS, ``18.76`` (MiB/s), ``180.0 ms``; ``–`` unknown.

    IOPS have no thousands separator (the tables are pasted into wikis and spreadsheets) and one
    decimal below 10000, where a comparison is read for small differences."""
    if value is None:
        return "–"
    if unit == "B/s":
        return format_rate(value)
    if unit == "ns":
        return format_ns(value)
    return f"{value:.1f}" if abs(value) < 10_000 else f"{value:.0f}"
