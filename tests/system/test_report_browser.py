"""The HTML report in real browsers: Debian's Chromium (Playwright) and Firefox ESR (Marionette),
never a downloaded build (tests/support/browsers.py). It loads offline with no network request, draws
every chart, shows hostile names as text and runs none of them; a comparison of two real fio sweeps
draws its sweep charts in both engines.

The runs are real fio's, recorded: the hostile runs replayed (``reportrun.replayed_hostile_runs``), the
sweeps the ones in tests/data/bench-fio. Screenshots go to ``$IOLAB_SCREENSHOT_DIR`` when it is set,
else to the test's temporary directory (parallel runs never write one file)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import benchfio
import browsers
import reportrun
from clirun import iolab
from iolab.report import document, html
from iolab.store.database import Store
from reportrun import EVIL_LABEL, EVIL_TARGET

#: One worker runs them all: each browser starts once, each page is built once.
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("report-browser")]

HOSTILE_CHARTS = ["iops-bars", "bandwidth-bars", "latency-percentiles", "sweep-iops-iodepth", "sweep-p99-iodepth",
                  "sweep-saturation", "timeseries-iops", "timeseries-bandwidth", "timeseries-latency"]
SWEEP_CHARTS = ["sweep-iops-iodepth", "sweep-iops-numjobs", "sweep-p99-iodepth", "sweep-p99-numjobs",
                "sweep-heatmap", "sweep-saturation", "sweep-ratio", "timeseries-iops", "timeseries-bandwidth",
                "timeseries-latency"]
FIGURES = """Array.from(document.querySelectorAll('figure[data-chart]')).map(f => ({
    name: f.dataset.chart, rendered: f.dataset.rendered,
    marks: f.querySelectorAll('svg g.mark-rect path, svg g.mark-line path, svg g.mark-symbol path').length}))"""


@pytest.fixture(scope="module")
def hostile_html(tmp_path_factory) -> Path:
    hostile = reportrun.replayed_hostile_runs(tmp_path_factory.getbasetemp())
    store = Store(f"sqlite:///{hostile.db}")
    runs = [store.get_run(i) for i in hostile.run_ids]
    series = {k: v for i in hostile.run_ids for k, v in store.time_series(i).items()}
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(html.render(document.build(runs, series)))
    return path


@pytest.fixture(scope="module")
def chromium() -> Iterator:  # type: ignore[type-arg]
    with browsers.chromium() as open_:
        yield open_


@pytest.fixture(scope="module", params=sorted(browsers.BROWSERS))
def browser(request) -> Iterator:  # type: ignore[type-arg]
    """Each browser in turn. Chromium is the module's one (``chromium``): a worker of pytest-xdist may run
    a test of ``browser['chromium']`` and one of ``chromium`` in any order, and Playwright's sync API
    cannot run twice at once in one process."""
    if request.param == "chromium":
        yield request.param, request.getfixturevalue("chromium")
        return
    with browsers.BROWSERS[request.param]() as open_:
        yield request.param, open_


def screenshot(tmp_path: Path, name: str) -> Path:
    """Where a screenshot goes: ``$IOLAB_SCREENSHOT_DIR/name`` (to look at), else the test's own
    temporary directory."""
    where = os.environ.get("IOLAB_SCREENSHOT_DIR")
    return Path(where) / name if where else tmp_path / name


def assert_drawn(browser: str, page, charts: list[str], min_marks: int) -> None:  # type: ignore[no-untyped-def]
    """Every chart of the page, in order, rendered by Vega with at least ``min_marks`` marks."""
    browsers.wait_for_charts(page)
    figures = page.evaluate(FIGURES)
    assert [f["name"] for f in figures] == charts
    for figure in figures:
        assert figure["rendered"] == "yes" and figure["marks"] >= min_marks, (browser, figure)


def test_report_loads_offline_and_draws_every_chart(browser, hostile_html, tmp_path):
    name, open_ = browser
    page = open_(hostile_html)
    assert_drawn(name, page, HOSTILE_CHARTS, min_marks=3)
    assert page.evaluate("performance.getEntriesByType('resource').map(e => e.name)") == []  # nothing fetched
    assert page.evaluate("document.querySelectorAll('.chart-error').length") == 0
    shot = screenshot(tmp_path, f"iolab-report-test-{name}.png")
    page.screenshot(shot)
    assert shot.stat().st_size > 100_000


def _axis(page, chart: str, part: str) -> list[str]:  # type: ignore[no-untyped-def]
    return page.evaluate(f"Array.from(document.querySelectorAll('figure[data-chart=\"{chart}\"] svg "
                         f".role-axis-{part} text')).map(t => t.textContent)")


def test_charts_do_not_flatter(browser, hostile_html):
    """As drawn: one y axis for the panels of a metric (a shared scale), latency labels in µs/ms/s
    (never "100,000"), a sweep chart as wide as the card."""
    name, open_ = browser
    page = open_(hostile_html)
    browsers.wait_for_charts(page)
    assert _axis(page, "iops-bars", "title") == ["IOPS"]  # two workload panels, one axis: shared
    labels = _axis(page, "latency-percentiles", "label")
    latency = [t for t in labels if not t.startswith("p")]
    assert latency and all(re.fullmatch(r"[\d.]+ (µs|ms|s)", t) for t in latency), (name, labels)
    width = page.evaluate("document.querySelector('figure[data-chart=\"sweep-saturation\"] svg')"
                          ".getBoundingClientRect().width")
    card = page.evaluate("document.querySelector('figure[data-chart=\"sweep-saturation\"]')"
                         ".getBoundingClientRect().width")
    assert width > 0.75 * card, (name, width, card)


def test_hostile_names_are_text_and_run_nothing(browser, hostile_html):
    _, open_ = browser
    page = open_(hostile_html)
    browsers.wait_for_charts(page)
    body = page.evaluate("document.body.innerText")
    assert EVIL_TARGET in body and EVIL_LABEL in body and "<img src=z onerror=alert(4)>" not in body  # in <details>
    assert page.evaluate("document.images.length") == 0
    assert page.evaluate("document.querySelectorAll('b, i').length") == 0
    page.evaluate("document.querySelectorAll('#jobs details').forEach(d => d.open = true)")
    assert "<img src=z onerror=alert(4)>" in page.evaluate("document.querySelector('#jobs').innerText")


def test_chromium_sees_no_request_console_error_or_dialog(chromium, hostile_html):
    page = chromium(hostile_html)
    browsers.wait_for_charts(page)
    assert page.problems == []
    assert page.requests == [page.page.url]  # the file, and nothing else
    # hover every bar: the tooltips show the subject's name, as text
    bars = page.page.locator("#chart-iops-bars g.mark-rect path")
    for i in range(bars.count()):
        bars.nth(i).hover(force=True)  # a short bar may lie under its repetition dot
        page.page.wait_for_timeout(50)
    tooltip = page.page.locator("#vg-tooltip-element")
    assert tooltip.count() == 1 and "IOPS" in tooltip.inner_text()
    page.page.locator("#chart-iops-bars g.mark-rect path").first.hover()
    page.page.wait_for_timeout(100)
    assert EVIL_TARGET in tooltip.inner_text() and tooltip.locator("img").count() == 0
    assert page.dialogs == [] and page.problems == []


def test_the_comparison_verdicts_are_at_the_top_in_colour(chromium, hostile_html, tmp_path):
    page = chromium(hostile_html)
    browsers.wait_for_charts(page)
    tables = page.evaluate("""Array.from(document.querySelectorAll('main section table')).map(t => ({
        section: t.closest('section').id, caption: t.caption ? t.caption.textContent : '',
        top: t.getBoundingClientRect().top + window.scrollY}))""")
    first_chart = page.evaluate("document.querySelector('figure[data-chart]').getBoundingClientRect().top "
                                "+ window.scrollY")
    summary, verdicts = tables[:2]
    assert summary["section"] == verdicts["section"] == "summary" and verdicts["top"] < first_chart
    assert summary["caption"] == f"Summary: geometric mean of other / {EVIL_LABEL}"
    assert verdicts["caption"] == f"{EVIL_LABEL} (run 1) → other (run 2)"
    cells = page.evaluate("""Array.from(document.querySelectorAll('#summary td.style-red, #summary td.style-green'))
        .map(c => ({text: c.textContent, colour: getComputedStyle(c).color,
                    background: getComputedStyle(c).backgroundColor}))""")
    assert not any("untested" in c["text"] for c in cells)  # a verdict without a test is never coloured
    plain = page.evaluate("""Array.from(document.querySelectorAll('#summary td'))
        .filter(c => c.textContent.endsWith('(untested)'))
        .map(c => ({text: c.textContent, background: getComputedStyle(c).backgroundColor}))""")
    assert plain and all(c["background"] == "rgba(0, 0, 0, 0)" for c in plain), plain
    page.screenshot(screenshot(tmp_path, "iolab-report-test-summary.png"), "#summary")


@pytest.fixture(scope="module")
def sweep_html(tmp_path_factory) -> Path:
    """The report of two real fio sweeps (recorded, tests/data/bench-fio): a whole one, and a randread-only
    one of the same file."""
    root = tmp_path_factory.mktemp("sweep-report")
    db = root / "iolab.db"
    for name, label in (("ssd", "first"), ("randread", "again")):
        assert iolab("import", str(benchfio.recorded(name, root / name)), "--label", label, db=db).returncode == 0
    out = root / "sweeps.html"
    proc = iolab("report", "first", "again", "-o", str(out), db=db)
    assert proc.returncode == 0, proc.stderr
    return out


def test_two_sweeps_draw_every_sweep_chart(browser, sweep_html, tmp_path):
    name, open_ = browser
    page = open_(sweep_html)
    assert_drawn(name, page, SWEEP_CHARTS, min_marks=6)
    cells = page.evaluate("document.querySelectorAll('#chart-sweep-heatmap g.mark-rect.role-mark path').length")
    assert cells == 6 * 3  # iodepth 1, 4, 16 x numjobs 1, 2 in three panels: first's randread and randwrite, again's
    ratios = page.evaluate("Array.from(document.querySelectorAll('#chart-sweep-ratio g.mark-text.role-mark text'))"
                           ".map(t => t.textContent)")
    assert len(ratios) == 6 and all(r.startswith("×") for r in ratios)  # the randread family is in both
    for chart in ("sweep-heatmap", "sweep-saturation", "sweep-ratio"):
        page.screenshot(screenshot(tmp_path, f"iolab-sweep-{chart}-{name}.png"), f"#chart-{chart}")


#: For every table header: each of its words, and on how many lines the browser laid it out.
HEADER_WORDS = """Array.from(document.querySelectorAll('th')).flatMap(th => {
    const text = th.textContent, out = [], re = /\\S+/g, nodes = [];
    const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(), at = 0; n; at += n.data.length, n = walker.nextNode()) nodes.push([n, at]);
    const point = i => { const [n, at] = nodes.filter(([n, at]) => at <= i).pop(); return [n, i - at]; };
    let m;
    while ((m = re.exec(text)) !== null) {
        const range = document.createRange();
        range.setStart(...point(m.index)); range.setEnd(...point(m.index + m[0].length - 1)); range.setEnd(
            range.endContainer, range.endOffset + 1);
        const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
        out.push({word: m[0], lines: tops.size});
    }
    return out;
})"""


@pytest.mark.parametrize("width", [420, 800])
def test_table_headers_never_break_inside_a_word(chromium, hostile_html, width):
    """On a narrow window the tables squeeze, and a header wraps between its words, never inside one
    ("targe t", "softir q" before)."""
    page = chromium(hostile_html)
    page.page.set_viewport_size({"width": width, "height": 900})
    browsers.wait_for_charts(page)
    words = page.evaluate(HEADER_WORDS)
    assert len(words) > 20 and {"target", "workload", "verdict"} <= {w["word"] for w in words}
    assert [w for w in words if w["lines"] != 1] == []
