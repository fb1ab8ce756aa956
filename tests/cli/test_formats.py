"""Every format carries the same facts: the verdict words of one comparison are identical in the
terminal table, Markdown, CSV, JSON and HTML; CSV headers name their units and hold values in them;
a CSV of several tables reads back table by table; every ± says which spread it is."""

from __future__ import annotations

import json
import re
from html import unescape

from inprocess import iolab
from iolab.report.table import read_csv
from iolab.store.database import Store
from storedruns import store_run

#: (workload, a's repetitions, b's repetitions) of (IOPS, clat mean ns), and the verdict on IOPS.
CASES = {
    "up": ([(1000, 1e5), (1010, 1e5), (990, 1e5)], [(2000, 1e5), (2010, 1e5), (1990, 1e5)], "better"),
    "flat": ([(1000, 1e5), (1001, 1e5)], [(1002, 1e5), (1003, 1e5)], "unchanged"),
    "wobbly": ([(100, 1e5), (150, 1e5)], [(170, 1e5), (110, 1e5)], "inconclusive"),  # +12 %, interval ×0.3–×4
    "single": ([(1000, 1e5)], [(1500, 1e5)], "better (untested)"),
    "lonely": ([(1000, 1e5)], [], "missing"),
}


def _stored(tmp_path):
    db = tmp_path / "db.sqlite"
    store = Store(f"sqlite:///{db}")
    store_run(store, "a", {name: a for name, (a, _, _) in CASES.items()})
    store_run(store, "b", {name: b for name, (_, b, _) in CASES.items() if b})
    store.close()
    return db


def _table_words(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) > 5 and cells[2] == "IOPS":
            out[cells[0]] = cells[-1]
    return out


def _markdown_words(text: str) -> dict[str, str]:
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| ")]
    return {r[0]: r[-1] for r in rows if len(r) > 5 and r[2] == "IOPS"}


def _html_words(text: str) -> dict[str, str]:
    summary = unescape(text[text.index('<section id="summary">'):text.index("</section>")])
    out = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", summary, re.S):
        cells = re.findall(r"<td(?: class=\"([^\"]*)\")?>([^<]*)</td>", row)
        if len(cells) > 5 and cells[2][1] == "IOPS":
            out[cells[0][1]] = cells[-1][1]
            if "untested" in cells[-1][1]:
                assert "style-" not in cells[-1][0]  # a verdict without a test is never coloured
    return out


def test_verdict_words_are_identical_in_every_format(tmp_path):
    db = _stored(tmp_path)
    expected = {name: verdict for name, (_, _, verdict) in CASES.items()}
    table = iolab("compare", "a", "b", db=db)
    markdown = iolab("compare", "a", "b", "--format", "markdown", db=db)
    csv_text = iolab("compare", "a", "b", "--format", "csv", db=db)
    document = iolab("compare", "a", "b", "--format", "json", db=db)
    report = iolab("report", "a", "b", "-o", str(tmp_path / "r.html"), db=db)
    for proc in (table, markdown, csv_text, document, report):
        assert proc.returncode == 0, proc.stderr
    (_, rows), *_ = read_csv(csv_text.stdout)
    header = rows[0]
    csv_words = {r[header.index("workload")]: r[header.index("verdict")] for r in rows[1:]
                 if r[header.index("metric")] == "iops"}
    json_words = {p["label"]: m["verdict"] for c in json.loads(document.stdout)["comparisons"] for p in c["pairs"]
                  for m in p["metrics"] if m["metric"] == "iops"}
    html_words = _html_words((tmp_path / "r.html").read_text())
    assert _table_words(table.stdout) == expected, table.stdout
    assert _markdown_words(markdown.stdout) == expected
    assert csv_words == expected and json_words == expected and html_words == expected
    # the summary counts an untested change apart from the tested ones, in words the tables use
    text = " ".join(table.stdout.split())
    assert "1 missing, 1 better (untested)" in text
    assert "'inconclusive' = beyond the threshold, but the interval is wider than the change" in text


def test_csv_names_its_units_and_holds_values_in_them(tmp_path):
    db = _stored(tmp_path)
    compared = iolab("compare", "a", "b", "--format", "csv", db=db)
    tables = read_csv(compared.stdout)  # one table, its header the first line
    assert compared.stdout.startswith("workload,direction,metric,") and [t for t, _ in tables] == [None]
    assert [t for t, _ in read_csv(compared.stderr)] == ["a (run 1) → b (run 2)", "Summary: geometric mean of b / a",
                                                         "Why results do not pair"]
    header, *rows = tables[0][1]
    assert header == ["workload", "direction", "metric", "unit", "n", "a_mean", "a_ci95_half", "b_mean",
                      "b_ci95_half", "change", "ratio", "ratio_ci95_low", "ratio_ci95_high", "p_value", "verdict"]
    by = {(r[0], r[2]): dict(zip(header, r, strict=True)) for r in rows}
    bw = by[("up", "bw")]  # 1000 IOPS of 4 KiB: 4,096,000 B/s, not 3.9 "MiB/s"
    assert bw["unit"] == "B/s" and float(bw["a_mean"]) == 4096000.0
    iops = by[("up", "iops")]
    assert iops["unit"] == "IOPS" and float(iops["a_mean"]) == 1000.0 and 0 < float(iops["a_ci95_half"]) < 100
    assert by[("up", "clat_mean")]["unit"] == "ns" and float(by[("up", "clat_mean")]["a_mean"]) == 1e5
    assert by[("single", "iops")]["a_ci95_half"] == ""  # one repetition: no interval, not 0
    shown = iolab("show", "a", "--format", "csv", db=db).stdout
    (_, (show_header, *_)), = read_csv(shown)
    assert show_header[-8:] == ["iops", "iops_cv_pct", "bw_mib_s", "bw_cv_pct", "clat_mean_ns", "clat_mean_cv_pct",
                                "clat_p99_ns", "clat_p99_cv_pct"]


def test_every_plus_minus_says_which_spread_it_is(tmp_path):
    db = _stored(tmp_path)
    compared = iolab("compare", "a", "b", db=db).stdout
    assert re.search(r"a \(±CI95\)\s+b \(±CI95\)", compared) and "±CI95: the half-width of a side's 95%" in compared
    shown = iolab("show", "a", db=db).stdout
    assert re.search(r"IOPS ±CV\s+MiB/s ±CV\s+clat mean ±CV\s+clat p99 ±CV", shown)
    assert "±CV: the repeats' sample standard deviation relative to the mean" in shown
    markdown = iolab("compare", "a", "b", "--format", "markdown", db=db).stdout
    assert "| a (±CI95) | b (±CI95) |" in markdown
