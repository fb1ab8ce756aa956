"""fio normal output: exact values computed by hand from real outputs in tests/data/fio.

IOPS is checked against ``issued_total * 1000 / runtime_ms`` (stat.c), never the display.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iolab.errors import ParseError
from iolab.fio import clean_pasted, parse_json, parse_normal, parse_output
from iolab.fio.num2str import io_size_fits, io_size_match, iops_display_warning, num2str
from paths import FIELD_REPORTS
from paths import FIO as DATA

KIB = 1024.0


def load(name: str):
    return parse_output((DATA / name).read_text(), name)


# --- seed files: fio 3.16, pasted from a web page with glued line numbers ---------------------


def test_seed_local_ssd_exact_write_iops_and_latencies():
    report = load("seed001_local_ssd_fio316.txt")
    assert (report.source_format, report.fio_version, report.warnings) == ("normal", "3.16", ())
    (job,) = report.jobs
    assert (job.name, job.groupid, job.members, job.error) == ("test", 0, 4, 0)
    assert list(job.directions) == ["write"]
    w = job.directions["write"]
    assert (w.total_ios, w.runtime_ms, w.short_ios, w.drop_ios) == (71936, 60071, 0, 0)
    assert w.iops == 71936 * 1000 / 60071
    assert w.iops == pytest.approx(1197.51627, abs=1e-5)  # 60071 x 1197.5 = 71935022.5; +977.5/60071
    assert w.io_bytes is None and w.bw_bytes_s is None  # no job header line: block size unknown
    assert (w.slat.min_ns, w.slat.max_ns) == (7_000, 64_376_000)
    assert w.slat.mean_ns == pytest.approx(77_350) and w.slat.stddev_ns == pytest.approx(952_510)
    assert (w.clat.min_ns, w.clat.max_ns) == (13e6, 258e6)
    assert w.clat.mean_ns == pytest.approx(106.80e6) and w.clat.stddev_ns == pytest.approx(25.94e6)
    assert w.clat.samples is None  # normal output does not print N
    assert w.clat.percentile(99) == 180e6
    assert w.clat.percentile("1.00") == 54e6 and w.clat.percentile(99.99) == 247e6
    assert len(w.clat.percentiles_ns) == 17
    assert w.lat.mean_ns == pytest.approx(106.88e6) and not w.lat.percentiles_ns
    assert w.bw_samples.min == 3800 * KIB and w.bw_samples.max == 5752 * KIB
    assert w.bw_samples.mean == pytest.approx(4786.30 * KIB) and w.bw_samples.samples == 480
    assert (w.iops_samples.min, w.iops_samples.max, w.iops_samples.mean) == (950, 1438, 1196.5)
    assert w.iops_samples.stddev == pytest.approx(23.07) and w.iops_samples.samples == 480
    assert job.latency_dist_pct == {"20ms": 0.01, "50ms": 0.63, "100ms": 25.21, "250ms": 74.14, "500ms": 0.01}
    assert (job.usr_cpu_pct, job.sys_cpu_pct, job.ctx, job.majf, job.minf) == (0.23, 0.69, 25625, 0, 47)
    assert job.iodepth_level_pct == {"1": 0.1, "2": 0.1, "4": 0.1, "8": 0.1, "16": 0.1, "32": 99.8, ">=64": 0.0}
    (disk,) = report.disk_util
    assert (disk.name, disk.read_ios, disk.write_ios, disk.write_merges) == ("vda", 0, 73364, 4)
    assert (disk.write_ticks_ms, disk.in_queue_ms, disk.util_pct) == (7947375, 7800168, 98.87)


def test_seed_ceph_rbd_exact_iops_and_tail_latency():
    (job,) = load("seed001_ceph_rbd_fio316.txt").jobs
    w = job.directions["write"]
    assert (w.total_ios, w.runtime_ms) == (288149, 60015)
    assert w.iops == 288149 * 1000 / 60015 == pytest.approx(4801.28301, abs=1e-5)
    assert w.clat.percentile(99) == 317e6 and w.clat.percentile(99.99) == 701e6
    assert w.slat.max_ns == 578_742_000 and w.clat.max_ns == 810e6
    # two "lat (msec)" lines merge into one distribution
    assert job.latency_dist_pct == {"10ms": 0.11, "20ms": 59.21, "50ms": 37.40, "100ms": 1.66, "250ms": 0.45,
                                    "500ms": 0.95, "750ms": 0.22, "1000ms": 0.01}


def test_seed_comparison_reads_like_the_wiki_page():
    ssd = load("seed001_local_ssd_fio316.txt").jobs[0].directions["write"]
    ceph = load("seed001_ceph_rbd_fio316.txt").jobs[0].directions["write"]
    assert ceph.iops / ssd.iops == pytest.approx(4.00937, abs=1e-5)
    assert (ssd.clat.percentile(99), ceph.clat.percentile(99)) == (180e6, 317e6)


def test_a_bandwidth_display_that_lost_fios_carry_is_not_used():
    """fio 3.16 printed ``BW=31.0MiB/s (33.5MB/s)`` for 1923MiB in 60187 ms (31.95 MiB/s; the KVM field report's
    third output): num2str() of fio 2.20-3.25 drops the carry, so the IEC display is 3 % low and the SI one right.
    Without a job header line the block size is unknown, so the display is all there is."""
    text = "\n".join(next(FIELD_REPORTS.glob("001_*.txt")).read_text().split("\n")[133:166])
    report = parse_output(text, "kvm-iommu.txt")
    w = report.jobs[0].directions["write"]
    assert w.bw_bytes_s is None and w.bw_bytes_s_shown == 33.5e6
    (warning,) = report.warnings
    assert warning == ("job 'test' write: the printed bandwidths 31.0MiB/s and 33.5MB/s disagree beyond their "
                       "rounding: fio 2.20-3.25 num2str() drops the carry when the decimals round up to 1, which "
                       "lowers a display (FIO_NOTES §2.3); 33.5MB/s is used, not 31.0MiB/s")
    first = load("seed001_local_ssd_fio316.txt").jobs[0].directions["write"]  # 4790KiB/s (4905kB/s): they agree
    assert first.bw_bytes_s_shown == 4790 * 1024


def test_clean_pasted_removes_glued_line_numbers_only():
    raw = (DATA / "seed001_local_ssd_fio316.txt").read_text()
    cleaned = clean_pasted(raw)
    assert cleaned.startswith("fio-3.16\nStarting 4 processes\n")
    assert "\n    clat percentiles (msec):\n     |  1.00th=[   54]," in cleaned
    assert "\n\nRun status group 0 (all jobs):\n" in cleaned  # line 25 was only its number
    assert clean_pasted(cleaned) == cleaned


# --- fio 3.33, libaio randrw ---------------------------------------------------------------------


def test_fio333_libaio_exact_values():
    report = load("fio-3.33_randrw_libaio.normal.txt")
    assert (report.fio_version, report.warnings) == ("3.33", ())
    (job,) = report.jobs
    r, w = job.directions["read"], job.directions["write"]
    assert (r.total_ios, r.runtime_ms, w.total_ios, w.runtime_ms) == (214015, 3001, 92039, 3001)
    assert r.iops == 214015 * 1000 / 3001 == pytest.approx(71314.56181, abs=1e-5)  # printed 71.3k
    assert w.iops == 92039 * 1000 / 3001 == pytest.approx(30669.44352, abs=1e-5)  # printed 30.7k
    # header "bs=(R) 4096B-4096B": bytes = total x 4096, which fio prints as 836MiB / 360MiB
    assert (r.io_bytes, w.io_bytes) == (214015 * 4096, 92039 * 4096) == (876605440, 376991744)
    assert r.bw_bytes_s == 876605440 * 1000 / 3001
    assert (r.slat.min_ns, r.slat.max_ns, r.slat.mean_ns, r.slat.stddev_ns) == (1176, 423694, 2668.80, 1799.49)
    assert (r.clat.min_ns, r.clat.max_ns) == (19_000, 4_053_000)
    assert r.clat.mean_ns == pytest.approx(145_160) and r.clat.stddev_ns == pytest.approx(68_780)
    assert r.clat.percentile(1) == 101_000 and r.clat.percentile(99.99) == 1_680_000
    assert w.clat.percentile(99.99) == 5_080_000
    assert r.bw_samples.min == 259520 * KIB and r.bw_samples.samples == 5
    assert r.bw_samples.mean == pytest.approx(282936.0 * KIB)
    assert (r.iops_samples.min, r.iops_samples.max, r.iops_samples.mean) == (64880, 73666, 70734.0)
    assert job.latency_dist_pct["250us"] == 96.70 and job.latency_dist_pct["10ms"] == 0.02
    assert len(job.latency_dist_pct) == 10
    assert (job.usr_cpu_pct, job.sys_cpu_pct, job.ctx, job.minf) == (8.87, 29.57, 20135, 13)
    assert job.iodepth_level_pct["16"] == 100.0
    assert [(d.name, d.read_ios, d.write_ios) for d in report.disk_util] == [("vda", 206263, 88667)]


def test_fio228_normal_microsecond_units_and_old_issued_line():
    report = load("fio-2.2.8_randrw_posixaio.normal.txt")
    assert (report.fio_version, report.warnings) == ("2.2.8", ())
    (job,) = report.jobs
    r, w = job.directions["read"], job.directions["write"]
    # "issued    : total=r=50071/w=21382/d=0, short=r=0/w=0/d=0, drop=r=0/w=0/d=0"
    assert (r.total_ios, w.total_ios, r.short_ios, w.drop_ios) == (50071, 21382, 0, 0)
    assert r.runtime_ms == 2001  # "runt=  2001msec"
    assert r.iops == 50071 * 1000 / 2001 == pytest.approx(25022.98851, abs=1e-5)  # printed iops=25022
    # 2.x header "bs=4K-4K/4K-4K/4K-4K" is exact (fio_uint_to_kmg); fio printed io=200284KB
    assert r.io_bytes == 50071 * 4096 == 200284 * 1024
    # 2.x prints latencies in microseconds
    assert (r.slat.min_ns, r.slat.max_ns) == (0, 126_000)
    assert r.slat.mean_ns == pytest.approx(260) and r.slat.stddev_ns == pytest.approx(740)
    assert r.clat.percentile(99.99) == 26_240_000 and w.clat.percentile(99.99) == 25_984_000
    assert r.bw_samples is None and r.iops_samples is None  # this run printed no sample lines
    assert job.latency_dist_pct == {"50us": 0.01, "100us": 0.01, "250us": 0.05, "500us": 91.12, "750us": 7.64,
                                    "1000us": 0.86, "2ms": 0.29, "50ms": 0.02}


@pytest.mark.parametrize(
    ("name", "read", "write"),
    [("fio-3.16_randrw_posixaio.normal.txt", 46184, 19749), ("fio-3.33_randrw_posixaio.normal.txt", 46308, 19804)],
)
def test_posixaio_exact_iops(name, read, write):
    report = load(name)
    assert report.warnings == ()
    d = report.jobs[0].directions
    assert d["read"].iops == read * 1000 / 2001 and d["write"].iops == write * 1000 / 2001
    assert d["write"].io_bytes == write * 4096  # "; 0 zone resets" after the write line is ignored


def test_status_interval_normal_keeps_the_last_report():
    report = load("fio-3.33_status-interval-1s_normal.txt")
    (job,) = report.jobs
    r = job.directions["read"]
    assert (r.total_ios, r.runtime_ms) == (186668, 2001) and r.iops == 186668 * 1000 / 2001
    assert len(report.warnings) == 1 and "2 job report(s)" in report.warnings[0]
    assert [(d.name, d.read_ios) for d in report.disk_util] == [("vda", 176588)]


# --- the same run in normal and JSON ---------------------------------------------------------------


def test_same_run_json_and_normal_agree_within_display_precision():
    text = (DATA / "fio-3.33_steadystate_json_plus_normal.txt").read_text()
    normal, js = parse_normal(text), parse_json(text)
    n, j = normal.jobs[0].directions["read"], js.jobs[0].directions["read"]
    assert n.total_ios == j.total_ios == 476318 and n.runtime_ms == j.runtime_ms == 5000
    assert n.iops == j.iops == 95263.6
    # ramp_time=1: the 8 I/Os in flight (iodepth=8) when the ramp ended count in io_bytes but not
    # in total_io_u, so issued x bs is 8 blocks short of fio's io_bytes (FIO_NOTES §5.1)
    assert j.io_bytes - n.io_bytes == 8 * 4096
    for kind, unit in (("slat", 1), ("clat", 1000), ("lat", 1000)):
        a, b = getattr(n, kind), getattr(j, kind)
        assert a.min_ns <= b.min_ns < a.min_ns + unit and a.max_ns <= b.max_ns < a.max_ns + unit
        assert abs(a.mean_ns - b.mean_ns) <= 0.005 * unit and abs(a.stddev_ns - b.stddev_ns) <= 0.005 * unit
    for key, value in j.clat.percentiles_ns.items():  # fio rounds percentiles up to the unit
        assert value <= n.clat.percentiles_ns[key] < value + 1000
    assert n.bw_samples.mean == j.bw_samples.mean and n.iops_samples.samples == j.iops_samples.samples == 10
    assert normal.jobs[0].steadystate["attained"] == js.jobs[0].steadystate["attained"] == 1
    assert normal.jobs[0].steadystate["criterion"] == "2.590%"
    assert [d.read_ios for d in normal.disk_util] == [d.read_ios for d in js.disk_util] == [568319]


@pytest.mark.parametrize(
    ("normal", "json_name", "runtime"),
    [
        ("fio-3.33_randrw_libaio.normal.txt", "fio-3.33_randrw_libaio.json", 3001),
        ("fio-2.2.8_randrw_posixaio.normal.txt", "fio-2.2.8_randrw_posixaio.json", 2001),
        ("fio-3.16_randrw_posixaio.normal.txt", "fio-3.16_randrw_posixaio.json", 2001),
        ("fio-3.33_randrw_posixaio.normal.txt", "fio-3.33_randrw_posixaio.json", 2001),
    ],
)
def test_same_job_in_normal_and_json_agrees(normal, json_name, runtime):
    """Separate runs of one job: same shape and units, rates within run-to-run noise."""
    a, b = load(normal).jobs[0], load(json_name).jobs[0]
    assert (a.name, set(a.directions)) == (b.name, set(b.directions)) == ("randrw", {"read", "write"})
    for name in ("read", "write"):
        x, y = a.directions[name], b.directions[name]
        assert x.runtime_ms == y.runtime_ms == runtime
        assert x.io_bytes == x.total_ios * 4096 and y.io_bytes == y.total_ios * 4096
        assert x.iops == pytest.approx(y.iops, rel=0.15)
        for kind in ("slat", "clat", "lat"):
            assert getattr(x, kind).mean_ns == pytest.approx(getattr(y, kind).mean_ns, rel=0.5)
        assert x.clat.percentile(50) == pytest.approx(y.clat.percentile(50), rel=0.15)
    assert a.directions["read"].iops / a.directions["write"].iops == pytest.approx(7 / 3, rel=0.05)


# --- exactness of IOPS against fio's display ----------------------------------------------------------


def _one_line_report(version: str, iops: str, total: int, runtime: int = 1000) -> str:
    head = f"fio-{version}\n" if version else ""
    return (f"{head}t: (groupid=0, jobs=1): err= 0: pid=1: Wed Dec  8 16:43:57 2021\n"
            f"  read: IOPS={iops}, BW=43.0MiB/s (45.1MB/s)(43.0MiB/{runtime}msec)\n"
            f"     issued rwts: total={total},0,0,0 short=0,0,0,0 dropped=0,0,0,0\n")


def test_fio316_carry_bug_iops_is_exact_with_warning():
    report = parse_output(_one_line_report("3.16", "10.0k", 10999))
    assert report.jobs[0].directions["read"].iops == 10999.0
    (warning,) = report.warnings
    assert "IOPS=10.0k" in warning and "10999" in warning and "3.26" in warning and "c736b361" in warning


def test_unexplained_display_is_refused_naming_the_line():
    with pytest.raises(ParseError, match=r"^r\.txt, line 3: jobs\[0\]\.read\.iops = '12\.0k': printed IOPS=12\.0k "
                                         r"but 10999 I/Os in 1000 ms are 10999\.0000 IOPS, which no fio rounding"):
        parse_output(_one_line_report("3.33", "12.0k", 10999), "r.txt")


def test_display_without_version_is_explained_by_any_generation():
    report = parse_output(_one_line_report("", "10.0k", 10999))
    assert "2.20-3.25" in report.warnings[0]


def test_fio217_decimals_bug_is_explained():
    assert num2str(25049, 4, era="2.17") == "25.5k"
    report = parse_output(_one_line_report("2.17", "25.5k", 25049))
    assert report.jobs[0].directions["read"].iops == 25049.0 and "2.17-2.19" in report.warnings[0]


@pytest.mark.parametrize(("shown", "total", "runtime"), [("71.3k", 214015, 3001), ("99.9k", 99950, 1000),
                                                         ("1197", 71936, 60071), ("123k", 123456, 1000)])
def test_consistent_displays_give_no_warning(shown, total, runtime):
    assert iops_display_warning(shown, total, runtime, "3.33") is None


@given(st.sampled_from(["836MiB", "360MiB", "1126MiB", "40.0KiB", "2000KiB", "256MiB", "200284KB", "1000.5K",
                        "11.7MiB", "1024KiB", "878MB"]),
       st.integers(0, 2 << 30), st.sampled_from([None, "2.2.8", "2.17", "3.16", "3.33"]))
def test_io_size_fits_is_io_size_match_above_zero(shown, nbytes, version):
    assert io_size_fits(shown, nbytes, version) == (io_size_match(shown, nbytes, version) > 0)


def test_num2str_matches_fio_compiled_from_its_own_source():
    eras = {"fio-2.2.8": "2.0", "fio-2.17": "2.17", "fio-3.25": "2.20", "fio-3.33": "3.26"}
    rows = [line.split() for line in (DATA / "num2str_reference.txt").read_text().splitlines()
            if not line.startswith("#")]
    assert len(rows) == 1600
    for tag, num, maxlen, pow2, expected in rows:
        assert num2str(int(num), int(maxlen), pow2 == "1", eras[tag]) == expected, (tag, num, maxlen, pow2)


# --- a constructed report with every feature, following stat.c@fio-3.36's format strings --------------

FULL = """\
seqw: (g=0): rw=write, bs=(R) 128KiB-128KiB, (W) 128KiB-128KiB, (T) 128KiB-128KiB, ioengine=psync, iodepth=1
...
tw: (g=1): rw=trimwrite, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=psync, iodepth=1
rd: (g=1): rw=randread, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=psync, iodepth=1
mx: (g=2): rw=randrw, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=libaio, iodepth=4
fio-3.36
Starting 5 processes

