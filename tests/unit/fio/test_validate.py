"""The physical limits of a fio report (fio/validate.py): every real output passes, each rule refuses
what breaks it, and the error names the file, the place (line or JSON key), the value and the rule."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from iolab.errors import ParseError
from iolab.fio import parse_output, validate
from iolab.fio.validate import Violation, check_report, fixed_block_size
from iolab.histogram import Histogram
from iolab.model import FioReport
from paths import FIO as DATA
from paths import SHARED_SAMPLES

OUTPUTS = sorted(p for p in DATA.glob("*") if p.suffix in (".json", ".txt") and not p.name.startswith("num2str"))


def read(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize("path", OUTPUTS + sorted(SHARED_SAMPLES.glob("*.txt")), ids=lambda p: p.name)
def test_every_real_output_passes(path):
    report = parse_output(path.read_text(errors="replace"), path.name)
    check_report(report)  # the parsers applied it; the rules hold for what they return


def test_every_shared_sample_that_is_fio_output_passes():
    samples = [p for p in sorted((SHARED_SAMPLES / "fio").glob("*")) if p.suffix in (".json", ".txt")]
    samples = samples or OUTPUTS  # a checkout without the lab's shared samples: tests/data/fio holds copies
    assert samples
    not_output = {p.name for p in (DATA / "not-output").iterdir()}
    for path in samples:
        if path.name not in not_output:
            parse_output(path.read_text(), path.name)


# --- each rule, on a real report with one value changed ----------------------------------------------------


@pytest.fixture(scope="module")
def base() -> FioReport:
    return parse_output(read("fio-3.33_randrw_libaio.jsonplus.json"))


def changed(report: FioReport, direction: str = "read", **values) -> FioReport:
    job = report.jobs[0]
    d = replace(job.directions[direction], **values)
    return replace(report, jobs=(replace(job, directions={**job.directions, direction: d}),))


def changed_clat(report: FioReport, **values) -> FioReport:
    return changed(report, clat=replace(report.jobs[0].directions["read"].clat, **values))


def changed_job(report: FioReport, **values) -> FioReport:
    return replace(report, jobs=(replace(report.jobs[0], **values),))


CASES = {
    "negative IOPS": (lambda r: changed(r, iops=-1.0), "jobs[0].read.iops", "cannot be negative"),
    "NaN mean": (lambda r: changed_clat(r, mean_ns=math.nan), "jobs[0].read.clat.mean_ns", "finite"),
    "infinite percentile": (lambda r: changed_clat(r, percentiles_ns={"50": math.inf}),
                            "jobs[0].read.clat.percentiles_ns.50", "finite"),
    "decreasing percentiles": (lambda r: changed_clat(r, percentiles_ns={"50": 200.0, "99": 100.0}),
                               "jobs[0].read.clat.percentiles_ns.99", "percentiles cannot decrease: p50 is 200.0"),
    "percentile key": (lambda r: changed_clat(r, percentiles_ns={"150": 1.0}), "jobs[0].read.clat.percentiles_ns.150",
                       "(0, 100]"),
    "min above max": (lambda r: changed_clat(r, min_ns=9e9), "jobs[0].read.clat.min_ns", "cannot exceed the maximum"),
    "mean outside": (lambda r: changed_clat(r, mean_ns=9e9), "jobs[0].read.clat.mean_ns", "must lie between"),
    "a rate without time": (lambda r: changed(r, runtime_ms=0), "jobs[0].read.iops", "needs a runtime > 0"),
    "IOPS against totals": (lambda r: changed(r, iops=1.0), "jobs[0].read.iops", "1000 × total_ios (206706)"),
    "bandwidth against bytes": (lambda r: changed(r, bw_bytes_s=1.0), "jobs[0].read.bw_bytes_s", "1000 × io_bytes"),
    "bytes against I/Os × bs": (lambda r: changed(r, io_bytes=10**9, bw_bytes_s=1e12 / 3001),
                                "jobs[0].read.io_bytes", "total_ios × bs = 206706 × 4096"),
    "a count beyond 64 bits": (lambda r: changed(r, short_ios=2**64), "jobs[0].read.short_ios", "2^64-1"),
    "a bool as a count": (lambda r: changed(r, drop_ios=True), "jobs[0].read.drop_ios", "whole number"),
    "text as a number": (lambda r: changed_job(r, usr_cpu_pct="5"), "jobs[0].usr_cpu_pct", "must be a number"),
    "a share unknown": (lambda r: changed_job(r, iodepth_level_pct={"1": None}), "jobs[0].iodepth_level_pct.1",
                        "must be a number"),
    "a percentile unknown": (lambda r: changed_clat(r, percentiles_ns={"50": None}),
                             "jobs[0].read.clat.percentiles_ns.50", "must be a number"),
    "timestamp": (lambda r: replace(r, timestamp_ms=10**17), "timestamp_ms", "1970-9999"),
    "NUL in a name": (lambda r: changed_job(r, name="a\x00b"), "jobs[0].name", "NUL"),
    "lone surrogate": (lambda r: replace(r, global_options={"bs": "\udcff"}), "global_options.bs", "surrogate"),
    "port": (lambda r: changed_job(r, port=70000), "jobs[0].port", "0-65535"),
    "not a histogram": (lambda r: changed_clat(r, bins_ns={1: 2}), "jobs[0].read.clat.bins_ns", "a histogram"),
    "steadystate not an object": (lambda r: changed_job(r, steadystate=[1]), "jobs[0].steadystate", "JSON object"),
    "steadystate too deep": (lambda r: changed_job(r, steadystate={"a": {"b": {"c": {"d": {"e": [1]}}}}}),
                             "jobs[0].steadystate.a.b.c.d", "nested more than 4"),
    "steadystate NaN": (lambda r: changed_job(r, steadystate={"data": {"iops": [1.0, math.nan]}}),
                        "jobs[0].steadystate.data.iops[1]", "finite"),
    "steadystate tuple": (lambda r: changed_job(r, steadystate={"data": (1, 2)}), "jobs[0].steadystate.data",
                          "JSON value"),
    "negative disk ticks": (lambda r: replace(r, disk_util=(replace(r.disk_util[0], read_ticks_ms=-1),)),
                            "disk_util[0].read_ticks_ms", "cannot be negative"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_each_rule_refuses_what_breaks_it(base, case):
    breaking, place, rule = CASES[case]
    with pytest.raises(Violation) as caught:
        check_report(breaking(base))
    assert validate.format_place(caught.value.place).startswith(place) and rule in caught.value.rule, caught.value


@pytest.mark.parametrize("counts", [{-5: 1}, {10**19: 1}, {5: 0}, {5: 2**63, 6: 2**63}])
def test_a_histogram_holds_only_what_fio_prints(counts):
    with pytest.raises(ValueError, match="not a histogram of fio's"):
        Histogram(counts)
    assert Histogram.from_text_keys({str(k): v for k, v in counts.items()}) is None


@pytest.mark.parametrize("keys", [{"940x": 1}, {"x": 1}, {"1\x00": 1}, {"-5": 1}, {"05": 1}, {"1 ": 1}, {"": 1}])
def test_histogram_text_keys_are_digits_only(keys):
    assert Histogram.from_text_keys(keys) is None
    assert Histogram.from_text_keys({"940": 1, "1024": 2}) == Histogram({940: 1, 1024: 2})


def test_keys_from_the_input_reach_messages_printable():
    violation = Violation(("jobs", 0, "a\x00b", "\x1b[31m", "k" * 100), 1, "rule")
    assert str(violation) == "jobs[0].'a\\x00b'.'\\x1b[31m'.'" + "k" * 19 + "…" + "k" * 19 + "' = 1: rule"


def test_io_with_runtime_0_has_no_rate_and_passes():
    """A verify_only phase reports its planned writes with runtime 0 (FIO_NOTES §5.3)."""
    report = parse_output(read("fio-3.33_powercut_verify_phase.json"))
    write = report.jobs[0].directions["write"]
    assert (write.total_ios, write.runtime_ms, write.iops, write.bw_bytes_s) == (16384, 0, None, None)


def test_block_size_rule_only_where_one_block_size_is_certain(base):
    assert fixed_block_size({"bs": "4k"}) == 4096 == fixed_block_size({"bs": "4k,4k", "ioengine": "libaio"})
    for options in ({"bs": "4k,64k"}, {"bs": "4k", "bssplit": "4k/50:64k/50"}, {"bs": "4k", "ioengine": "net"},
                    {"bs": "4k-64k"}, {"bs": "4k", "kb_base": "1000"}, {}):
        assert fixed_block_size(options) is None, options
    # a group (job_runtime sums its members') may mix block sizes: not checked
    group = changed_job(changed(base, io_bytes=10**9, bw_bytes_s=1e12 / 3001), job_runtime_ms=9000)
    check_report(group)


# --- the error names the file, the place, the value and the rule --------------------------------------------


def refused(text: str, name: str) -> str:
    with pytest.raises(ParseError) as caught:
        parse_output(text, name)
    return caught.value.message


def test_json_names_fio_key_and_the_value_as_written():
    text = read("fio-3.33_randrw_libaio.json").replace('"mean" : 144298.934345', '"mean" : -144298.934345')
    assert refused(text, "x.json") == "x.json: jobs[0].read.clat_ns.mean = -144298.934345: cannot be negative"
    old = read("fio-2.2.8_randrw_posixaio.json")
    old = old.replace('"1.000000" : 314,', '"1.000000" : 9314,', 1)  # µs, read clat percentiles of fio 2.2.8
    assert refused(old, "old.json") == "old.json: jobs[0].read.clat.percentile.5.000000 = 334: percentiles cannot " \
                                       "decrease: p1 is 9314000.0"


def test_json_client_entries_are_named_by_their_place_in_the_file():
    text = read("fio-3.33_client_two_hosts.json").replace('"usr_cpu" : 6.300000', '"usr_cpu" : -6.3')  # 2nd host
    assert refused(text, "x.json") == "x.json: client_stats[1].usr_cpu = -6.3: cannot be negative"


@pytest.mark.parametrize(("mutation", "message"), [
    (lambda t: t.replace('"total_ios" : 213160', '"total_ios" : 913160'),
     "jobs[0].read.iops = 71029.656781: fio computes it as 1000 × total_ios (913160) / runtime (3001 ms)"),
    (lambda t: t.replace('"total_ios" : 213160', '"total_ios" : ' + "9" * 400),
     "jobs[0].read.total_ios = 999999999999…(400 digits): is beyond fio's 64-bit counters"),
    (lambda t: t.replace('"total_ios" : 213160', '"total_ios" : ' + "9" * 400 + ".5"),
     "jobs[0].read.total_ios = inf: must be a whole number"),
    (lambda t: t.replace('"usr_cpu" : 10.366667', '"usr_cpu" : NaN'), "jobs[0].usr_cpu = nan: must be a finite number"),
    (lambda t: t.replace('"usr_cpu" : 10.366667', '"usr_cpu" : Infinity'), "jobs[0].usr_cpu = inf"),
    (lambda t: t.replace('"16" : 99.995079', '"16" : null'), "jobs[0].iodepth_level.16 = None: must be a number"),
    (lambda t: t.replace('"usr_cpu" : 10.366667', '"usr_cpu" : "a lot"'),
     "jobs[0].usr_cpu = 'a lot': must be a number"),
    (lambda t: t.replace('"usr_cpu" : 10.366667', '"usr_cpu" : 10.366667, "usr_cpu" : -1'),
     "jobs[0].usr_cpu = -1: cannot be negative"),  # a key given twice: the last counts, as in fio's readers
    (lambda t: t.replace('"jobname" : "randrw"', '"jobname" : "randrw", "hostname" : ["h"]'),
     "jobs[0].hostname = ['h']: must be text"),
    (lambda t: t.replace('"jobname" : "randrw"', '"jobname" : "randrw", "steadystate" : ' + "[" * 50 + "]" * 50),
     "]]]]]: must be an object"),
    (lambda t: t.replace('"jobname" : "randrw"', '"jobname" : "ra\\u0000ndrw"'), "NUL"),
    (lambda t: t.replace('"jobname" : "randrw"', '"jobname" : "\\ud800"'), "surrogate"),
])
def test_damaged_json_is_refused_with_the_key(mutation, message):
    text = mutation(read("fio-3.33_randrw_libaio.json"))
    assert text != read("fio-3.33_randrw_libaio.json")
    assert message in refused(text, "x.json")


def test_normal_names_the_line():
    text = read("fio-3.33_randrw_libaio.normal.txt")
    assert refused(text.replace("avg=145.16", "avg=-145.16"), "n.txt") == \
        "n.txt, line 8: jobs[0].read.clat.mean_ns = -145160.0: cannot be negative"
    assert refused(text.replace("50.00th=[  133]", "50.00th=[ 9133]"), "n.txt").startswith(
        "n.txt, line 10: jobs[0].read.clat.percentiles_ns.60 = ")  # the heading of the percentile rows
    assert refused(text.replace("usr=8.87%", "usr=inf%"), "n.txt") == \
        "n.txt, line 33: jobs[0].usr_cpu_pct = inf: must be a finite number"


def test_terse_names_the_line():
    text = read("fio-3.33_randrw_libaio.terse-v3.txt")
    assert refused(text.replace(";2.438111;", ";-2.438111;", 1), "t.txt") == \
        "t.txt, line 1: jobs[0].read.slat.mean_ns = -2438.111: cannot be negative"
    assert "read bandwidth 303018 KiB/s contradicts 906340 KiB in 2001 ms" in refused(
        text.replace(";606340;", ";906340;", 1), "t.txt")


def test_mixed_output_with_a_damaged_json_part_reads_the_normal_part_and_says_why():
    text = read("fio-3.33_steadystate_json_plus_normal.txt").replace('"usr_cpu" : ', '"usr_cpu" : -', 1)
    report = parse_output(text, "m.txt")
    assert report.source_format == "normal"
    assert report.warnings[0].startswith("the JSON part is not used (jobs[0].usr_cpu = -")
