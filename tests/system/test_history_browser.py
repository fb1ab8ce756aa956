"""The history page (``iolab report --history``) in real browsers, Chromium and Firefox ESR as the report
tests use them (tests/support/browsers.py): offline, every series' chart drawn with its points, segment
means and change markers labelled with what changed; hostile names shown as text. (The page's data as
HTML: tests/cli/test_history_page.py.)"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import browsers
import historypage
from clirun import iolab
from historypage import EVIL

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page_path(tmp_path_factory) -> Path:
    """The history page of 30 imported runs (``historypage``)."""
    return historypage.make(tmp_path_factory.mktemp("history-page"), iolab)


@pytest.fixture(scope="module", params=sorted(browsers.BROWSERS))
def browser(request) -> Iterator:  # type: ignore[type-arg]
    with browsers.BROWSERS[request.param]() as open_:
        yield request.param, open_


CHARTS = """Array.from(document.querySelectorAll('figure[data-chart]')).map(f => ({
    name: f.dataset.chart, rendered: f.dataset.rendered,
    points: f.querySelectorAll('svg g.mark-symbol.role-mark path').length,
    rules: f.querySelectorAll('svg g.mark-rule.role-mark line').length,
    labels: Array.from(f.querySelectorAll('svg g.mark-text.role-mark text')).map(t => t.textContent)}))"""


def test_every_series_is_drawn_with_its_change_marked(browser, page_path, tmp_path):
    name, open_ = browser
    page = open_(page_path)
    browsers.wait_for_charts(page)
    charts = page.evaluate(CHARTS)
    assert [c["name"] for c in charts] == ["history-1", "history-2", "history-3", "history-4"]
    assert all(c["rendered"] == "yes" and c["points"] == 30 for c in charts), (name, charts)
    captions = page.evaluate("Array.from(document.querySelectorAll('figure[data-chart] figcaption'))"
                             ".map(f => f.textContent)")
    assert sorted(captions) == ["30 runs, 0 change point(s)", "30 runs, 0 change point(s)",
                                "30 runs, 1 change point(s)", "30 runs, 1 change point(s)"]
    for caption, chart in zip(captions, charts, strict=True):
        changed = caption.endswith("1 change point(s)")
        assert chart["rules"] == (1 + 2 if changed else 1), (name, chart)  # a mean per segment, a change marker
        if changed:
            (label,) = chart["labels"]
            assert label.startswith("run 21: ") and "fio version 3.33 → 3.36" in label, (name, label)
    assert page.evaluate("performance.getEntriesByType('resource').map(e => e.name)") == []  # nothing fetched
    assert page.evaluate("document.querySelectorAll('img').length") == 0  # the hostile tag stayed text
    summary = page.evaluate("document.querySelector('#summary').textContent")
    assert EVIL in summary and "change points" in summary
    shot = tmp_path / f"iolab-history-test-{name}.png"  # this test's own, whatever else runs
    page.screenshot(shot)
    assert shot.stat().st_size > 50_000
    kept = browsers.SCREENSHOTS / f".{shot.name}.{os.getpid()}"  # for people to look at, replaced whole
    shutil.copyfile(shot, kept)
    os.replace(kept, browsers.SCREENSHOTS / shot.name)