seqw: (groupid=0, jobs=2): err= 0: pid=100: Mon Jan  1 00:00:00 2024
  Description  : [sequential writers; two clones]
  write: IOPS=1024, BW=128MiB/s (134MB/s)(256MiB/2000msec); 0 zone resets
    slat (usec): min=3, max=120, avg= 5.50, stdev= 1.25
    clat (msec): min=3, max=250, avg=15.20, stdev=12.03
     lat (msec): min=3, max=250, avg=15.21, stdev=12.03
    clat prio 2/0 (msec): min=3, max=250, avg=15.20, stdev=12.03
    clat percentiles (msec):
     |  1.00th=[    4],  5.00th=[    5], 10.00th=[    6], 20.00th=[    8],
     | 50.00th=[   13], 99.00th=[  228], 99.90th=[  249]
    clat prio 2/0 (50.00% of IOs) percentiles (msec):
     |  1.00th=[    9],  5.00th=[    9], 10.00th=[    9], 20.00th=[    9],
   bw (  KiB/s): min=120000, max=140000, per=100.00%, avg=131072.00, stdev=5000.00, samples=8
   iops        : min=  937, max= 1093, avg=1024.00, stdev=39.06, samples=8
  lat (msec)   : 4=1.00%, 10=30.00%, 20=50.00%, 50=18.00%, 250=0.90%
  lat (msec)   : 500=0.10%
  fsync/fdatasync/sync_file_range:
    sync (nsec): min=500, max=9000, avg=1200.50, stdev=300.25
    sync percentiles (nsec):
     |  1.00th=[  502], 50.00th=[ 1200], 99.00th=[ 8000]
  cpu          : usr=1.50%, sys=3.25%, ctx=5000, majf=1, minf=30
  IO depths    : 1=100.0%, 2=0.0%, 4=0.0%, 8=0.0%, 16=0.0%, 32=0.0%, >=64=0.0%
     submit    : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.0%, >=64=0.0%
     complete  : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.0%, >=64=0.0%
     issued rwts: total=0,2048,0,256 short=0,0,0,0 dropped=0,0,0,0
     latency   : target=0, window=0, percentile=100.00%, depth=1
  block lifetime percentiles :
   | 1.00th=12, 50.00th=340,
        states               : unwritten=0, firstwrite=1, trimmed=0, write failure=0
