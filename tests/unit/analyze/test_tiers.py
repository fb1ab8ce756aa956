"""Tier accounting (``iolab.tiers``): the kernel's dm-cache status lines and bcache files as they are
printed, diskstats, and the hit ratio over stored counters.

The dm-cache lines are in the format of Documentation/admin-guide/device-mapper/cache.rst ("Status"),
as ``cache_status()`` in drivers/md/dm-cache-target.c prints it; each is a line ``dmsetup status``
printed on a real system, as published with the tool named beside it. This machine's kernel has no
device-mapper or bcache to produce them. A snapshot of this machine's counters (a loop device) is
tests/integration/test_tiers.py's.
"""

from __future__ import annotations

import pytest

from iolab.analyze import tiers
from iolab.describe.tiers import Tier, local_tiers, parse_tier
from iolab.model import DirectionStats, FioReport, JobResult, ResultRecord

MiB = 1024**2

#: lvmcache on kernel 5.x, smq policy (``dmsetup status /dev/vg01/data01`` in a blog post on lvmcache).
SMQ = ("0 8388608 cache 8 86/128000 512 784/36864 200 67 1018 0 0 784 0 1 writeback 2 migration_threshold 2048 "
       "smq 0 rw -")
#: ``dmsetup status`` of all devices (a name before each line), kernel 3.x with the mq policy and no
#: metadata mode yet (telegraf's dmcache plugin tests).
MQ = ("cs-1: 0 4883791872 cache 8 1018/1501122 512 7/464962 139 352643 15 46 0 7 0 1 writeback 2 "
      "migration_threshold 2048 mq 10 random_threshold 4 sequential_threshold 512 discard_promote_adjustment 1 "
      "read_promote_adjustment 4 write_promote_adjustment 8")
#: A busy lvmcache (a Puppet fact's comment): every cache block used, millions of hits.
BUSY = ("vg_jaina-local: 0 3408953344 cache 8 4377/524288 128 1460096/1460096 9124416 8452889 245665983 18318430 "
        "62445 62445 1875 1 writeback 2 migration_threshold 2048 smq 0 rw -")


def test_dm_cache_status_lines_read_field_by_field():
    ((name, s),) = tiers.parse_dmcache_status(SMQ)
    assert name is None
    assert (s.metadata_block_sectors, s.metadata_used, s.metadata_total) == (8, 86, 128000)
    assert (s.block_sectors, s.used_blocks, s.total_blocks) == (512, 784, 36864)
    assert (s.read_hits, s.read_misses, s.write_hits, s.write_misses) == (200, 67, 1018, 0)
    assert (s.demotions, s.promotions, s.dirty) == (0, 784, 0)
    assert (s.features, dict(s.core_args), s.policy, s.metadata_mode, s.needs_check) == (
        ("writeback",), {"migration_threshold": "2048"}, "smq", "rw", False)
    ((name, old),) = tiers.parse_dmcache_status(MQ)
    assert name == "cs-1" and old.policy == "mq" and old.policy_args["sequential_threshold"] == "512"
    assert old.metadata_mode is None and (old.read_hits, old.read_misses) == (139, 352643)
    ((name, busy),) = tiers.parse_dmcache_status(BUSY)
    assert name == "vg_jaina-local" and busy.used_blocks == busy.total_blocks == 1460096 and busy.dirty == 1875


def test_dm_cache_features_flags_and_other_targets():
    # metadata2 and no_discard_passdown are features of newer kernels (emit_flags in dm-cache-target.c)
    line = ("0 1048576 cache 8 3/4096 64 20/2048 100 20 30 4 0 20 0 3 metadata2 writethrough no_discard_passdown 2 "
            "migration_threshold 2048 smq 0 ro needs_check")
    ((_, s),) = tiers.parse_dmcache_status(line)
    assert s.features == ("metadata2", "writethrough", "no_discard_passdown") and s.metadata_mode == "ro"
    assert s.needs_check
    ((_, failed),) = tiers.parse_dmcache_status("0 1048576 cache Fail")
    assert failed.failed
    mixed = f"root: 0 41943040 linear 253:0 2048\n{MQ}\npool: 0 20971520 thin-pool 1 0/1024 0/160 - rw no_discard"
    assert [n for n, _ in tiers.parse_dmcache_status(mixed)] == ["cs-1"]
    with pytest.raises(ValueError, match="not a dm-cache status"):
        tiers.parse_dmcache_status("0 8388608 cache 8 86/128000 512")


def test_dm_cache_counters_over_a_job_wrap_at_32_bits():
    before = SMQ.replace(" 200 67 1018 0 0 784 0 ", " 4294967290 60 1000 0 0 780 0 ")
    counters = tiers.dmcache_counters("dm-3", before, SMQ)
    assert counters.increases == {"read_hits": 206, "read_misses": 7, "write_hits": 18, "write_misses": 0,
                                  "promotions": 4, "demotions": 0}
    assert counters.gauges == {"dirty": 0, "used_blocks": 784, "total_blocks": 36864}
    assert counters.source.startswith("Documentation/admin-guide/device-mapper/cache.rst")
    assert tiers.dmcache_counters("dm-3", None, "0 1 cache Fail").problem == "the cache reports 'Fail'"


