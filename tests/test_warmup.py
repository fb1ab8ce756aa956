"""Warm-up passes: the plateau rule, and a real warm-up curve with the page cache as the tier in front
of a loop device throttled like an HDD (cgroup v1 blkio), counted from the loop device's diskstats."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import cgroup
from clirun import iolab
from iolab.analyze import warmup
from iolab.report import warmup as warmup_report
from iolab.report.table import read_csv, to_csv
from iolab.store.database import Store
from loopdev import MiB, loop_device, requires_loop


def point(n: int, *iops: float, se: float | None = None) -> warmup.PassPoint:
    return warmup.PassPoint(n, tuple(iops), sample_se=se)


def test_warm_is_the_end_of_the_first_window_shown_flat_and_averages_only_the_plateau():
    curve = [point(1, 250), point(2, 19_990), point(3, 20_010), point(4, 20_000), point(5, 20_005)]
    warm = warmup.warm_pass(curve)
    assert warm is not None and (warm.pass_index, warm.plateau_from) == (4, 2)
    assert warm.iops == pytest.approx((19_990 + 20_010 + 20_000 + 20_005) / 4)  # pass 1 never averaged in
    assert warm.trend is not None and warm.trend.change_ci is not None
    assert -0.05 <= warm.trend.change_ci[0] <= warm.trend.change_ci[1] <= 0.05
    assert warmup.warm_pass(curve[:3]) is None  # the window 1–3 holds the cold pass
    climbing = [point(i, 1000 * 1.2**i) for i in range(1, 7)]  # +20 % a pass: never flat
    assert warmup.warm_pass(climbing) is None


def test_noise_is_not_a_plateau():
    """The issue's passes, one repetition each: 124,723 → 311,675 → 204,321 IOPS is not warm (before,
    pass 3 was 'within the noise' of the two before it by fio's per-interval samples)."""
    noisy = [point(1, 124_723, se=60_000), point(2, 311_675, se=90_000), point(3, 204_321, se=80_000)]
    assert warmup.warm_pass(noisy) is None
    curve = warmup.Curve("dev", "w", "w", "read", tuple(noisy))
    assert "not warm after 3 pass(es): passes 1–3 change by" in warmup_report.describe_warm(curve)
    # three single passes 2 % apart: plausible, but one degree of freedom cannot show it flat
    close = [point(1, 100_000), point(2, 102_000), point(3, 100_500)]
    assert warmup.warm_pass(close) is None
    assert "--repeat 3 narrows it" in warmup_report.describe_warm(warmup.Curve("d", "w", "w", "read", tuple(close)))
    # the same passes with three repetitions each, as steady as that: warm
    repeated = [point(1, 100_000, 101_000, 99_500), point(2, 100_800, 99_900, 100_200),
                point(3, 100_300, 99_800, 100_600)]
    assert warmup.warm_pass(repeated) is not None
    # a V (down then back up) with tight repetitions: no trend, but pass 2 is 10 % off: not flat
    vee = [point(1, 100, 100.5, 99.5), point(2, 90, 90.5, 89.5), point(3, 100, 100.5, 99.5)]
    assert warmup.warm_pass(vee) is None


