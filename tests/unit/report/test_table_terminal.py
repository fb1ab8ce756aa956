"""Tables fitted to a terminal (``report.table.to_terminal``): the identifying columns keep every value
whole at any width, other columns wrap between words, and a table that cannot fit so is listed row by
row; numbers are formatted alike in every table."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from iolab.report.table import Cell, Column, Table, column_widths, format_value, to_terminal
from iolab.units import format_iops

WORKLOAD = "randread-4k-qd32-numjobs4-sched_mq-deadline"


def _table(rows: int = 3) -> Table:
    columns = (Column("target", "target"), Column("workload", "workload"), Column("direction", "dir"),
               Column("metric", "metric"), Column("a_mean", "baseline", True), Column("b_mean", "candidate", True),
               Column("change", "change", True), Column("what", "what changed"), Column("verdict", "verdict"))
    body = tuple((Cell("nvme0n1"), Cell(f"{WORKLOAD}-{i}"), Cell("read"), Cell("clat p99.9"), Cell("2994.0"),
                  Cell("227381.0"), Cell("+224387.0 (+7494.6%)"),
                  Cell("scheduler none → mq-deadline; nr_requests 128 → 256; kernel 6.1.0 → 6.12.0"),
                  Cell("worse (untested)")) for i in range(rows))
    return Table("a → b", columns, body, name="comparison")


def _printed(table: Table, width: int) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(to_terminal(table, width))
    return console.export_text()


@pytest.mark.parametrize("width", [60, 80, 100, 120, 160, 240])
def test_identifying_values_are_whole_at_every_width(width):
    text = _printed(_table(), width)
    assert max(map(len, text.splitlines())) <= width
    for i in range(3):
        assert f"{WORKLOAD}-{i}" in text
    for value in ("nvme0n1", "clat p99.9", "worse (untested)", "2994.0", "227381.0"):
        assert text.count(value) == 3, (width, value)
    table = _table()
    words = {w for text in (table.title, *(c.title for c in table.columns),
                            *(c.text for row in table.rows for c in row)) for w in text.split()}
    printed = {w for w in text.split() if set(w) != {"━"}}
    assert printed <= words, printed - words  # no word cut in two, none made up


def test_a_table_that_fits_is_a_grid_and_one_that_cannot_a_listing():
    wide = _printed(_table(), 240)
    assert "━━━" in wide and wide.count("worse (untested)") == 3 and "\n  verdict" not in wide
    narrow = _printed(_table(), 80)
    assert "━━━" not in narrow
    assert len(re.findall(r"^  workload +" + re.escape(WORKLOAD), narrow, re.M)) == 3  # one block a row
    assert column_widths(_table(), 80) is None and column_widths(_table(), 80, compact=True) is None


def test_columns_that_wrap_are_narrowed_evenly_and_never_below_a_word():
    widths = column_widths(_table(), 160)
    assert widths is not None and sum(widths) + 3 * len(widths) + 1 <= 160
    assert widths[1] == len(WORKLOAD) + 2  # the workload: whole
    assert widths[7] >= len("mq-deadline;")


def test_numbers_are_formatted_alike_in_every_table():
    assert [format_iops(v) for v in (227381, 2994, 1197.54, 0.44)] == ["227381.0", "2994.0", "1197.5", "0.4"]
    assert format_value("IOPS", 227381) == format_iops(227381) == "227381.0"
    assert format_value("B/s", 2**20) == "1.00" and format_value("ns", 1.5e6) == "1.5 ms"
    assert format_value("IOPS", None) == format_iops(None) == "–"
