"""fio JSON (json, json+, client/server, status streams) from real outputs, and corner cases."""

from __future__ import annotations

import json

import pytest

from iolab.errors import ParseError
from iolab.fio import parse_output
from iolab.fio.json import iter_documents, looks_like_json, parse_json
from iolab.fio.jsonjob import plat_idx_to_val
from paths import FIO as DATA


def read(name: str) -> str:
    return (DATA / name).read_text()


def load(name: str):
    return parse_output(read(name), name)


def test_fio333_json_exact_values():
    report = load("fio-3.33_randrw_libaio.json")
    assert (report.source_format, report.fio_version, report.timestamp_ms) == ("json", "3.33", 1795275930403)
    assert report.global_options["ioengine"] == "libaio"
    r = report.jobs[0].directions["read"]
    assert (r.total_ios, r.io_bytes, r.runtime_ms) == (213160, 873103360, 3001)
    assert r.iops == 213160 * 1000 / 3001 and r.bw_bytes_s == 873103360 * 1000 / 3001
    assert (r.clat.min_ns, r.clat.samples, r.clat.percentile(1)) == (17011, 213160, 94720)
    assert r.bw_samples.mean == 283868.8 * 1024 and r.iops_samples.samples == 5


def test_jsonplus_bins_sum_to_samples():
    report = load("fio-3.33_randrw_libaio.jsonplus.json")
    assert report.source_format == "json+"
    clat = report.jobs[0].directions["read"].clat
    assert sum(clat.bins_ns.values()) == clat.samples == 206706


def test_fio228_json_kib_and_microseconds_and_padding_keys():
    r = load("fio-2.2.8_randrw_posixaio.json").jobs[0].directions["read"]
    assert r.io_bytes == 51499 * 4096  # printed in KiB under the name io_bytes
    assert r.clat.min_ns == 36_000  # "clat": {"min": 36} is microseconds
    assert "0" not in r.clat.percentiles_ns and len(r.clat.percentiles_ns) == 17  # "0.00": 0 padding


def test_status_interval_stream_uses_the_last_document():
    (job,) = load("fio-3.33_status-interval-1s_stream.json").jobs
    r = job.directions["read"]
    assert (r.total_ios, r.runtime_ms) == (367595, 4001) and r.iops == 367595 * 1000 / 4001


def test_truncated_stream_falls_back_to_the_previous_report_with_warning():
    text = read("fio-3.33_status-interval-1s_stream.json")
    cut = text[: text.rindex('"fio version"') + 40]
    report = parse_json(cut, "cut.json")
    assert report.jobs[0].directions["read"].runtime_ms == 3896
    assert "the last JSON document is incomplete" in report.warnings[0]


def test_error_line_before_json_and_zero_runtime_gives_unknown_rate():
    report = load("fio-3.33_error_json_stdout_with_prefix_line.txt")
    (job,) = report.jobs
    r = job.directions["read"]
    assert job.error == 95 and (r.total_ios, r.runtime_ms, r.iops, r.bw_bytes_s) == (1, 0, None, None)


def test_verify_only_write_phase_has_counts_but_no_rate():
    w = load("fio-3.33_powercut_verify_phase.json").jobs[0].directions["write"]
    assert (w.total_ios, w.io_bytes, w.runtime_ms, w.iops) == (16384, 67108864, 0, None)


def test_sync_section_and_all_percentile_kinds():
    job = load("fio-3.33_psync_fsync_all_percentiles.json").jobs[0]
    sync = job.directions["sync"]
    assert sync.total_ios == 4048 and sync.lat.samples == 4048 and sync.iops is None
    w = job.directions["write"]
    assert w.lat.percentiles_ns and w.clat.percentiles_ns


def test_group_reporting_and_clones():
    assert len(load("fio-3.33_numjobs2_group_reporting.json").jobs) == 1
    clones = load("fio-3.33_numjobs2_no_group_reporting.json").jobs
    assert [(j.name, j.index, j.directions["read"].total_ios) for j in clones] == [("gr", 0, 40735),
                                                                                   ("gr", 1, 40855)]


# --- client/server -------------------------------------------------------------------------------------


def test_client_two_hosts_without_all_clients():
    report = load("fio-3.33_client_two_hosts.json")
    assert report.source_format == "client-json"
    assert [(j.hostname, j.port, j.directions["read"].total_ios) for j in report.jobs] == [
        ("127.0.0.1", 8765, 108877), ("127.0.0.1", 8766, 109527)]
    assert [(d.name, d.hostname) for d in report.disk_util] == [("vda", "127.0.0.1"), ("vda", "127.0.0.1")]
    assert any("global options" in w for w in report.warnings)


def test_client_single_host_with_text_before_json():
    (job,) = load("fio-3.33_client_single_host.json").jobs
    assert (job.hostname, job.port, job.directions["read"].total_ios) == ("127.0.0.1", 8765, 192690)


def test_client_status_interval_keeps_only_the_final_snapshot():
    report = load("fio-3.33_client_status-interval-remote_stdout.txt")
    (job,) = report.jobs  # four entries in client_stats: runtimes 896, 1896, 2895, 3001
    r = job.directions["read"]
    assert (r.total_ios, r.runtime_ms) == (279317, 3001)
    assert r.iops == 279317 * 1000 / 3001 == pytest.approx(93074.64, abs=0.01)  # not the 375k sum
    assert job.job_options == {"rw": "randread", "iodepth": "8", "filename": "/data/fio/cs_file1"}
    assert len(report.disk_util) == 1
    assert any("4 --status-interval reports for 127.0.0.1:8765" in w for w in report.warnings)


