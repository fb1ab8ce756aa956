"""`iolab report`: the report model, HTML, Markdown, PNG/SVG, from real fio runs stored under
hostile names (reportrun.py); the chart data rules on hand-made series; and the realistic demo
of a fast target against a cgroup-throttled loop device."""

from __future__ import annotations

import re
import struct
import zlib
from html import unescape

import numpy as np
import pytest

import cgroup
import reportrun
from clirun import iolab
from iolab.analyze.compare import Side, compare
from iolab.model import TimeSeries
from iolab.report import chartdata, charts, document, html, images, markdown
from iolab.report.comparison import comparison_tables
from iolab.store.database import Store
from loopdev import loop_device, loop_unavailable_reason
from reportrun import EVIL_LABEL, EVIL_TARGET, EVIL_WORKLOAD


@pytest.fixture(scope="session")
def hostile(tmp_path_factory):
    return reportrun.hostile_runs(tmp_path_factory.getbasetemp() / "hostile-runs")


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


def test_markdown_references_the_pngs_and_escapes(report, tmp_path):
    written = images.write_images(report.charts, tmp_path / "charts")
    text = markdown.render(report, {n: p for n, (p, _) in written.items()}, tmp_path)
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


def test_pngs_are_twice_the_svg_size_and_not_blank(report, tmp_path):
    written = images.write_images(report.charts, tmp_path)
    assert len(written) == len(report.charts)
    for name, (png, svg) in written.items():
        width, height = (float(v) for v in re.search(r'width="([\d.]+)" height="([\d.]+)"', svg.read_text()).groups())
        pixels = read_png(png.read_bytes())
        assert pixels.shape[:2] == (round(height * images.PNG_SCALE), round(width * images.PNG_SCALE)), name
        rgb = pixels[:, :, :3].astype(float)
        assert rgb.std() > 20, f"{name} looks blank"
        coloured = (np.ptp(rgb, axis=2) > 60).mean()  # bars and lines in the palette, not just grey text
        assert coloured > 0.0003, f"{name} has no coloured marks"


def test_cli_report_writes_html_png_and_markdown(hostile, tmp_path):
    proc = iolab("report", *map(str, hostile.run_ids), "-o", str(tmp_path / "r.html"), "--markdown",
                 str(tmp_path / "r.md"), db=hostile.db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r.html").stat().st_size > 500_000  # the JavaScript is inline
    assert sorted(p.name for p in (tmp_path / "r_files").iterdir())[:2] == ["bandwidth-bars.png", "bandwidth-bars.svg"]
    assert "r_files/iops-bars.png" in (tmp_path / "r.md").read_text()
    assert f"{tmp_path / 'r.html'}  (HTML, 9 charts)" in proc.stdout
    compared = iolab("compare", *map(str, hostile.run_ids), "--metric", "iops,clat_p99", "--threshold", "3%",
                     "--format", "markdown", db=hostile.db, cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    chosen = iolab("report", *map(str, hostile.run_ids), "-o", str(tmp_path / "c.html"), "--markdown",
                   str(tmp_path / "c.md"), "--metric", "iops,clat_p99", "--threshold", "3%", db=hostile.db,
                   cwd=tmp_path)
    assert chosen.returncode == 0, chosen.stderr
    markdown_text = (tmp_path / "c.md").read_text()
    tables = [t for t in compared.stdout.split("### ") if t]
    assert len(tables) == 3 and "threshold ±3%" in compared.stdout and "| clat p99 |" in compared.stdout
    assert tables[2].startswith("Why results do not pair")  # run 2 lacks a target
    for table in tables:  # exactly the rows compare prints, at the top of the report
        assert "### " + table.rstrip() in markdown_text.split("## Throughput")[0]
    bad = iolab("report", *map(str, hostile.run_ids), "--metric", "speed", db=hostile.db, cwd=tmp_path)
    assert bad.returncode == 2 and "Error: unknown metric 'speed'" in bad.stderr
    missing = iolab("report", "999", db=hostile.db, cwd=tmp_path)
    assert missing.returncode == 2 and "Error: no run matches '999'" in missing.stderr
    (tmp_path / "file").write_text("")
    blocked = iolab("report", "1", "-o", str(tmp_path / "file" / "r.html"), db=hostile.db, cwd=tmp_path)
    assert blocked.returncode == 2 and "Error: cannot write" in blocked.stderr and "Traceback" not in blocked.stderr


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


# -- the realistic demo: a fast file and a throttled loop device ---------------------------


def test_report_of_a_file_against_a_throttled_loop_device(tmp_path):
    reason = cgroup.unavailable_reason() or loop_unavailable_reason()
    if reason:
        pytest.skip(reason)
    suite = tmp_path / "tiny.yaml"
    suite.write_text("name: tiny\ndefaults: {ioengine: libaio, direct: 1, size: 16m, time_based: 1, runtime: 2s}\n"
                     "workloads:\n  - {rw: randread, bs: 4k, iodepth: [1, 8]}\n")
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=32 * 1024**2) as loop, cgroup.throttled(loop.path, iops=200) as group:
        fast = iolab("run", str(suite), "--target", f"fast={tmp_path / 'fast.dat'}", "--label", "fast", db=db)
        assert fast.returncode == 0, fast.stderr
        slow = iolab("run", str(suite), "--target", f"slow={loop.path}", "--label", "slow", db=db,
                     wrapper=group.wrapper())
        assert slow.returncode == 0, slow.stderr
    proc = iolab("report", "fast", "slow", "-o", str(tmp_path / "r.html"), "--png", str(tmp_path / "png"), db=db)
    assert proc.returncode == 0, proc.stderr
    store = Store(f"sqlite:///{db}")
    runs = [store.get_run(i) for i in (1, 2)]
    rows = {(r["subject"], r["category"]): r["iops"] for r in chartdata.repeat_rows(
        runs, chartdata.subjects(runs), chartdata.Categories(runs))}
    slow_iops, fast_iops = rows[("slow", "randread-4k-qd8")], rows[("fast", "randread-4k-qd8")]
    assert slow_iops < 260 and fast_iops > 5 * slow_iops
    assert (tmp_path / "png" / "sweep-saturation.png").exists() and (tmp_path / "png" / "timeseries-iops.png").exists()
    page = (tmp_path / "r.html").read_text()
    summary = unescape(page[page.index('<section id="summary">'):page.index("</section>")])
    assert "<caption>fast (run 1) → slow (run 2)</caption>" in summary
    iops = re.findall(r"<td>(randread-4k-qd\d)</td><td>read</td><td>IOPS</td>"
                      r".*?<td(?: class=\"([^\"]*)\")?>([^<]*)</td></tr>", summary)
    assert iops == [("randread-4k-qd1", "", "worse (untested)"),  # one run a side: untested, not coloured
                    ("randread-4k-qd8", "", "worse (untested)")]
    assert "<caption>Environment differences</caption>" in summary
    assert re.search(r"<td>device</td><td>[^<]+</td><td>loop\d+</td>", summary)
