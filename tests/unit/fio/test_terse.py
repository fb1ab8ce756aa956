"""fio terse output (v2-v5, --minimal): real outputs, and layouts derived from them field by field.

Field layout: ``show_thread_status_terse_all()`` / ``show_ddir_status_terse()`` in stat.c@fio-3.33.
"""

from __future__ import annotations

import pytest

from iolab.errors import ParseError
from iolab.fio import parse_output, parse_terse
from paths import FIO as DATA

KIB = 1024.0
V3 = (DATA / "fio-3.33_randrw_libaio.terse-v3.txt").read_text().strip()
# An unused direction as fio prints it (show_ddir_status_terse with runtime 0, no samples)
EMPTY_DIR = ["0"] * 4 + ["0", "0", "0.000000", "0.000000"] * 2 + ["0%=0"] * 20 + \
    ["0", "0", "0.000000", "0.000000"] + ["0", "0", "0.000000%", "0.000000", "0.000000"]


def fields(line: str = V3) -> list[str]:
    return line.split(";")


def test_v3_exact_fields():
    report = parse_output(V3 + "\n", "v3.txt")
    assert (report.source_format, report.fio_version, report.warnings) == ("terse", "3.33", ())
    (job,) = report.jobs
    assert (job.name, job.groupid, job.error, job.members) == ("randrw", 0, 0, None)
    r, w = job.directions["read"], job.directions["write"]
    assert set(job.directions) == {"read", "write"}
    assert (r.io_bytes, r.runtime_ms, r.iops, r.total_ios) == (606340 * 1024, 2001, 75754.0, None)
    assert r.bw_bytes_s == 606340 * 1024 * 1000 / 2001
    assert (r.slat.min_ns, r.slat.max_ns) == (1000, 358_000)
    assert r.slat.mean_ns == pytest.approx(2438.111) and r.slat.stddev_ns == pytest.approx(1929.016)
    assert (r.clat.min_ns, r.clat.max_ns, r.clat.mean_ns) == (17_000, 2_779_000, pytest.approx(137580.78))
    assert r.clat.percentile(1) == 98_000 and r.clat.percentile(99.99) == 1_564_000
    assert len(r.clat.percentiles_ns) == 17  # the three "0%=0" slots are dropped
    assert (r.lat.min_ns, r.lat.max_ns, r.lat.mean_ns) == (23_000, 2_781_000, pytest.approx(140018.891))
    assert r.bw_samples.min == 263880 * KIB and r.bw_samples.max == 321640 * KIB
    assert r.bw_samples.mean == pytest.approx(292034.666667 * KIB) and r.bw_samples.samples is None
    assert r.iops_samples is None  # only v5 carries IOPS samples
    assert (w.io_bytes, w.iops, w.clat.percentile(99)) == (259188 * 1024, 32382.0, 419_000)
    assert (job.usr_cpu_pct, job.sys_cpu_pct, job.ctx, job.majf, job.minf) == (7.2, 29.95, 13687, 0, 13)
    assert job.iodepth_level_pct == {"1": 0.1, "2": 0.1, "4": 0.1, "8": 0.1, "16": 100.0, "32": 0.0, ">=64": 0.0}
    dist = {k: v for k, v in job.latency_dist_pct.items() if v}
    assert dist == {"20us": 0.01, "50us": 0.03, "100us": 0.93, "250us": 97.19, "500us": 1.23, "750us": 0.49,
                    "1000us": 0.06, "2ms": 0.07, "4ms": 0.01}
    assert len(job.latency_dist_pct) == 22
    (disk,) = report.disk_util
    assert (disk.name, disk.read_ios, disk.write_ios, disk.read_ticks_ms, disk.in_queue_ms, disk.util_pct) == (
        "vda", 143163, 61255, 16757, 23954, 92.54)


def test_terse_iops_is_consistent_with_its_kib():
    r = parse_terse(V3).jobs[0].directions["read"]
    ios = r.io_bytes // 4096  # bs=4k: 151585 I/Os
    assert r.iops == 1000 * ios // 2001  # fio's integer, truncated


