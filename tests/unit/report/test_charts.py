"""Charts that do not flatter: the panels of one metric share a y scale (unless asked), sweep and
saturation charts use the card's width, latency axes label µs, ms or s as the value needs, time
axes s, min or h as the run's length needs. The specs are checked here; the rendered pages are
looked at in Chromium and Firefox (test_report_browser, and the screenshots in the issue's notes)."""

from __future__ import annotations

import json

from iolab.report import charts


def _bars(rows):
    return charts.bars(rows, ["fast", "slow"], ["a", "b"], "iops", "IOPS", ",.0f")


ROWS = [{"subject": s, "category": c, "repeat": 0, "iops": v, "mib_s": v / 256}
        for s, c, v in (("fast", "a", 124_723.0), ("slow", "a", 2_000.0), ("fast", "b", 311_675.0),
                        ("slow", "b", 3_000.0))]


def test_panels_of_one_metric_share_the_y_scale_unless_asked():
    assert _bars(ROWS)["resolve"]["scale"]["y"] == "shared"  # 124k and 311k bars are drawn to one scale
    with charts.y_scales(independent=True):
        assert _bars(ROWS)["resolve"]["scale"]["y"] == "independent"
    assert _bars(ROWS)["resolve"]["scale"]["y"] == "shared"  # only inside the block


def test_sweep_and_search_charts_use_the_card_width():
    assert charts.panel_size(4, wide=False) == (charts.PANEL_WIDTH, charts.PANEL_HEIGHT)
    width, height = charts.panel_size(1, wide=True)
    assert width == charts.CARD_WIDTH - 70 and width > 4 * charts.PANEL_WIDTH and height > charts.PANEL_HEIGHT
    assert charts.panel_size(2, wide=True)[0] * 2 <= charts.CARD_WIDTH < charts.panel_size(2, wide=True)[0] * 3
    assert charts.panel_size(9, wide=True)[0] == charts.PANEL_WIDTH  # four a row: no room to widen
    rows = [{"subject": "dev", "point": f"QD{d} ×1", "role": "chosen" if d == 16 else "probe", "numjobs": 1,
             "iodepth": d, "iops": 1000.0 * d, "lat_us": 50.0 * d, "slo_us": 2000.0, "metric": "clat p99"}
            for d in (1, 4, 16)]
    spec = charts.search_chart(rows)
    assert spec["spec"]["width"] == charts.CARD_WIDTH - 70
    assert spec["spec"]["layer"][0]["encoding"]["y"]["axis"]["labelExpr"] == charts.LATENCY_LABELS


def test_latency_and_time_axes_pick_readable_units():
    pct = [{"subject": "fast", "category": "a", "repeat": 0, "pct": "p99", "lat_us": 100_000.0}]
    spec = charts.percentiles(pct, ["p99"], ["fast"], ["a"])
    y = spec["spec"]["encoding"]["y"]
    assert y["axis"]["labelExpr"] == charts.LATENCY_LABELS and "µs" not in y["title"]  # 100,000 µs reads 100 ms
    assert "/ 1e3, '~g') + ' ms'" in charts.LATENCY_LABELS and "/ 1e6, '~g') + ' s'" in charts.LATENCY_LABELS
    assert charts.time_axis(60) == ("time (s)", "format(datum.value, '~g')")
    assert charts.time_axis(3600)[0] == "time (min)" and charts.time_axis(36_000)[0] == "time (h)"
    ts = [{"subject": "fast", "category": "a", "repeat": 0, "t_s": float(t), "iops": 1.0, "mib_s": 1.0,
           "lat_us": 90_000.0} for t in range(0, 1800, 60)]
    spec = charts.timeseries(ts, ["fast"], ["a"], "lat_us", "clat", ",.1f", log=True)
    x, y = spec["spec"]["encoding"]["x"], spec["spec"]["encoding"]["y"]
    assert x["title"] == "time (min)" and x["axis"]["labelExpr"] == "format(datum.value / 60, '~g')"
    assert y["axis"]["labelExpr"] == charts.LATENCY_LABELS


def test_every_chart_group_has_its_own_report_section_id():
    """A group missing from GROUP_IDS would get the fallback id ``charts``, shared with every other
    such group: two sections with one id, and the navigation link reaches only the first."""
    import re
    from pathlib import Path

    from iolab.report import html
    source = Path(html.__file__).parent
    groups = {m for path in source.glob("*.py")
              for m in re.findall(r'Chart\(\s*[^,()]+,\s*[^,()]+,\s*"([^"]+)"', path.read_text())}
    assert {"Throughput", "Latency", "Warm-up", "Captured workload"} <= groups
    assert groups <= set(html.GROUP_IDS), groups - set(html.GROUP_IDS)
    ids = list(html.GROUP_IDS.values())
    assert len(ids) == len(set(ids)) and "charts" not in ids


def test_a_report_outside_the_tests_makes_the_charts_the_checked_ones_are(monkeypatch):
    """Outside the tests altair checks nothing as it builds (``charts.CHECKED`` off, altair's debug mode
    off, as importing ``charts`` without ``IOLAB_CHECK_CHARTS`` leaves them): the specs must be the ones
    the tests check, byte for byte (a faceted bar chart, a capture's block sizes and heat). The same in
    fresh processes: tests/integration/test_charts.py."""
    import altair as alt

    from iolab.report.capture import _bs_spec, _heat_spec
    from iolab.workflows.capture import fingerprint, trace

    def made() -> str:
        fp = fingerprint.fingerprint(trace.from_rows([(i * 1000, i * 1000 + 50, i * 64, (4096, 65536)[i % 2], i % 2,
                                                       0, 1) for i in range(500)]))
        return json.dumps([charts.bars(ROWS, ["fast", "slow"], ["a", "b"], "iops", "IOPS", ",.0f"),
                           _bs_spec(fp, "cap"), _heat_spec(fp, "cap")], sort_keys=True)

    out = {}
    for checked in (True, False):
        monkeypatch.setattr(charts, "CHECKED", checked)
        with alt.utils.schemapi.debug_mode(checked):
            out[checked] = made()
    assert out[True] == out[False] and len(out[True]) > 1000
