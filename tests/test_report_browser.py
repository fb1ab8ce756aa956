"""The HTML report in a real browser: Debian's Chromium driven by Playwright (never a downloaded
browser). Loads offline with no console errors and no network request, draws every chart,
shows hostile names as text and runs none of them."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import reportrun
from iolab.report import document, html
from iolab.store import Store
from reportrun import EVIL_LABEL, EVIL_TARGET

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: Where the screenshot goes, for people to look at (CI keeps it as an artefact if it wants).
SCREENSHOT = Path(os.environ.get("IOLAB_SCREENSHOT_DIR", tempfile.gettempdir())) / "iolab-report-test.png"

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page_of(tmp_path_factory) -> Iterator:  # type: ignore[type-arg]
    if not os.path.exists(CHROMIUM):
        pytest.skip("Chromium is not installed (Debian package chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) is not installed")
    hostile = reportrun.hostile_runs(tmp_path_factory.getbasetemp() / "hostile-runs")
    store = Store(f"sqlite:///{hostile.db}")
    runs = [store.get_run(i) for i in hostile.run_ids]
    series = {k: v for i in hostile.run_ids for k, v in store.time_series(i).items()}
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(html.render(document.build(runs, series)))
    profile = tempfile.mkdtemp(prefix="iolab-chromium-")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=ARGS, headless=True,
                                                       viewport={"width": 1400, "height": 1000})
        try:
            yield lambda: _open(context, path)
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


class Loaded:
    def __init__(self, page, problems, requests, dialogs):  # type: ignore[no-untyped-def]
        self.page, self.problems, self.requests, self.dialogs = page, problems, requests, dialogs


def _open(context, path: Path) -> Loaded:  # type: ignore[no-untyped-def]
    page = context.new_page()
    problems: list[str] = []
    requests: list[str] = []
    dialogs: list[str] = []
    page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: requests.append(r.url))
    # anything but the file itself is refused, so a slip could not reach the network either
    page.route("**/*", lambda route: route.continue_() if route.request.url == path.as_uri() else route.abort())
    page.goto(path.as_uri())
    page.wait_for_function("document.body.dataset.charts === 'done'", timeout=60_000)
    return Loaded(page, problems, requests, dialogs)


def test_report_loads_offline_and_draws_every_chart(page_of):
    loaded = page_of()
    page = loaded.page
    assert loaded.problems == []
    assert loaded.requests == [page.url]  # the file, and nothing else
    figures = page.eval_on_selector_all("figure[data-chart]", """figures => figures.map(f => ({
        name: f.dataset.chart, rendered: f.dataset.rendered,
        marks: f.querySelectorAll('svg g.mark-rect path, svg g.mark-line path, svg g.mark-symbol path').length}))""")
    assert [f["name"] for f in figures] == ["iops-bars", "bandwidth-bars", "latency-percentiles", "sweep-iops-iodepth",
                                            "sweep-p99-iodepth", "sweep-saturation", "timeseries-iops",
                                            "timeseries-bandwidth", "timeseries-latency"]
    for figure in figures:
        assert figure["rendered"] == "yes" and figure["marks"] >= 3, figure
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    assert SCREENSHOT.stat().st_size > 100_000


def test_the_comparison_verdicts_are_at_the_top_in_colour(page_of):
    page = page_of().page
    tables = page.eval_on_selector_all("main section table", """tables => tables.map(t => ({
        section: t.closest('section').id, caption: t.caption ? t.caption.textContent : '',
        top: t.getBoundingClientRect().top + window.scrollY}))""")
    first_chart = page.eval_on_selector("figure[data-chart]", "f => f.getBoundingClientRect().top + window.scrollY")
    summary, verdicts = tables[:2]
    assert summary["section"] == verdicts["section"] == "summary" and verdicts["top"] < first_chart
    assert summary["caption"] == f"Summary: geometric mean of other / {EVIL_LABEL}"
    assert verdicts["caption"] == f"{EVIL_LABEL} (run 1) → other (run 2)"
    cells = page.eval_on_selector_all("#summary td.style-red, #summary td.style-green", """cells => cells.map(c => ({
        text: c.textContent, colour: getComputedStyle(c).color, background: getComputedStyle(c).backgroundColor}))""")
    assert {"text": "worse (untested)", "colour": "rgb(179, 38, 30)", "background": "rgb(252, 232, 230)"} in cells
    assert any(c["text"] == "better (untested)" and c["background"] == "rgb(230, 244, 234)" for c in cells)
    page.locator("#summary").screenshot(path=str(SCREENSHOT.with_name("iolab-report-test-summary.png")))


def test_hostile_names_are_text_and_run_nothing(page_of):
    loaded = page_of()
    page = loaded.page
    body = page.inner_text("body")
    assert EVIL_TARGET in body and EVIL_LABEL in body and "<img src=z onerror=alert(4)>" not in body  # in <details>
    assert page.eval_on_selector_all("img", "imgs => imgs.length") == 0
    assert page.evaluate("document.querySelectorAll('b, i').length") == 0
    page.evaluate("document.querySelectorAll('#jobs details').forEach(d => d.open = true)")
    assert "<img src=z onerror=alert(4)>" in page.inner_text("#jobs")
    # hover every bar: the tooltips show the subject's name, as text
    bars = page.locator("#chart-iops-bars g.mark-rect path")
    for i in range(bars.count()):
        bars.nth(i).hover(force=True)  # a short bar may lie under its repetition dot
        page.wait_for_timeout(50)
    tooltip = page.locator("#vg-tooltip-element")
    assert tooltip.count() == 1 and "IOPS" in tooltip.inner_text()
    page.locator("#chart-iops-bars g.mark-rect path").first.hover()
    page.wait_for_timeout(100)
    assert EVIL_TARGET in tooltip.inner_text() and tooltip.locator("img").count() == 0
    assert loaded.dialogs == [] and loaded.problems == []