tw: (groupid=1, jobs=1): err= 0: pid=102: Mon Jan  1 00:00:00 2024
  write: IOPS=500, BW=2000KiB/s (2048kB/s)(2000KiB/1000msec); 0 zone resets
    clat (nsec): min=800, max=90000, avg=1500.00, stdev=10.00
   bw (  KiB/s): min= 2000, max= 2000, per=100.00%, avg=2000.00, stdev= 0.00, samples=2
  trim: IOPS=500, BW=2000KiB/s (2048kB/s)(2000KiB/1000msec)
    clat (nsec): min=700, max=80000, avg=1400.00, stdev=11.00
    lat percentiles (nsec):
     |  1.00th=[  700], 99.00th=[80384]
    slat percentiles (nsec):
     | 50.00th=[  101]
  lat (nsec)   : 750=0.10%, 1000=10.00%
  lat (usec)   : 2=89.90%
  cpu          : usr=0.00%, sys=1.00%, ctx=1000, majf=0, minf=5
  IO depths    : 1=100.0%, 2=0.0%, 4=0.0%, 8=0.0%, 16=0.0%, 32=0.0%, >=64=0.0%
     issued rwts: total=0,500,500,0 short=0,0,0,0 dropped=0,0,0,0
rd: (groupid=1, jobs=1): err= 5 (file:io_u.c:1845, func=io_u error, error=Input/output error): pid=103: \
Mon Jan  1 00:00:00 2024
  read: IOPS=10, BW=40.0KiB/s (41.0kB/s)(40.0KiB/1000msec); Cachehit=12.50%
  cpu          : usr=0.00%, sys=0.10%, ctx=10, majf=0, minf=5
  IO depths    : 1=100.0%, 2=0.0%, 4=0.0%, 8=0.0%, 16=0.0%, 32=0.0%, >=64=0.0%
     issued rwts: total=10,0,0,0 short=0,0,0,0 dropped=0,0,0,0
     errors    : total=3, first_error=5/<Input/output error>