def _client_doc(entries, disks=(), global_options=None):
    doc = {"fio version": "fio-3.33", "timestamp": 1, "client_stats": entries, "disk_util": list(disks)}
    if global_options is not None:
        doc["global options"] = global_options
    return json.dumps(doc)


def _entry(name, runtime, total, host="h", port=8765, options='{"rw": "read"}'):
    return {"jobname": name, "groupid": 0, "error": 0, "hostname": host, "port": port,
            "job options": json.loads(options) if isinstance(options, str) else options,
            "read": {"io_bytes": total * 4096, "io_kbytes": total * 4, "runtime": runtime, "total_ios": total}}


def test_client_numjobs_clones_are_never_collapsed():
    # the second clone ran as long and did more: without a sign of several reports both stay
    entries = [_entry("c", 2000, 100), _entry("c", 2001, 120)]
    report = parse_json(_client_doc(entries, [{"name": "vda", "hostname": "h", "port": 8765}]))
    assert [j.directions["read"].total_ios for j in report.jobs] == [100, 120] and report.warnings == ()


def test_client_snapshots_recognised_from_repeated_job_options_without_disks():
    text = _client_doc([_entry("c", 1000, 10), _entry("c", 2000, 20)])
    second = text.rindex('"job options": {"rw": "read"}')
    text = text[:second] + '"job options": {"rw": "read", "rw": "read"}' + text[second + 29:]
    report = parse_json(text)
    assert [j.directions["read"].total_ios for j in report.jobs] == [20]


def test_client_clones_with_an_option_set_twice_are_kept():
    twice = '"job options": {"rw": "read", "rw": "read"}'
    text = _client_doc([_entry("c", 2000, 100), _entry("c", 2001, 120)]).replace('"job options": {"rw": "read"}',
                                                                                   twice)
    assert [j.directions["read"].total_ios for j in parse_json(text).jobs] == [100, 120]


def test_client_snapshots_of_two_hosts_with_two_clones_each():
    entries = [_entry("c", rt, t + k, host=h) for rt, t in ((1000, 10), (2000, 20))
               for h in ("a",) for k in (0, 1)]
    entries += [_entry("c", rt, t + k, host=h) for rt, t in ((1000, 10), (2000, 20))
                for h in ("b",) for k in (0, 1)]
    disks = [{"name": "vda", "hostname": h, "port": 8765} for h in ("a", "b") for _ in range(2)]
    report = parse_json(_client_doc(entries, disks))
    assert [(j.hostname, j.directions["read"].total_ios) for j in report.jobs] == [
        ("a", 20), ("a", 21), ("b", 20), ("b", 21)]
    assert len(report.disk_util) == 2


def test_client_evidence_that_does_not_repeat_keeps_everything_with_warning():
    entries = [_entry("c", 2000, 100), _entry("c", 1000, 120)]  # runtime goes down: not snapshots
    report = parse_json(_client_doc(entries, [{"name": "vda", "hostname": "h", "port": 8765}] * 2))
    assert len(report.jobs) == 2 and "all are kept" in report.warnings[0]


def test_fio339_global_options_array_per_server():
    opts = [{"ioengine": "libaio", "hostname": "a", "port": 8765}, {"ioengine": "libaio", "hostname": "b"}]
    report = parse_json(_client_doc([_entry("c", 1000, 10)], global_options=opts))
    assert report.global_options == {"ioengine": "libaio"}


def test_control_characters_in_strings_are_accepted():
    text = read("fio-3.33_randrw_libaio.json").replace('"jobname" : "randrw"', '"jobname" : "rand\trw\x01"')
    assert parse_json(text).jobs[0].name == "rand\trw\x01"


# --- errors and the public helpers -------------------------------------------------------------------


def test_invalid_json_is_a_parse_error_naming_input_and_line():
    text = read("fio-3.33_randrw_libaio.json")
    line = text[:400].count("\n") + 1
    with pytest.raises(ParseError, match=rf"^r\.json, line {line}, column \d+: invalid JSON"):
        parse_json(text[:400], "r.json")


def test_no_report_object_is_a_parse_error():
    with pytest.raises(ParseError, match=r"^x: no fio JSON report found"):
        parse_json('{"fio version": "fio-3.33"}', "x")


def test_wrong_shape_is_a_parse_error_naming_the_key():
    with pytest.raises(ParseError, match=r"^x: jobs\[0\]\.read\.total_ios = 'many': must be a whole number"):
        parse_json('{"fio version": "fio-3.33", "jobs": [{"read": {"total_ios": "many"}}]}', "x")
    with pytest.raises(ParseError, match=r"^x: jobs\[0\]: unexpected fio JSON shape: KeyError"):
        parse_json('{"fio version": "fio-3.33", "jobs": [{"read": {"total_ios": 1, "clat_ns": {"N": 1, '
                   '"bins": {"FIO_IO_U_PLAT_BITS": 6}}}}]}', "x")


def test_deep_nesting_is_a_parse_error():
    with pytest.raises(ParseError, match="nested too deeply"):
        parse_json('{"a":' + "[" * 100000, "x")


def test_public_helpers():
    docs = list(iter_documents('noise\n{"a": 1}\n{"b": 2}\n'))
    assert docs == [{"a": 1}, {"b": 2}]
    assert looks_like_json(read("fio-3.33_client_single_host.json"))
    assert not looks_like_json(read("fio-3.33_randrw_libaio.normal.txt"))
    assert [plat_idx_to_val(i) for i in (0, 127, 128, 1855)] == [0, 127, 129, 17112760320]
