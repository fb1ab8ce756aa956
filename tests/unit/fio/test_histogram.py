"""json+ histograms (histogram.Histogram): kept with fio's text keys, read as bucket ns -> count, stored unchanged."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzing import edit
from iolab.errors import ParseError
from iolab.fio import parse_json, parse_output
from iolab.fio.merge import merge_latency, percentiles_from_bins
from iolab.histogram import Histogram
from iolab.model import FioReport, Latency, from_jsonable, to_json_text, to_jsonable
from paths import FIO as DATA

JSONPLUS = (DATA / "fio-3.33_randrw_libaio.jsonplus.json").read_text()
FIO_BINS = json.loads(JSONPLUS)["jobs"][0]["read"]["clat_ns"]["bins"]


def test_fio_bins_are_kept_as_text_and_read_as_ints():
    histogram = Histogram.from_text_keys(FIO_BINS)
    expected = {int(k): v for k, v in FIO_BINS.items()}
    assert histogram is not None and histogram == expected and expected == histogram
    assert dict(histogram.items()) == expected and list(histogram) == list(expected)
    assert len(histogram) == len(expected) and sum(histogram.values()) == sum(expected.values())
    first = next(iter(expected))
    assert histogram[first] == expected[first] and first in histogram and str(first) not in histogram
    assert histogram.jsonable() is FIO_BINS  # stored as fio wrote it, not converted back
    assert Histogram(expected) == histogram and Histogram(expected).jsonable() == FIO_BINS
    assert Histogram({1: 2}) != histogram and histogram != {first: -1}
    with pytest.raises(TypeError):
        hash(histogram)
    with pytest.raises(TypeError):
        histogram[first] = 1  # type: ignore[index]


@pytest.mark.parametrize("bins", [
    {"01": 1}, {"0": 1, "01": 2}, {"": 1}, {"1": 1, "": 1}, {"1,2": 3}, {"1,": 3}, {",1": 2}, {"-1": 1}, {" 1": 1},
    {"1.5": 1}, {"²": 1}, {"١": 1}, {"1": 0}, {"1": -3, "2": 5}, {"1": 1.0}, {"1": "x"}, {"1": None}, {"1": [1]},
])
def test_anything_but_canonical_keys_and_positive_int_counts_is_refused(bins):
    assert Histogram.from_text_keys(bins) is None


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(alphabet="0123456789,-+ .e²", max_size=6),
                       st.integers(-3, 10**12) | st.floats(allow_nan=False) | st.booleans() | st.none(), max_size=12))
def test_kept_text_keys_are_exactly_the_canonical_ones(bins):
    histogram = Histogram.from_text_keys(bins)
    canonical = all(k.isdecimal() and k.isascii() and str(int(k)) == k for k in bins) and all(
        isinstance(v, int) and v > 0 for v in bins.values())
    assert (histogram is not None) == canonical
    if histogram is not None:
        assert histogram == {int(k): v for k, v in bins.items()}


def test_stored_form_round_trips_and_is_unchanged():
    report = parse_json(JSONPLUS)
    clat = report.jobs[0].directions["read"].clat
    assert isinstance(clat.bins_ns, Histogram)
    stored = to_jsonable(report)
    assert stored["jobs"][0]["directions"]["read"]["clat"]["bins_ns"] == FIO_BINS
    assert json.loads(to_json_text(report)) == stored
    again = from_jsonable(FioReport, stored)
    assert again == report and isinstance(again.jobs[0].directions["read"].clat.bins_ns, Histogram)
    # untyped containers (the JSON run document serialises lists of jobs) serialise element by element
    assert to_jsonable(list(report.jobs)) == stored["jobs"]
    # a store written with int keys reads back the same
    assert from_jsonable(Latency, {"bins_ns": {1000: 2, 2000: 3}}).bins_ns == {1000: 2, 2000: 3}


def test_merge_and_percentiles_read_text_histograms():
    report = parse_json(JSONPLUS)
    read, write = (report.jobs[0].directions[d].clat for d in ("read", "write"))
    as_dicts = [Latency(samples=c.samples, mean_ns=c.mean_ns, percentiles_ns=c.percentiles_ns,
                        bins_ns=Histogram(dict(c.bins_ns.items()))) for c in (read, write)]
    merged, from_dicts = merge_latency([read, write]), merge_latency(as_dicts)
    assert isinstance(merged.bins_ns, Histogram)
    assert merged.bins_ns == from_dicts.bins_ns and merged.percentiles_ns == from_dicts.percentiles_ns
    assert sum(merged.bins_ns.values()) == read.samples + write.samples
    assert percentiles_from_bins(read.bins_ns, ["99"]) == {"99": read.percentile(99)}


JSONPLUS_ALPHABET = st.sampled_from([*'0123456789,:{}"-. \n', "true", "1.5", "-1", "01"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.floats(0, 1), st.integers(0, 2), JSONPLUS_ALPHABET), min_size=1, max_size=6))
def test_damaged_jsonplus_histograms_are_valid_or_a_parse_error(edits):
    """Whatever a damaged json+ output holds, an imported histogram reads and stores without surprise."""
    start = JSONPLUS.index('"bins"')
    damaged = edit(JSONPLUS[start:start + 3000], edits)
    try:
        report = parse_output(JSONPLUS[:start] + damaged + JSONPLUS[start + 3000:], "prop")
    except ParseError:
        return
    for job in report.jobs:
        for d in job.directions.values():
            for lat in (d.slat, d.clat, d.lat):
                if lat is not None and lat.bins_ns is not None:
                    assert all(isinstance(k, int) for k in lat.bins_ns)
                    assert all(isinstance(v, int) and v > 0 for v in lat.bins_ns.values())
    assert from_jsonable(FioReport, json.loads(to_json_text(report))) == report