mx: (groupid=2, jobs=1): err= 0: pid=104: Mon Jan  1 00:00:00 2024
  mixed: IOPS=3000, BW=11.7MiB/s (12.3MB/s)(11.7MiB/1000msec)
  cpu          : usr=2.00%, sys=4.00%, ctx=3000, majf=0, minf=9
  IO depths    : 1=0.1%, 2=0.1%, 4=99.9%, 8=0.0%, 16=0.0%, 32=0.0%, >=64=0.0%
     issued rwts: total=3000,0,0,0 short=0,0,0,0 dropped=0,0,0,0

Run status group 0 (all jobs):
  WRITE: bw=128MiB/s (134MB/s), 64.0MiB/s-64.0MiB/s (67.1MB/s-67.1MB/s), io=256MiB (268MB), run=2000-2000msec

Run status group 1 (all jobs):
   READ: bw=40.0KiB/s (41.0kB/s), 40.0KiB/s-40.0KiB/s (41.0kB/s-41.0kB/s), io=40.0KiB (41.0kB), run=1000-1000msec
  WRITE: bw=2000KiB/s (2048kB/s), 2000KiB/s-2000KiB/s (2048kB/s-2048kB/s), io=2000KiB (2048kB), run=1000-1000msec
   TRIM: bw=2000KiB/s (2048kB/s), 2000KiB/s-2000KiB/s (2048kB/s-2048kB/s), io=2000KiB (2048kB), run=1000-1000msec