def test_v5_iops_samples_and_empty_trim():
    report = parse_output((DATA / "fio-3.33_randrw_libaio.terse-v5.txt").read_text())
    (job,) = report.jobs
    assert set(job.directions) == {"read", "write"}  # the trim block is all zero
    r = job.directions["read"]
    assert (r.io_bytes, r.iops, r.clat.min_ns) == (609624 * 1024, 76164.0, 0)
    assert r.bw_samples.samples == 3 and r.bw_samples.mean == 300016.0 * KIB
    assert (r.iops_samples.min, r.iops_samples.max, r.iops_samples.mean, r.iops_samples.samples) == (
        73146, 77026, 75004.0, 3)
    assert job.directions["write"].iops_samples.stddev == pytest.approx(926.107985)


def test_minimal_is_v3_and_fio228_terse():
    minimal = parse_output((DATA / "fio-3.33_randrw_libaio.minimal.txt").read_text()).jobs[0]
    assert minimal.directions["read"].io_bytes == 646532 * 1024 and minimal.directions["write"].iops == 34592.0
    old = parse_output((DATA / "fio-2.2.8_randrw_posixaio.terse-v3.txt").read_text())
    assert old.fio_version == "2.2.8"
    r = old.jobs[0].directions["read"]
    assert (r.io_bytes, r.iops, r.slat.min_ns, r.slat.max_ns) == (202296 * 1024, 25274.0, 0, 156_000)
    assert r.clat.percentile(99.99) == 4_256_000 and r.bw_samples is None  # bw was not sampled


@pytest.mark.parametrize(("terse", "json_name"), [
    ("fio-3.33_randrw_libaio.terse-v3.txt", "fio-3.33_randrw_libaio.json"),
    ("fio-3.33_randrw_libaio.terse-v5.txt", "fio-3.33_randrw_libaio.json"),
    ("fio-2.2.8_randrw_posixaio.terse-v3.txt", "fio-2.2.8_randrw_posixaio.json"),
])
def test_terse_and_json_of_the_same_job_agree(terse, json_name):
    """Separate runs (2 s terse, 3 s json for libaio): same units and shape, rates within noise."""
    a = parse_output((DATA / terse).read_text()).jobs[0]
    b = parse_output((DATA / json_name).read_text()).jobs[0]
    assert a.name == b.name and set(a.directions) == set(b.directions) == {"read", "write"}
    for name in ("read", "write"):
        x, y = a.directions[name], b.directions[name]
        assert x.iops == pytest.approx(y.iops, rel=0.15)
        assert x.io_bytes % 4096 == 0 and x.bw_bytes_s / x.iops == pytest.approx(4096, rel=0.001)
        for kind in ("slat", "clat", "lat"):
            assert getattr(x, kind).mean_ns == pytest.approx(getattr(y, kind).mean_ns, rel=0.5)
        assert x.clat.percentile(50) == pytest.approx(y.clat.percentile(50), rel=0.15)


# --- layouts derived from the real v3 line ------------------------------------------------------------


def _v4(f: list[str]) -> list[str]:
    """v3 -> v4: a trim block after write (5 + 2*41 header/dirs, then cpu)."""
    return ["4", *f[1:87], *EMPTY_DIR, *f[87:]]


def test_v4_layout_with_trim_block():
    f = _v4(fields())
    assert len(f) == 171
    report = parse_terse(";".join(f))
    assert set(report.jobs[0].directions) == {"read", "write"}
    assert report.jobs[0].directions["read"].iops == 75754.0 and report.disk_util[0].name == "vda"


def test_v2_has_no_version_and_no_disks_and_description_on_next_line():
    f = _v4(fields())
    v2 = ["2", *f[2:-9], "3", "84"]  # no fio version, no disk fields; continue_on_error trailer
    report = parse_terse(";".join(v2) + "\n;nightly run\n\n", "v2.txt")
    assert report.fio_version is None and report.disk_util == ()
    (job,) = report.jobs
    assert job.directions["write"].iops == 32382.0 and job.job_options == {"description": "nightly run"}
    assert job.ctx == 13687
    assert any("continue_on_error ignored 3 errors, the first errno 84" in w for w in report.warnings)


def test_v2_of_fio_before_2_0_10_has_two_directions():
    v2 = ["2", *fields()[2:-9]]
    (job,) = parse_terse(";".join(v2)).jobs
    assert set(job.directions) == {"read", "write"}


