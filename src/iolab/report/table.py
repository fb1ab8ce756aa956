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


@dataclass(frozen=True)
class Column:
    """``key`` names the raw value in CSV; ``numeric`` columns are right-aligned."""

    key: str
    title: str
    numeric: bool = False


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


def to_rich(table: Table) -> RichTable:
    """A rich Table for the terminal."""
    out = RichTable(title=_escape(table.title), box=box.SIMPLE_HEAVY, title_justify="left", title_style="bold")
    for col in table.columns:
        out.add_column(_escape(col.title), justify="right" if col.numeric else "left", no_wrap=col.numeric)
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

    lines = [f"### {cell(table.title)}", ""] if table.title else []
    lines.append("| " + " | ".join(cell(c.title) for c in table.columns) + " |")
    lines.append("|" + "|".join("---:" if c.numeric else "---" for c in table.columns) + "|")
    lines += ["| " + " | ".join(cell(c.text) for c in row) + " |" for row in table.rows]
    if table.notes:
        lines += [""] + [f"- {cell(n)}" for n in table.notes]
    return "\n".join(lines) + "\n"


def to_csv(tables: Sequence[Table]) -> str:
    """CSV of the raw values (display text where there is no raw value); one header row per
    table shape, with a ``table`` column when there are several tables."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    header: tuple[str, ...] | None = None
    for table in tables:
        keys = tuple(c.key for c in table.columns)
        if keys != header:
            writer.writerow((["table"] if len(tables) > 1 else []) + list(keys))
            header = keys
        for row in table.rows:
            values = ["" if c.value is None and c.text == "–" else (c.text if c.value is None else c.value)
                      for c in row]
            writer.writerow(([table.title] if len(tables) > 1 else []) + values)
    return buf.getvalue()


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
