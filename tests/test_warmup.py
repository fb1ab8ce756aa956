"""Warm-up passes: the plateau rule, and a real warm-up curve with the page cache as the tier in front
of a loop device throttled like an HDD (cgroup v1 blkio), counted from the loop device's diskstats."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import cgroup
from clirun import iolab
from iolab import warmup
from iolab.report import warmup as warmup_report
from iolab.store import Store
from loopdev import MiB, loop_device, requires_loop


def point(n: int, *iops: float, se: float | None = None) -> warmup.PassPoint:
    return warmup.PassPoint(n, tuple(iops), sample_se=se)


def test_a_pass_within_the_noise_of_the_two_before_it_is_warm():
    curve = [point(1, 250), point(2, 19_800), point(3, 20_100), point(4, 20_000), point(5, 20_050)]
    warm = warmup.warm_pass(curve)
    assert warm is not None and (warm.pass_index, warm.plateau_from) == (4, 2)
    assert warm.iops == pytest.approx((19_800 + 20_100 + 20_000 + 20_050) / 4)
    assert warmup.warm_pass(curve[:3]) is None  # pass 3 agrees with pass 2 only
    climbing = [point(i, 1000 * 1.2**i) for i in range(1, 7)]  # +20 % a pass: never within 5 %
    assert warmup.warm_pass(climbing) is None
    flat = [point(1, 250), point(2, 251), point(3, 249)]  # no cache at all: flat, so warm at once
    assert warmup.warm_pass(flat).pass_index == 3  # type: ignore[union-attr]


def test_noise_is_the_larger_of_five_percent_and_two_standard_errors():
    a, b = point(1, 100), point(2, 108)
    assert not warmup.within_noise(a, b)  # 8 % apart, no spread known
    assert warmup.within_noise(point(1, 100, se=3.0), point(2, 108, se=3.0))  # 2·√18 = 8.5 ≥ 8
    assert warmup.within_noise(point(1, 90, 110), point(2, 112, 96))  # repeats: means 100 and 104
    assert not warmup.within_noise(point(1, 100), warmup.PassPoint(2, (None,)))


@requires_loop
@pytest.mark.root
@pytest.mark.skipif(cgroup.unavailable_reason() is not None, reason=cgroup.unavailable_reason() or "")
def test_a_page_cache_in_front_of_a_throttled_device_warms_up(tmp_path):
    """Buffered reads of a loop device capped at 250 IOPS: pass 1 reads from the "HDD" (its
    diskstats count every I/O fio issued: hit ratio 0), later passes from memory (hit ratio 1). A
    block device's page cache lives while the device is open, so the first configuration holds it
    open, as a mounted filesystem would; the second does not, and its cache never warms. fio's
    rate_iops (2000, 8× the device's cap) makes a pass from memory last a quarter of a second, long
    enough for fio's millisecond runtime and a busy machine to measure it steadily (fio catches up
    with its rate after a hiccup)."""
    db = tmp_path / "db.sqlite"
    with loop_device(tmp_path, 64 * MiB) as loop, cgroup.throttled(loop.path, iops=250) as group:
        suite = tmp_path / "page-cache.yaml"
        suite.write_text(
            f"name: page-cache\ntargets: {{hdd: {loop.path}}}\npasses: 4\ndrop_caches: true\n"
            f"tiers: {{origin: {loop.path}}}\n"
            "defaults: {ioengine: psync, direct: 0, invalidate: 0, size: 2m, rate_iops: 2000}\n"
            "workloads:\n  - {name: reread, rw: randread, bs: 4k}\n")
        with open(loop.path, "rb"):
            cached = iolab("run", str(suite), "--label", "cached", db=db, wrapper=group.wrapper())
        uncached = iolab("run", str(suite), "--label", "uncached", db=db, wrapper=group.wrapper())
    assert cached.returncode == 0 and uncached.returncode == 0, cached.stderr + uncached.stderr
    text = " ".join(cached.stdout.split())
    assert "warm-up: 4 passes" in text and "warm at pass 4 (within the noise of passes 2–3)" in text, cached.stdout
    store = Store(f"sqlite:///{db}")
    (curve,) = warmup.curves([store.get_run(1)])
    first, *later = curve.points
    assert first.iops == pytest.approx(250, rel=0.2) and first.hit_ratio is not None and first.hit_ratio <= 0.02
    assert first.origin_values == first.issued_values == (512,)  # every read reached the throttled device
    assert all(p.hit_ratio is not None and p.hit_ratio >= 0.98 and p.iops > 5 * first.iops for p in later)
    assert curve.warm is not None and curve.warm.pass_index == 4 and curve.warm.hit_ratio >= 0.98
    (cold,) = warmup.curves([store.get_run(2)])
    assert all(p.hit_ratio is not None and p.hit_ratio <= 0.02 for p in cold.points)
    compared = iolab("compare", "cached", "uncached", "--metric", "iops", db=db)
    assert compared.returncode == 0, compared.stderr
    text = " ".join(compared.stdout.split())
    assert "Warm-up curves" in text and "cached warm at pass 4" in text and "uncached warm at pass 3" in text
    assert "IOPS cached IOPS uncached ratio" in text  # two sides: the other one is named in the headers
    assert re.search(r"warm IOPS uncached/cached ×0\.1[23]\d", text), text  # 250 / 2000
    document = json.loads(iolab("show", "cached", "--format", "json", db=db).stdout)
    assert [row["pass"] for row in document["summary"]] == [1, 2, 3, 4]
    (doc_curve,) = document["warmup"]
    assert doc_curve["warm"]["pass"] == 4 and doc_curve["passes"][0]["origin_ios"] == [512]
    report = tmp_path / "report.html"
    assert iolab("report", "cached", "uncached", "-o", str(report), db=db).returncode == 0
    html = report.read_text()
    assert all(f'data-chart="{name}"' in html for name in ("warmup-iops", "warmup-p99", "warmup-hit-ratio"))
    assert warmup_report.comparison_table([("cached", [store.get_run(1)]), ("uncached", [store.get_run(2)])])


def test_suite_keys_say_where_they_are_wrong(tmp_path: Path):
    proc = iolab("run", str(_suite(tmp_path, "passes: 0\ntiers: {origin: a/b}\n")), "--dry-run", db=tmp_path / "db")
    assert proc.returncode == 2
    assert "suite.yaml:2: passes: expected a whole number of passes 1..1000, got 0" in proc.stderr
    assert "suite.yaml:3: tiers.origin: 'a/b' is neither a /dev path nor a kernel device name" in proc.stderr
    proc = iolab("run", str(_suite(tmp_path, "")), "--passes", "3", "--tier", "origin", "--dry-run", db=tmp_path / "db")
    assert proc.returncode == 2 and "--tier 'origin': expected NAME=DEVICE" in proc.stderr


def _suite(tmp_path: Path, keys: str) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(f"name: x\n{keys}workloads: [{{rw: randread, size: 1m}}]\n")
    return path