def test_unified_mixed_and_both():
    f = fields()
    mixed = [*f[:46], *f[87:]]  # header + one block + cpu + disk
    (job,) = parse_terse(";".join(mixed)).jobs
    assert list(job.directions) == ["mixed"] and job.directions["mixed"].iops == 75754.0
    both = [*f[:87], *f[5:46], *f[87:]]  # read, write, then a mixed block
    (job,) = parse_terse(";".join(both)).jobs
    assert list(job.directions) == ["read", "write", "mixed"]


def test_fio199_order_latency_before_percentiles():
    f = fields()
    block = f[5:46]
    old = [*block[:12], *block[32:36], *block[12:32], *block[36:]]
    (job,) = parse_terse(";".join([*f[:5], *old, *f[46:]])).jobs
    r = job.directions["read"]
    assert r.lat.mean_ns == pytest.approx(140018.891) and r.clat.percentile(99) == 329_000


def test_disk_slaves_trailers_and_description_with_semicolons():
    f = fields()
    line = ";".join([*f, "slaves", "10", "20", "0", "0", "5", "6", "7", "50.00%", "2", "5", "my;job"])
    report = parse_terse(line)
    (disk,) = report.disk_util
    assert disk.aggregate["aggr_read_ios"] == 10 and disk.aggregate["aggr_util"] == 50.0
    assert report.jobs[0].job_options == {"description": "my;job"}
    assert any("continue_on_error ignored 2 errors, the first errno 5" in w for w in report.warnings)


def test_client_mode_disk_lines_on_their_own():
    job_line = ";".join(fields()[:-9])
    report = parse_terse(job_line + "\n;vda;1;2;3;4;5;6;7;8.50%\n")
    assert [(d.name, d.read_ios, d.util_pct) for d in report.disk_util] == [("vda", 1, 8.5)]


def _with(f: list[str], runtime: str, disk_ios: str) -> str:
    g = list(f)
    g[8] = g[49] = runtime  # read and write runtime, with the bandwidth fio prints for it (KiB/s)
    g[6], g[47] = (str(int(g[kib]) * 1000 // int(runtime)) for kib in (5, 46))
    g[-8] = disk_ios
    return ";".join(g)


def test_status_interval_snapshots_keep_the_last_report():
    f = fields()
    lines = [_with(f, "1000", "100"), _with(f, "2000", "200"), _with(f, "2001", "300")]
    report = parse_terse("\n".join(lines))
    (job,) = report.jobs
    assert job.directions["read"].runtime_ms == 2001 and report.disk_util[0].read_ios == 300
    assert "2 terse line(s) were --status-interval snapshots" in report.warnings[0]


def test_clones_of_one_report_are_all_kept():
    f = fields()
    report = parse_terse("\n".join([_with(f, "2001", "300"), _with(f, "2000", "300")]))
    assert [j.index for j in report.jobs] == [0, 1] and report.warnings == ()


def test_low_iops_truncation_warning():
    f = fields()
    f[7], f[48] = "5", "2"
    report = parse_terse(";".join(f))
    assert report.jobs[0].directions["write"].iops == 2.0
    assert any("terse IOPS=2 is fio's integer, truncated" in w for w in report.warnings)


def test_error_field_gives_warning():
    f = fields()
    f[4] = "95"
    report = parse_terse(";".join(f))
    assert report.jobs[0].error == 95 and "fio error 95" in report.warnings[0]


def test_wrong_field_count_is_a_parse_error_with_line():
    bad = ";".join(fields()[:60])
    with pytest.raises(ParseError, match=r"^t\.txt, line 2: cannot read this terse line: terse v3 line with 60"):
        parse_terse("junk\n" + bad, "t.txt")


def test_non_numeric_field_is_a_parse_error():
    f = fields()
    f[5] = "lots"
    with pytest.raises(ParseError, match="expected an integer, got 'lots'"):
        parse_terse(";".join(f))


def test_no_terse_line_is_a_parse_error():
    with pytest.raises(ParseError, match=r"^x: no fio terse line found"):
        parse_terse("hello\n", "x")