def test_bcache_files_and_sizes_as_bch_hprint_prints_them():
    # values of a bcache backing device (telegraf's bcache plugin tests); sizes in bch_hprint's units
    after = {"cache_hits": "511469583", "cache_misses": "50616331", "cache_bypass_hits": "146155333",
             "cache_bypass_misses": "0", "cache_miss_collisions": "157567", "cache_readaheads": "2",
             "bypassed": "4.7T", "dirty_data": "1.5G"}
    stats = tiers.parse_bcache(after)
    assert stats.counters["cache_hits"] == 511469583 and stats.dirty_bytes == 3 * 512 * MiB
    before = {**after, "cache_hits": "511469000", "cache_misses": "50616300", "bypassed": "4.6T"}
    counters = tiers.bcache_counters("bcache0", before, after)
    assert counters.increases["cache_hits"] == 583 and counters.increases["cache_misses"] == 31
    assert counters.increases["bypassed_bytes"] == pytest.approx(1024**4 / 10, abs=1)
    assert counters.gauges == {"dirty_bytes": 1610612736}
    assert [tiers.parse_hprint(t) for t in ("0.5k", "512", "11.1M", "-1.0k")] == [512, 512, 11639193, -1024]
    assert tiers.parse_bcache({"cache_hits": "x", "dirty_data": "lots"}) == tiers.BcacheStats({}, None, None)


def test_diskstats_lines_of_old_and_new_kernels():
    new = "  1024 0 8192 3950 5 0 40 2 0 3964 3953 7 0 56 0 3 1"
    assert tiers.parse_block_stat(new) == tiers.DiskCounters(1024, 8192, 5, 40, 7, 56)
    assert tiers.parse_block_stat("1 2 3 4 5 6 7 8 9 10 11") == tiers.DiskCounters(1, 3, 5, 7)
    with pytest.raises(ValueError):
        tiers.parse_block_stat("1 2 3")


def _result(extra: dict, reads: int = 1024, job_text: str = "[j]\nrw=randread\n") -> ResultRecord:
    report = FioReport("json", (JobResult("j", directions={"read": DirectionStats("read", total_ios=reads)}),))
    return ResultRecord(1, 1, 0, "hdd", "w", 0, "ok", job_text, "h", report=report, extra=extra)


def test_hit_ratio_is_one_minus_origin_ios_over_fio_ios():
    stored = {"devices": {"origin": "loop3", "target": "dm-3"},
              "before": {"stat": {"loop3": "100 0 800 0 0 0 0 0 0 0 0"}, "dm_cache": {"dm-3": SMQ.replace(
                  " 200 67 ", " 100 17 ")}},
              "after": {"stat": {"loop3": "356 0 2848 0 0 0 0 0 0 0 0"}, "dm_cache": {"dm-3": SMQ}}}
    found = tiers.accounting(_result({"tiers": stored}), [parse_tier("origin", "/dev/loop3")])
    assert found is not None
    (origin,) = found.tiers
    assert (origin.device, origin.source, origin.reads, origin.read_bytes) == ("loop3", "sysfs", 256, 2048 * 512)
    assert found.issued == {"read": 1024} and found.hit_ratio == {"read": 0.75}
    (cache,) = found.caches
    assert cache.increases["read_hits"] == 100 and cache.increases["read_misses"] == 50
    ramped = tiers.accounting(_result({"tiers": stored}, job_text="[j]\nramp_time=2s\n"),
                              [parse_tier("origin", "/dev/loop3")])
    assert ramped is not None and "include its ramp_time" in ramped.notes[0]
    assert ramped.hit_ratio == {"read": None} and ramped.hit_problems == {"read": tiers.RAMP}  # never 75 % or < 0
    for job_text, noted in (("[global]\nramp_time=1\n[j]\n", True), ("[j]\nramp_time=0s\n", False)):
        again = tiers.accounting(_result({"tiers": stored}, job_text=job_text), [parse_tier("origin", "loop3")])
        assert again is not None and bool(again.notes) == noted, job_text
    assert tiers.accounting(_result({}), [parse_tier("origin", "sdb")]) is None


def test_a_hit_ratio_is_never_negative_nor_above_one():
    """Read-ahead or other I/O on the origin (2,000 reads for fio's 1,024): no ratio, and why; a tier
    that is the target itself, counting exactly fio's I/Os: 0; nothing reached the origin: 1."""
    origin = [parse_tier("origin", "/dev/loop3")]
    for after, ratio, problem in (("2100 0 0 0 0 0 0 0 0 0 0", None, tiers.MORE),
                                  ("1124 0 0 0 0 0 0 0 0 0 0", 0.0, None), ("100 0 0 0 0 0 0 0 0 0 0", 1.0, None)):
        stored = {"devices": {"origin": "loop3"}, "before": {"stat": {"loop3": "100 0 0 0 0 0 0 0 0 0 0"}},
                  "after": {"stat": {"loop3": after}}}
        found = tiers.accounting(_result({"tiers": stored}), origin)
        assert found is not None and found.hit_ratio == {"read": ratio}, after
        assert found.hit_problems == ({"read": problem} if problem else {})


def test_tier_specs():
    assert parse_tier("disk", "dm-3@nvmet") == Tier("disk", "dm-3", "nvmet")
    assert parse_tier("origin", "/dev/sdb").spec() == "/dev/sdb"
    for name, spec in (("o k", "sdb"), ("origin", ""), ("origin", "a/b"), ("origin", "sdb@")):
        with pytest.raises(ValueError):
            parse_tier(name, spec)
    assert local_tiers([Tier("a", "sdb"), Tier("b", "sdc", "local"), Tier("c", "sdd", "x")],
                             remote_target=True) == [Tier("b", "sdc", "local")]