Run status group 2 (all jobs):
  MIXED: bw=11.7MiB/s (12.3MB/s), 11.7MiB/s-11.7MiB/s (12.3MB/s-12.3MB/s), io=11.7MiB (12.3MB), run=1000-1000msec

Disk stats (read/write):
    md0: ios=100/2048, sectors=800/524288, merge=0/0, ticks=0/0, in_queue=0, util=0.00%, aggrios=50/1024, \
aggsectors=400/262144, aggrmerge=0/0, aggrticks=10/2000, aggrin_queue=2010, aggrutil=90.00%
  sda: ios=50/1024, sectors=400/262144, merge=0/0, ticks=10/2000, in_queue=2010, util=90.00%
  sdb: ios=50/1024, sectors=400/262144, merge=0/0, ticks=12/1990, in_queue=2002, util=89.50%
"""


@pytest.fixture(scope="module")
def full():
    return parse_output(FULL, "full.txt")


def test_full_jobs_groups_and_members(full):
    assert full.fio_version == "3.36"
    assert [(j.name, j.groupid, j.members, j.index) for j in full.jobs] == [
        ("seqw", 0, 2, 0), ("tw", 1, 1, 1), ("rd", 1, 1, 2), ("mx", 2, 1, 3)]
    assert full.jobs[0].job_options == {"description": "sequential writers; two clones"}


def test_full_group_reporting_job_with_sync_section(full):
    seqw = full.jobs[0]
    assert list(seqw.directions) == ["write", "sync"]
    w = seqw.directions["write"]
    assert (w.total_ios, w.runtime_ms, w.iops) == (2048, 2000, 1024.0)
    # "128KiB" is abbreviated; of the multiples of 512 that print so (130560, 131072) only
    # 131072 also reproduces the printed "256MiB"
    assert w.io_bytes == 2048 * 131072 and w.bw_bytes_s == 134217728.0
    assert (w.slat.min_ns, w.slat.mean_ns, w.clat.max_ns) == (3000, 5500, 250e6)
    assert w.clat.percentiles_ns == {"1": 4e6, "5": 5e6, "10": 6e6, "20": 8e6, "50": 13e6, "99": 228e6,
                                     "99.9": 249e6}  # the prio block's rows are not mixed in
    assert w.bw_samples.mean == 131072.0 * KIB and w.iops_samples.stddev == 39.06
    sync = seqw.directions["sync"]
    assert sync.total_ios == 256 and sync.iops is None and sync.runtime_ms is None
    assert (sync.lat.min_ns, sync.lat.max_ns, sync.lat.mean_ns) == (500, 9000, 1200.50)
    assert sync.lat.percentiles_ns == {"1": 502, "50": 1200, "99": 8000}
    assert seqw.latency_dist_pct == {"4ms": 1.0, "10ms": 30.0, "20ms": 50.0, "50ms": 18.0, "250ms": 0.9,
                                     "500ms": 0.1}
    assert (seqw.usr_cpu_pct, seqw.sys_cpu_pct, seqw.ctx, seqw.majf, seqw.minf) == (1.5, 3.25, 5000, 1, 30)


def test_full_write_and_trim_with_lat_and_slat_percentiles(full):
    tw = full.jobs[1]
    w, t = tw.directions["write"], tw.directions["trim"]
    assert (w.total_ios, t.total_ios, w.iops, t.iops) == (500, 500, 500.0, 500.0)
    assert w.io_bytes == t.io_bytes == 500 * 4096
    assert t.lat.percentiles_ns == {"1": 700, "99": 80384} and t.lat.min_ns is None
    assert t.slat.percentiles_ns == {"50": 101}
    assert w.bw_samples.samples == 2 and t.bw_samples is None
    assert tw.latency_dist_pct == {"750ns": 0.1, "1000ns": 10.0, "2us": 89.9}


def test_full_error_text_and_continue_on_error_become_warnings(full):
    rd = full.jobs[2]
    assert rd.error == 5
    r = rd.directions["read"]
    assert (r.total_ios, r.iops, r.io_bytes) == (10, 10.0, 40960)  # "; Cachehit=12.50%" is ignored
    assert any("fio error 5 (file:io_u.c:1845, func=io_u error, error=Input/output error)" in w
               for w in full.warnings)
    assert any("continue_on_error ignored 3 errors" in w for w in full.warnings)


def test_full_unified_mixed_direction(full):
    (name, mixed), = full.jobs[3].directions.items()
    assert name == "mixed" and (mixed.total_ios, mixed.runtime_ms, mixed.iops) == (3000, 1000, 3000.0)
    assert mixed.io_bytes == 3000 * 4096  # read and write sizes agree; fio printed 11.7MiB


def test_full_md_disk_with_aggregates_and_sectors(full):
    assert [d.name for d in full.disk_util] == ["md0", "sda", "sdb"]
    md0 = full.disk_util[0]
    assert (md0.read_ios, md0.write_ios, md0.util_pct) == (100, 2048, 0.0)
    assert md0.aggregate == {"aggr_read_ios": 50, "aggr_write_ios": 1024, "aggr_read_merges": 0,
                             "aggr_write_merge": 0, "aggr_read_ticks": 10, "aggr_write_ticks": 2000,
                             "aggr_in_queue": 2010, "aggr_util": 90.0}
    assert full.disk_util[2].aggregate is None and full.disk_util[2].read_ticks_ms == 12


def test_full_report_has_only_the_expected_warnings(full):
    assert len(full.warnings) == 2


# --- bytes: exact only when derivable ------------------------------------------------------------------


def _sized(bs: str, io: str, total: int, short: int = 0, version: str = "3.33") -> str:
    return (f"j: (g=0): rw=read, bs=(R) {bs}-{bs}, (W) {bs}-{bs}, (T) {bs}-{bs}, ioengine=sync, iodepth=1\n"
            f"fio-{version}\n"
            f"j: (groupid=0, jobs=1): err= 0: pid=1: Mon Jan  1 00:00:00 2024\n"
            f"  read: IOPS=1000, BW=x (y)({io}/1000msec)\n"
            f"     issued rwts: total={total},0,0,0 short={short},0,0,0 dropped=0,0,0,0\n")


def test_bytes_from_significant_figures_10():
    text = ("j: (g=0): rw=read, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=sync, "
            "iodepth=1\n"
            "j: (groupid=0, jobs=1): err= 0: pid=1: Mon Jan  1 00:00:00 2024\n"
            "  read: IOPS=109045, BW=446652227B/s (446652227B/s)(447098880B/1001msec)\n"
            "     issued rwts: total=109155,0,0,0 short=0,0,0,0 dropped=0,0,0,0\n")
    r = parse_output(text).jobs[0].directions["read"]
    assert r.io_bytes == 447098880 and r.iops == 109155 * 1000 / 1001


def test_abbreviated_block_size_resolved_by_printed_io():
    r = parse_output(_sized("64.0KiB", "62.5MiB", 1000)).jobs[0].directions["read"]
    assert r.io_bytes == 1000 * 65536


def test_header_block_size_disagreeing_with_printed_io_is_unknown():
    report = parse_output(_sized("8192B", "4000KiB", 1000))  # 4000KiB is 1000 x 4096
    assert report.jobs[0].directions["read"].io_bytes is None
    assert "bytes and bandwidth are left unknown" in report.warnings[0]


def test_short_ios_make_bytes_unknown():
    r = parse_output(_sized("4096B", "4000KiB", 1000, short=3)).jobs[0].directions["read"]
    assert r.io_bytes is None and r.bw_bytes_s is None and r.short_ios == 3


def test_variable_block_size_gives_unknown_bytes():
    text = _sized("4096B", "4000KiB", 1000).replace("(R) 4096B-4096B", "(R) 4096B-64.0KiB")
    assert parse_output(text).jobs[0].directions["read"].io_bytes is None


def test_missing_issued_line_leaves_iops_unknown_with_warning():
    text = "j: (groupid=0, jobs=1): err= 0: pid=1: x\n  read: IOPS=71.3k, BW=1 (2)(3MiB/3001msec)\n"
    report = parse_output(text)
    assert report.jobs[0].directions["read"].iops is None
    assert "no 'issued' totals" in report.warnings[0] and "71.3k" in report.warnings[0]


# --- other versions' line formats ------------------------------------------------------------------------


def test_fio20_issued_without_drop_and_kb_units():
    text = ("fio-2.0.8\n"
            "j: (groupid=0, jobs=1): err= 0: pid=1: x\n"
            "  write: io=8192KB, bw=8192KB/s, iops=2048, runt=  1000msec\n"
            "    clat (msec): min=2, max=5, avg= 3.10, stdev= 1.20\n"
            "    bw (KB  /s): min= 8000, max= 8300, per=100.00%, avg=8192.00, stdev=20.00\n"
            "     issued    : total=r=0/w=2048/d=0, short=r=0/w=0/d=0\n")
    w = parse_output(text).jobs[0].directions["write"]
    assert (w.total_ios, w.iops, w.drop_ios) == (2048, 2048.0, None)
    assert (w.clat.min_ns, w.clat.mean_ns) == (2e6, 3.1e6)
    assert w.bw_samples.mean == 8192 * KIB and w.bw_samples.samples is None


def test_kb_base_1000_bandwidth_samples_are_still_kib():
    text = ("j: (groupid=0, jobs=1): err= 0: pid=1: x\n"
            "  read: IOPS=71.3k, BW=292MB/s (279MiB/s)(877MB/3001msec)\n"
            "   bw (  MiB/s): min=  253, max=  287, per=99.19%, avg=276.30, stdev=15.18, samples=5\n"
            "     issued rwts: total=214015,0,0,0 short=0,0,0,0 dropped=0,0,0,0\n")
    r = parse_output(text).jobs[0].directions["read"]
    assert r.bw_samples.mean == pytest.approx(276.30 * 1000 * KIB)  # divided by kb_base=1000, labelled MiB


def test_client_mode_prefixes_probe_version_and_all_clients_block():
    text = ("hostname=vm, be=0, 64-bit, os=Linux, arch=x86-64, fio=fio-3.33, flags=1\n"
            "<vm> j: (g=0): rw=read, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=sync, "
            "iodepth=1\n"
            "<vm> Starting 1 process\n"
            "j: (groupid=0, jobs=1): err= 0: pid=7: x\n"
            "  read: IOPS=1000, BW=4000KiB/s (4096kB/s)(4000KiB/1000msec)\n"
            "     issued rwts: total=1000,0,0,0 short=0,0,0,0 dropped=0,0,0,0\n"
            "All clients: (groupid=0, jobs=2): err= 0: pid=0: x\n"
            "  read: IOPS=2000, BW=7.81MiB/s (8192kB/s)(7.81MiB/1000msec)\n"
            "     issued rwts: total=2000,0,0,0 short=0,0,0,0 dropped=0,0,0,0\n")
    report = parse_output(text)
    assert report.fio_version == "3.33" and [j.name for j in report.jobs] == ["j"]
    assert report.jobs[0].directions["read"].io_bytes == 4096000


def test_numjobs_clones_without_group_reporting_are_kept():
    one = "j: (groupid=0, jobs=1): err= 0: pid={pid}: x\n  read: IOPS=1, BW=1 (1)(1/1000msec)\n" \
          "     issued rwts: total=1,0,0,0 short=0,0,0,0 dropped=0,0,0,0\n"
    report = parse_output(one.format(pid=1) + one.format(pid=2) + "\nRun status group 0 (all jobs):\n")
    assert len(report.jobs) == 2 and report.warnings == ()


# --- errors ------------------------------------------------------------------------------------------------


def test_truncated_line_is_a_parse_error_naming_file_and_line():
    text = (DATA / "fio-3.33_randrw_libaio.normal.txt").read_text()
    cut = text[: text.index("BW=279MiB") + 6]
    with pytest.raises(ParseError, match=r"^libaio\.txt, line 6: cannot read this as fio's direction line"):
        parse_output(cut, "libaio.txt")


def test_bad_percentile_row_is_a_parse_error():
    text = (DATA / "fio-3.33_randrw_libaio.normal.txt").read_text().replace("20.00th=[  119],", "20.00th=[  1")
    with pytest.raises(ParseError, match=r"line 11: cannot read this percentile row"):
        parse_output(text, "x")


def test_latency_line_outside_a_direction_is_a_parse_error():
    text = "j: (groupid=0, jobs=1): err= 0: pid=1: x\n    clat (usec): min=1, max=2, avg=1.50, stdev=0.50\n"
    with pytest.raises(ParseError, match=r"line 2: clat line outside a read/write/trim block"):
        parse_output(text, "x")


def test_no_job_block_is_a_parse_error():
    with pytest.raises(ParseError, match=r"^empty\.txt: no fio job report found"):
        parse_normal("fio-3.33\nStarting 1 process\n", "empty.txt")


# --- format detection in parse_output ------------------------------------------------------------------


def test_json_wins_in_a_json_and_normal_output():
    assert load("fio-3.33_steadystate_json_plus_normal.txt").source_format == "json"


def test_normal_wins_over_terse_in_a_mixed_output():
    terse = (DATA / "fio-3.33_randrw_libaio.terse-v3.txt").read_text()
    normal = (DATA / "fio-3.33_randrw_libaio.normal.txt").read_text()
    assert parse_output(terse + normal).source_format == "normal"


def test_broken_json_falls_back_to_the_normal_part():
    text = (DATA / "fio-3.33_steadystate_json_plus_normal.txt").read_text().replace('"jobs" : [', '"jobs" : [[', 1)
    report = parse_output(text)
    assert report.source_format == "normal" and report.jobs[0].directions["read"].total_ios == 476318


def test_unknown_text_is_a_parse_error_with_a_hint():
    with pytest.raises(ParseError, match=r"^notes\.txt: not a fio output") as info:
        parse_output("hello\nworld\n", "notes.txt")
    assert "--output-format=json" in info.value.hint


# --- options the text shows: header line, latency depth, file layout ---------------------------


@pytest.mark.parametrize(("name", "shown"), [
    ("fio-3.33_randrw_libaio.normal.txt", {"rw": "randrw", "bs": "4k", "ioengine": "libaio", "iodepth": "16"}),
    ("fio-3.16_randrw_posixaio.normal.txt", {"rw": "randrw", "bs": "4k", "ioengine": "posixaio", "iodepth": "16"}),
    ("fio-2.2.8_randrw_posixaio.normal.txt", {"rw": "randrw", "bs": "4k", "ioengine": "posixaio", "iodepth": "16"}),
    # no header line: iodepth from "latency : target=0, …, depth=32", size from "Laying out IO file (… / 2048MiB)"
    ("seed001_local_ssd_fio316.txt", {"iodepth": "32", "size": "2048m"}),
])
def test_shown_options_of_real_outputs(name, shown):
    (job,) = load(name).jobs
    assert job.shown_options == shown and job.job_options == {}


def test_shown_options_per_job_and_group(full):
    seqw, tw, rd, mx = full.jobs
    assert seqw.shown_options == {"rw": "write", "bs": "128k", "ioengine": "psync", "iodepth": "1"}
    # tw and rd each have their own header (jobs=1 blocks are matched by name)
    assert tw.shown_options == {"rw": "trimwrite", "bs": "4k", "ioengine": "psync", "iodepth": "1"}
    assert rd.shown_options["rw"] == "randread"
    assert mx.shown_options == {"rw": "randrw", "bs": "4k", "ioengine": "libaio", "iodepth": "4"}


def test_shown_options_block_sizes_per_direction_ranges_and_abbreviations():
    def shown(bs_part: str) -> dict[str, str]:
        text = (f"j: (g=0): rw=randrw, bs={bs_part}, ioengine=libaio, iodepth=8\n"
                "j: (groupid=0, jobs=1): err= 0: pid=1: x\n  read: IOPS=1000, BW=1 (2)(3MiB/1000msec)\n"
                "     issued rwts: total=1000,0,0,0 short=0,0,0,0 dropped=0,0,0,0\n")
        return dict(parse_output(text, "t").jobs[0].shown_options)

    assert shown("(R) 4096B-4096B, (W) 64.0KiB-64.0KiB, (T) 64.0KiB-64.0KiB")["bs"] == "4k,64k,64k"
    # 1024KiB is printed for 1048064 and 1048576 alike: the roundest is the job file's
    assert shown("(R) 1024KiB-1024KiB, (W) 1024KiB-1024KiB, (T) 1024KiB-1024KiB")["bs"] == "1m"
    # a range cannot tell bsrange from bssplit: bs stays unknown, the rest is kept
    ranged = shown("(R) 4096B-64.0KiB, (W) 4096B-64.0KiB, (T) 4096B-64.0KiB")
    assert "bs" not in ranged and ranged["iodepth"] == "8"
    assert "bs" not in shown("(R) 4096B-4096B, (W) 8192B-8192B, bs_is_seq_rand")
    assert shown("4K-4K/8K-8K/8K-8K")["bs"] == "4k,8k,8k"  # fio 2.x


def test_shown_options_disagreeing_group_members_and_layouts():
    text = ("a: (g=0): rw=read, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=libaio, iodepth=8\n"
            "b: (g=0): rw=read, bs=(R) 8192B-8192B, (W) 8192B-8192B, (T) 8192B-8192B, ioengine=libaio, iodepth=8\n"
            "a: Laying out IO file(s) (1 file(s) / 1024MB)\n"
            "b: Laying out IO files (2 files / total 512MiB)\n"
            "a: (groupid=0, jobs=2): err= 0: pid=1: x\n  read: IOPS=1000, BW=1 (2)(3MiB/1000msec)\n"
            "     issued rwts: total=1000,0,0,0 short=0,0,0,0 dropped=0,0,0,0\n")
    (job,) = parse_output(text, "t").jobs
    # the group holds a (4k) and b (8k): bs is left out, what they share is kept; size is a's
    assert job.shown_options == {"rw": "read", "ioengine": "libaio", "iodepth": "8", "size": "1024m"}
    latency = text.replace("jobs=2", "jobs=1") + \
        "     latency   : target=100000, window=0, percentile=100.00%, depth=3\n"
    assert parse_output(latency, "t").jobs[0].shown_options["iodepth"] == "8"  # header wins; target != 0 ignored
