"""The history page (``iolab report --history``) in real browsers, Chromium and Firefox ESR as the report
tests use them (tests/browsers.py): offline, every series' chart drawn with its points, segment means and
change markers labelled with what changed; hostile names shown as text."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import browsers
import historydata
from clirun import iolab

pytestmark = pytest.mark.browser

EVIL = "<img src=x onerror=alert(1)>"
DAY = 86_400


@pytest.fixture(scope="module")
def page_path(tmp_path_factory) -> Path:
    """The history page of 30 imported runs: ``steady``, and ``slows`` 12 % slower from run 20 where fio's
    version changed and the runs carry a tag with a hostile value."""
    tmp = tmp_path_factory.mktemp("history-page")
    base = historydata.real_output(tmp / "fio")
    rng = random.Random(3)
    docs = [historydata.output(base, {"steady": (rng.gauss(1, 0.02), {}),
                                      "slows": (rng.gauss(1, 0.02) * (0.88 if i >= 20 else 1), {})},
                               1_780_000_000 + i * DAY, "fio-3.36" if i >= 20 else None) for i in range(30)]
    paths = historydata.write_runs(tmp / "out", docs)
    db = tmp / "h.db"
    assert iolab("import", *map(str, paths[:20]), db=db).returncode == 0
    done = iolab("import", *map(str, paths[20:]), "--tag", f"kernel={EVIL}", db=db)
    assert done.returncode == 0, done.stderr
    out = tmp / "history.html"
    made = iolab("report", "--history", "--metric", "iops,clat_p99", "-o", str(out), db=db)
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith(f"{out}  (HTML, 4 charts)")
    return out


@pytest.fixture(scope="module", params=sorted(browsers.BROWSERS))
def browser(request) -> Iterator:  # type: ignore[type-arg]
    with browsers.BROWSERS[request.param]() as open_:
        yield request.param, open_


CHARTS = """Array.from(document.querySelectorAll('figure[data-chart]')).map(f => ({
    name: f.dataset.chart, rendered: f.dataset.rendered,
    points: f.querySelectorAll('svg g.mark-symbol.role-mark path').length,
    rules: f.querySelectorAll('svg g.mark-rule.role-mark line').length,
    labels: Array.from(f.querySelectorAll('svg g.mark-text.role-mark text')).map(t => t.textContent)}))"""


def test_every_series_is_drawn_with_its_change_marked(browser, page_path):
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
    shot = browsers.SCREENSHOTS / f"iolab-history-test-{name}.png"
    page.screenshot(shot)
    assert shot.stat().st_size > 50_000


def test_the_page_carries_the_series_as_data(page_path):
    text = page_path.read_text()
    blocks = re.findall(r'<script type="application/json" class="vega-spec">(.*?)</script>', text, re.S)
    specs = [json.loads(block) for block in blocks]
    assert len(specs) == 4
    kinds = [sorted({row["kind"] for row in spec["data"]["values"]}) for spec in specs]
    assert kinds.count(["change", "point", "segment"]) == 2 and kinds.count(["point", "segment"]) == 2
    assert EVIL not in text  # escaped wherever it appears
