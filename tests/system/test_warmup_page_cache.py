"""A real warm-up curve: the page cache as the tier in front of a loop device throttled like an HDD
(cgroup v1 blkio), counted from the loop device's diskstats. Its IOPS are the throttle's and the
machine's (fio's rate from memory): it runs alone. The plateau rule itself is
tests/unit/analyze/test_warmup.py's."""

from __future__ import annotations

import json
import re

import pytest

import cgroup
from clirun import iolab
from iolab.analyze import warmup
from iolab.report import warmup as warmup_report
from iolab.store.database import Store
from loopdev import MiB, loop_device, requires_loop


@pytest.mark.alone  # passes from the page cache at 2,000 IOPS need the CPU: 5 busy workers once held them under 5x
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
    assert all(p.hit_ratio is not None and p.hit_ratio >= 0.98 and p.iops > 5 * first.iops for p in later), [
        (p.iops, p.hit_ratio) for p in curve.points]
    assert not steady or (curve.warm is not None and curve.warm.pass_index == 4 and curve.warm.hit_ratio >= 0.98)
    (cold,) = warmup.curves([store.get_run(2)])
    assert all(p.hit_ratio is not None and p.hit_ratio <= 0.02 for p in cold.points)
    compared = iolab("compare", "cached", "uncached", "--metric", "iops", db=db)
    assert compared.returncode == 0, compared.stderr
    text = " ".join(compared.stdout.split())
    assert "Warm-up curves" in text and ("cached warm at pass 4" in text or not steady)
    assert "IOPS cached IOPS uncached ratio" in text  # two sides: the other one is named in the headers
    if steady:
        assert re.search(r"warm IOPS uncached/cached ×0\.1[23]\d", text), text  # 250 / 2000
    else:  # no warm value on the cached side to set beside the other: each later pass's ratio says it
        assert len(re.findall(r"reread read [234] [\d.]+ [\d.]+ ×0\.1[23]\d? ", text)) == 3, text
    document = json.loads(iolab("show", "cached", "--format", "json", db=db).stdout)
    assert [row["pass"] for row in document["summary"]] == [1, 2, 3, 4]
    (doc_curve,) = document["warmup"]
    assert (not steady or doc_curve["warm"]["pass"] == 4) and doc_curve["passes"][0]["origin_ios"] == [512]
    report = tmp_path / "report.html"
    assert iolab("report", "cached", "uncached", "-o", str(report), db=db).returncode == 0
    html = report.read_text()
    assert all(f'data-chart="{name}"' in html for name in ("warmup-iops", "warmup-p99", "warmup-hit-ratio"))
    assert warmup_report.comparison_table([("cached", [store.get_run(1)]), ("uncached", [store.get_run(2)])])