def test_a_capped_device_after_a_cold_pass_is_warm_only_from_its_plateau():
    """The issue's rate-capped passes: a cold pass, then 2,000 IOPS (fio's rate_iops) three times. Warm
    at pass 4 over passes 2–4; the warm p99 is the plateau's (~6 µs), not pulled up by the cold pass."""
    cold = warmup.PassPoint(1, (255.0,), (92_300_000.0,))
    capped = [warmup.PassPoint(n, (2000.0 - n / 10,), (6_000.0,)) for n in (2, 3, 4)]
    warm = warmup.warm_pass([cold, *capped])
    assert warm is not None and (warm.pass_index, warm.plateau_from) == (4, 2)
    assert warm.p99_ns == pytest.approx(6_000) and warm.iops == pytest.approx(1999.7, rel=1e-3)
    single = warmup.warm_pass([warmup.PassPoint(1, (2000.0,))])
    assert single is None and warmup.trend([warmup.PassPoint(1, (2000.0,))]) is None


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
    store = Store(f"sqlite:///{db}")
    (curve,) = warmup.curves([store.get_run(1)])
    first, *later = curve.points
    # fio keeps rate_iops=2000 from memory unless the machine is too busy to: then three single passes
    # a few percent apart are not shown flat, and the table says so rather than calling them warm
    steady = curve.warm is not None
    assert "warm-up: 4 passes" in text
    if steady:
        assert "warm at pass 4: passes 2–4 change by" in text and "within ±5%; mean of passes 2–4:" in text, text
    else:
        assert "not warm after 4 pass(es): passes 2–4 change by" in text, text
    assert curve.warm is None or curve.warm.plateau_from >= 2  # the cold pass is never averaged in
    assert first.iops == pytest.approx(250, rel=0.2) and first.hit_ratio is not None and first.hit_ratio <= 0.02
    assert first.origin_values == first.issued_values == (512,)  # every read reached the throttled device
    assert all(p.hit_ratio is not None and p.hit_ratio >= 0.98 and p.iops > 5 * first.iops for p in later)
    assert not steady or (curve.warm is not None and curve.warm.pass_index == 4 and curve.warm.hit_ratio >= 0.98)
    (cold,) = warmup.curves([store.get_run(2)])
    assert all(p.hit_ratio is not None and p.hit_ratio <= 0.02 for p in cold.points)
    compared = iolab("compare", "cached", "uncached", "--metric", "iops", db=db)
    assert compared.returncode == 0, compared.stderr
    text = " ".join(compared.stdout.split())
    assert "Warm-up curves" in text and ("cached warm at pass 4" in text or not steady)
    assert "IOPS cached IOPS uncached ratio" in text  # two sides: the other one is named in the headers
    assert re.search(r"warm IOPS uncached/cached ×0\.1[23]\d", text), text  # 250 / 2000
    document = json.loads(iolab("show", "cached", "--format", "json", db=db).stdout)
    assert [row["pass"] for row in document["summary"]] == [1, 2, 3, 4]
    (doc_curve,) = document["warmup"]
    assert (not steady or doc_curve["warm"]["pass"] == 4) and doc_curve["passes"][0]["origin_ios"] == [512]
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


@requires_loop
@pytest.mark.root
def test_the_hit_ratio_of_a_tier_that_is_the_target_itself(tmp_path):
    """The issue's command: direct reads of a loop device named as its own origin. With ramp_time the
    device counts the ramp and fio does not: no hit ratio, and the cell says why (it printed −4.7 %,
    −50.7 %, −80.4 % before). Without ramp_time every I/O fio issued reached the device: 0 %."""
    db = tmp_path / "db.sqlite"
    job = tmp_path / "warm.fio"
    with loop_device(tmp_path, 16 * MiB) as loop:
        for ramp in ("1s", "0"):
            job.write_text(f"[global]\nioengine=libaio\ndirect=1\nramp_time={ramp}\nruntime=1s\ntime_based=1\n"
                           "size=8m\nrandrepeat=0\n[warm]\nrw=randread\nbs=4k\niodepth=4\n")
            proc = iolab("run", str(job), "--target", f"dev={loop.path}", "--destroy", loop.path, "--passes", "3",
                         "--tier", f"origin={loop.path}", "--label", f"ramp{ramp}", db=db)
            assert proc.returncode == 0, proc.stderr
    store = Store(f"sqlite:///{db}")
    (curve,) = warmup.curves([store.get_run(1)])
    assert all(p.hit_ratio is None and p.hit_problems == ("ramp_time counted by the device, not by fio",)
               for p in curve.points)
    table = warmup_report.warmup_table(store.get_run(1))
    assert table is not None and table.columns[6].title == "hit ratio"
    assert {row[6].text for row in table.rows} == {"n/a: ramp_time counted by the device, not by fio"}
    (_, (header, *rows)), = read_csv(to_csv([table]))  # CSV: no number, and the reason in its own column
    assert {(r[header.index("hit_ratio")], r[header.index("hit_ratio_problem")]) for r in rows} == {
        ("", "ramp_time counted by the device, not by fio")}
    (itself,) = warmup.curves([store.get_run(2)])
    for p in itself.points:  # udev or another reader may add a few I/Os to the device: then n/a, never < 0
        assert (p.hit_ratio is not None and 0 <= p.hit_ratio <= 0.001) or p.hit_problems, p
