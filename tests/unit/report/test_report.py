"""The report: its model, HTML, Markdown, PNG/SVG, from real fio runs (replayed from recordings) stored
under hostile names (tests/support/reportrun.py); the chart data rules on hand-made series. `iolab
report` itself: tests/cli/test_report.py; the realistic demo of a fast target against a
cgroup-throttled loop device: tests/system/test_report_throttled.py; in browsers:
tests/system/test_report_browser.py."""

from __future__ import annotations

import re
import struct
import zlib
from html import unescape

import numpy as np
import pytest

import reportrun
from iolab.analyze.compare import Side, compare
from iolab.model import TimeSeries
from iolab.report import chartdata, charts, document, html, images, markdown
from iolab.report.comparison import comparison_tables
from iolab.store.database import Store
from reportrun import EVIL_LABEL, EVIL_TARGET, EVIL_WORKLOAD


@pytest.fixture(scope="session")
def hostile(tmp_path_factory):
    return reportrun.replayed_hostile_runs(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def report(hostile):
    store = Store(f"sqlite:///{hostile.db}")
    runs = [store.get_run(i) for i in hostile.run_ids]
    series = {k: v for i in hostile.run_ids for k, v in store.time_series(i).items()}
    return document.build(runs, series)


def test_report_has_every_chart_kind_with_data(report):
    names = [c.name for c in report.charts]
    assert names == ["iops-bars", "bandwidth-bars", "latency-percentiles", "sweep-iops-iodepth", "sweep-p99-iodepth",
                     "sweep-saturation", "timeseries-iops", "timeseries-bandwidth", "timeseries-latency"]
    for chart in report.charts:
        assert chart.spec["data"]["values"], chart.name
        assert chart.spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/v6")
    subjects = {r["subject"] for r in report.charts[0].spec["data"]["values"]}
    assert subjects == {f"{EVIL_LABEL} · {EVIL_TARGET}", f"{EVIL_LABEL} · fast", "other · fast"}
    scaling = report.charts[3].spec["data"]["values"]  # the qd1/qd4 pair; the randrw workload has one point
    points = {(r["family"], r["iodepth"], r["numjobs"]) for r in scaling}
    assert points == {("randread 4k", 1, 2), ("randread 4k", 4, 2)}
    assert {r["workload"] for r in scaling} == {f"{EVIL_WORKLOAD}-qd1", f"{EVIL_WORKLOAD}-qd4"}
    assert any("P3: runtime too short" in f.text for f in report.findings)


def test_a_comparison_report_starts_with_the_verdicts_compare_gives(hostile, report):
    store = Store(f"sqlite:///{hostile.db}")
    runs = [store.get_run(i) for i in hostile.run_ids]
    expected = comparison_tables(compare([(Side(EVIL_LABEL, (runs[0].info.id,), (EVIL_LABEL,)), [runs[0]]),
                                          (Side("other", (runs[1].info.id,), ("other",)), [runs[1]])]))
    summary, verdicts, *rest = report.summary
    assert (verdicts, summary, *rest) == tuple(expected)  # the geometric means come first, above the long table
    assert summary.title == f"Summary: geometric mean of other / {EVIL_LABEL}"
    assert verdicts.title == f"{EVIL_LABEL} (run 1) → other (run 2)" and verdicts.columns[-1].title == "verdict"
    rows = {(r[1].text, r[2].text, r[3].text): r[-1] for r in verdicts.rows}  # target workload dir metric
    capped = rows[(f"{EVIL_WORKLOAD}-qd4", "read", "IOPS")]  # run B capped this one at 500 IOPS per job
    assert capped.text == "worse (untested)" and capped.style is None  # no test: never coloured as a finding
    assert rows[(f"{EVIL_WORKLOAD}-qd1", "read", "IOPS")].text == "unchanged"  # the same fio run in both
    assert any(r[0].text == EVIL_TARGET and r[-1].text == "missing" for r in verdicts.rows)  # run B lacks it
    (why,) = rest  # same machine and fio, same options: no differences (the loop device test has some)
    assert why.title == "Why results do not pair" and why.rows[0][0].text == EVIL_LABEL  # the target B lacks
    only = document.build(runs[:1])
    assert [t.title for t in only.summary] == [f"run 1: hostile<suite> [{EVIL_LABEL}] (complete)"]  # one run


def test_html_verdicts_are_coloured_and_long_tables_grouped(report):
    text = html.render(report)
    summary = text[text.index('<section id="summary">'):text.index("</section>")]
    captions = re.findall(r"<caption>(.*?)</caption>", summary)
    assert captions[0].startswith("Summary: geometric mean") and "→" in captions[1]
    assert '<td>worse (untested)</td>' in summary and "style-red" not in summary  # untested: not a finding
    assert '<td class="style-dim">missing</td>' in summary
    view = html.table_view(report.summary[1])
    assert "repeat" not in view[0]["cells"][1]["class"] and "repeat" in view[1]["cells"][1]["class"]
    assert sum("group" in r["class"] for r in view) == 1  # one border: where the target changes


def test_html_is_self_contained_and_escapes_every_user_string(report, tmp_path):
    text = html.render(report)
    assert not re.search(r"<(link|iframe|object|embed)\b", text)
    assert not re.search(r"<script[^>]*\bsrc=", text) and not re.search(r"<img\b[^>]*\bsrc=[\"']?https?:", text)
    for evil in (EVIL_TARGET, EVIL_LABEL, "<img src=y onerror=alert(3)>", "<img src=z onerror=alert(4)>", "<b>"):
        assert evil not in text  # only ever escaped
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and "base&lt;/script&gt;&lt;script&gt;" in text
    assert "\\u003c/script\\u003e" in text  # inside the JSON specs
    scripts = re.findall(r"<script>(.*?)</script>", text, flags=re.S)
    assert len(scripts) == 2  # the vega bundle and the page's own; the specs are JSON blocks
    csp = unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', text).group(1))
    assert "default-src 'none'" in csp and "connect-src" not in csp  # nothing may be fetched
    for script in scripts:
        assert html._sha256(script) in csp


@pytest.fixture(scope="module")
def written(report, tmp_path_factory):
    """The report's charts written as PNG and SVG once (``vl-convert``: seconds each time), in
    ``charts/`` of a directory of their own: (that directory, ``images.write_images``' result)."""
    where = tmp_path_factory.mktemp("images")
    return where, images.write_images(report.charts, where / "charts")


def test_markdown_references_the_pngs_and_escapes(report, written):
    where, written = written
    text = markdown.render(report, {n: p for n, (p, _) in written.items()}, where)
    for chart in report.charts:
        assert f"](charts/{chart.name}.png)" in text
    assert EVIL_TARGET not in text.split("```")[0] and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "### Summary: geometric mean" in text and "| verdict |" in text


def read_png(data: bytes) -> np.ndarray:
    """A PNG (8-bit RGB or RGBA, not interlaced) as an array of shape (height, width, channels)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0
        elif kind == b"IDAT":
            idat += body
    bpp = 4 if colour == 6 else 3
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, width * bpp + 1)
    out = np.zeros((height, width * bpp), dtype=np.uint8)
    prior = np.zeros(width * bpp, dtype=np.uint8)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int64)
        if kind == 0:
            row = line
        elif kind == 1:  # Sub: running sum per channel
            row = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1)
        elif kind == 2:
            row = line + prior
        else:  # Average and Paeth are sequential; vl-convert does not use them, so plain loops do
            row = np.zeros_like(line)
            for i in range(len(line)):
                a = int(row[i - bpp]) if i >= bpp else 0
                b, c = int(prior[i]), int(prior[i - bpp]) if i >= bpp else 0
                if kind == 3:
                    row[i] = (line[i] + (a + b) // 2) % 256
                else:
                    p = a + b - c
                    pred = a if abs(p - a) <= min(abs(p - b), abs(p - c)) else (b if abs(p - b) <= abs(p - c) else c)
                    row[i] = (line[i] + pred) % 256
        out[y] = prior = (row % 256).astype(np.uint8)
    return out.reshape(height, width, bpp)


def test_pngs_are_twice_the_svg_size_and_not_blank(report, written):
    _, written = written
    assert len(written) == len(report.charts)
    for name, (png, svg) in written.items():
        width, height = (float(v) for v in re.search(r'width="([\d.]+)" height="([\d.]+)"', svg.read_text()).groups())
        pixels = read_png(png.read_bytes())
        assert pixels.shape[:2] == (round(height * images.PNG_SCALE), round(width * images.PNG_SCALE)), name
        rgb = pixels[:, :, :3].astype(float)
        assert rgb.std() > 20, f"{name} looks blank"
        coloured = (np.ptp(rgb, axis=2) > 60).mean()  # bars and lines in the palette, not just grey text
        assert coloured > 0.0003, f"{name} has no coloured marks"


# -- chart data rules on hand-made series ----------------------------------------------------


def ts(index: int, metric: str, points: dict[int, float], direction: str = "read") -> TimeSeries:
    return TimeSeries("j", index, direction, metric, tuple(points), tuple(points.values()), 1000)


def test_per_second_sums_clones_and_weights_latency_by_iops():
    series = [ts(1, "iops", {999: 100, 2000: 300, 3000: 50}), ts(2, "iops", {1000: 300, 2000: 100}),
              ts(1, "bw_bytes_s", {1000: 1048576}), ts(2, "bw_bytes_s", {1000: 1048576}),
              ts(1, "clat_ns", {1000: 1000, 2000: 2000}), ts(2, "clat_ns", {1000: 3000, 2000: 4000})]
    points = chartdata._per_second(series)[("j", "read")]
    assert points[1.0] == {"iops": 400, "mib_s": 2.0, "lat_us": pytest.approx((1 * 100 + 3 * 300) / 400)}
    assert points[2.0]["iops"] == 400 and points[2.0]["lat_us"] == pytest.approx((2 * 300 + 4 * 100) / 400)
    assert 3.0 not in points  # clone 2 logged no third window: half a sum is not drawn


def test_wide_spread_switches_time_series_to_log():
    rows = [{"category": "w", "subject": s, "iops": v} for s, v in (("fast", 40000), ("slow", 200))]
    assert charts.wide_spread(rows, "iops")
    rows[1]["iops"] = 20000
    assert not charts.wide_spread(rows, "iops")
