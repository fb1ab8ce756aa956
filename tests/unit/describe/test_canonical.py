"""Canonical fio options: spellings, defaults, unknowns and the differences that block a comparison."""

from __future__ import annotations

import pytest

from iolab.describe.canonical import NOT_SET, Options, canonical, default_ioengine, differences, normalise


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("bs", "4k", "4k"), ("bs", "4096", "4k"), ("bs", "4K", "4k"), ("bs", "4kb", "4k"),
    ("bs", "8k,32k", "8k,32k,32k"), ("bs", "8k,32k,", "8k,32k,4k"), ("bs", ",8k", "4k,8k,8k"),
    ("bs", "4k,4k,4k", "4k"), ("size", "2048m", "2g"), ("size", "1.5g", "1536m"), ("size", "50%", "50%"),
    ("size", "1000", "1000"), ("runtime", "60", "60s"), ("runtime", "1m", "60s"), ("ramp_time", "500ms", "0.5s"),
    ("time_based", None, "1"), ("time_based", "1", "1"), ("direct", "true", "1"), ("direct", "off", "0"),
    ("iodepth", "032", "32"), ("rw", "readwrite", "rw"), ("rw", "RandRead", "randread"),
    ("rw", "randread:8", "randread:8"), ("ioengine", "libaio", "libaio"),
    ("bs", "4x", "4x"),  # unreadable: kept, so it still equals itself
])
def test_normalise(key, value, expected):
    assert normalise(key, value) == expected


def test_kb_base_1000_changes_sizes():
    assert canonical({"bs": "4k", "kb_base": "1000"}, ()).values["bs"] == "4000"


def test_aliases_mix_and_buffered():
    opts = canonical({"readwrite": "randrw", "blocksize": "4096", "rwmixwrite": "30", "buffered": "0",
                      "timeout": "10", "filename": "/dev/sdb", "write_iops_log": "x"}, ())
    assert opts.values["rw"] == "randrw" and opts.values["bs"] == "4k" and opts.values["rwmixread"] == "70"
    assert opts.values["direct"] == "1" and opts.values["runtime"] == "10s"
    assert "filename" not in opts.values and "write_iops_log" not in opts.values  # not the workload


def test_defaults_fill_a_complete_source_only():
    complete = canonical({"rw": "randread"}, (), "3.33")
    assert {k: complete.values[k] for k in ("bs", "iodepth", "numjobs", "direct", "time_based", "ioengine")} == {
        "bs": "4k", "iodepth": "1", "numjobs": "1", "direct": "0", "time_based": "0", "ioengine": "psync"}
    assert "rwmixread" not in complete.values  # only matters for rw/randrw
    assert complete.get("size") is None  # fio's default size is the file's or the device's: unknown
    assert complete.get("randrepeat") == "1" and complete.get("verify_backlog") == NOT_SET
    assert canonical({}, (), "2.2.8").values["ioengine"] == "sync" and default_ioengine(None) is None
    assert default_ioengine("3.35-18-g1c2d3e4") == "psync" and default_ioengine("2.9-dirty") == "sync"
    partial = canonical({"rw": "randread"}, ("time_based",), "3.33")
    assert partial.get("time_based") is None and partial.get("iodepth") == "1"
    everything = canonical({"iodepth": "32"}, None)
    assert everything.get("iodepth") == "32" and everything.get("bs") is None and everything.get("rw") is None


def test_differences_block_soft_ignored_and_unchecked():
    a = canonical({"rw": "randread", "bs": "4k", "runtime": "30", "time_based": None, "size": "1g"}, ())
    b = canonical({"rw": "randread", "bs": "8k", "runtime": "60", "time_based": "1", "size": "1024m"}, ())
    found, unchecked = differences(a, b)
    assert [(d.option, d.a, d.b, d.effect) for d in found] == [("bs", "4k", "8k", "blocking"),
                                                                ("runtime", "30s", "60s", "soft")]
    assert unchecked == ["ioengine"]  # no fio version: the default engine is unknown
    found, _ = differences(a, b, ignore=["blocksize"])
    assert found[0].effect == "ignored"
    seed = canonical({"iodepth": "32", "size": "2048m", "numjobs": "4"}, None)
    found, unchecked = differences(seed, seed)
    assert found == [] and unchecked == ["bs", "direct", "ioengine", "rw", "time_based"]


def test_time_based_run_never_pairs_with_a_size_bound_one():
    found, _ = differences(canonical({"time_based": "1"}, ()), canonical({}, ()))
    assert [(d.option, d.effect) for d in found] == [("time_based", "blocking")]


def test_options_key_distinguishes_knowledge():
    assert Options({"a": "1"}, None).key != Options({"a": "1"}, frozenset()).key
