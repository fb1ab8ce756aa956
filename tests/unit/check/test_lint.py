"""Lint rules P1–P16: each fires on a constructed job and stays silent on the fixed one; every fio
example lints; a plan on a file (fio's checks replayed). A plan on a loop device is
tests/integration/test_lint.py's, the command tests/cli/test_lint.py's."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from iolab.check import lint
from iolab.describe import suite as suite_mod
from iolab.model import BlockDeviceFacts, HostFacts, IdleState, ResultRecord, Run, RunInfo, TargetFacts
from iolab.run.plan import RunOptions, prepare
from iolab.runner import optionnames


@pytest.fixture(autouse=True)
def _keep_dev_null(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recording (IOLAB_RECORD=1) asks real fio about the examples' aliases and engines, and
    ``optionnames._save`` would write its cache through a temporary file renamed over the fake's cache
    file, ``os.devnull``: /dev/null replaced by a regular file. The fake keeps what fio said in
    machine.json; no cache file here."""
    monkeypatch.setattr(optionnames, "_save", lambda known: None)


GiB = 1024**3
TiB = 1024**4
HOST = HostFacts(cpu_count=4, memory_bytes=16 * GiB, cpu_governor=None, virtualization="kvm")
SSD = BlockDeviceFacts(name="nvme0n1", path="/dev/nvme0n1", size_bytes=TiB, rotational=False)
BLOCK = TargetFacts(path="/dev/nvme0n1", kind="block", size_bytes=TiB, device=SSD)
FILE_ON_SSD = TargetFacts(path="/mnt/ssd/test.bin", kind="file", size_bytes=2 * GiB, fs_type="ext4", device=SSD)
GOOD = {"ioengine": "libaio", "direct": "1", "rw": "randread", "bs": "4k", "iodepth": "32", "size": "100%",
        "time_based": None, "runtime": "300s", "ramp_time": "30s", "randrepeat": "0"}


def ctx(target: TargetFacts | None = BLOCK, host: HostFacts = HOST, **options: str | None) -> lint.JobContext:
    """A context for a good job (no finding) on the SSD, with ``options`` changed (None removes)."""
    opts = {**GOOD, **options}
    opts = {k: v for k, v in opts.items() if v != "<unset>"}
    return lint.JobContext(where="w on t", options=opts, host=host, target=target, preconditioned=True,
                           written_before=True)


def ids(context: lint.JobContext) -> list[str]:
    return [f.id for f in lint.check([context])]


def test_a_good_job_has_no_findings() -> None:
    assert ids(ctx()) == []


def test_p1_working_set_vs_ram_and_device() -> None:
    buffered = lint.p1_working_set(ctx(direct="0", size="8g"))
    assert [f.id for f in buffered] == ["P1", "P1"]  # page cache and a small region of the device
    assert "4× RAM (16.00 GiB)" in buffered[0].message and "64.00 GiB" in buffered[0].remedy
    small = lint.p1_working_set(ctx(FILE_ON_SSD, size="2g"))
    assert len(small) == 1 and "0.2 % of the device (1.00 TiB)" in small[0].message
    assert lint.p1_working_set(ctx(size="50%")) == []
    assert lint.p1_working_set(ctx(direct="0", size="100%")) == []  # 1 TiB >> 4 × 16 GiB
    # A directory target: each numjobs clone has its own file.
    directory = TargetFacts(path="/mnt/ssd", kind="directory", device=replace(SSD, size_bytes=100 * GiB))
    assert lint.p1_working_set(ctx(directory, size="4g", numjobs="4")) == []
    assert len(lint.p1_working_set(ctx(directory, size="4g", numjobs="1"))) == 1


def test_p2_buffered_device_and_libaio() -> None:
    found = lint.p2_buffered(ctx(direct="<unset>"))
    assert [f.id for f in found] == ["P2", "P2"]
    assert "block device /dev/nvme0n1" in found[0].message and "iodepth=32 behaves like 1" in found[1].message
    assert lint.p2_buffered(ctx(direct="<unset>", buffered="0")) == []
    assert lint.p2_buffered(ctx(FILE_ON_SSD, direct="0", ioengine="io_uring")) == []  # a file-system test


def test_p3_runtime() -> None:
    (found,) = lint.p3_runtime(ctx(runtime="10s"))
    assert "10s is under 60 s" in found.message and "burst" not in found.message
    cloud = lint.p3_runtime(ctx(host=replace(HOST, virtualization="amazon"), runtime="30"))
    assert "burst credits" in cloud[0].message
    assert lint.p3_runtime(ctx(runtime="1m")) == [] and lint.p3_runtime(ctx(runtime="<unset>")) == []


def test_p4_ramp() -> None:
    assert [f.id for f in lint.p4_ramp(ctx(ramp_time="<unset>"))] == ["P4"]
    assert [f.id for f in lint.p4_ramp(ctx(ramp_time="0"))] == ["P4"]
    assert lint.p4_ramp(ctx(ramp_time="5s")) == [] and lint.p4_ramp(ctx(ramp_time="${RAMP}")) == []
    assert lint.p4_ramp(ctx(ioengine="null", ramp_time="<unset>")) == []
    assert lint.p4_ramp(ctx(ramp_time="<unset>", read_iolog="/x/bs-4k.iolog")) == []  # a ramp drops the trace's start


def test_p5_compressible() -> None:
    (found,) = lint.p5_compressible(ctx(rw="randwrite", zero_buffers=None, dedupe_percentage="30"))
    assert "zero_buffers, dedupe_percentage=30" in found.message
    assert lint.p5_compressible(ctx(rw="write", buffer_compress_percentage="50"))
    assert lint.p5_compressible(ctx(rw="randwrite", buffer_compress_percentage="0")) == []
    assert lint.p5_compressible(ctx(rw="randread", zero_buffers=None)) == []  # nothing written


def test_p6_more_jobs_than_cpus() -> None:
    many = replace(ctx(numjobs="8"), concurrent=8)
    (found,) = lint.p6_cpus(many)
    assert found.severity == lint.WARNING and "8 fio jobs run at once on 4 usable CPU(s)" in found.message
    assert lint.p6_cpus(replace(many, concurrent=4)) == []
    # a timed replay's jobs sleep until their logged times; replayed as fast as possible they compete
    assert lint.p6_cpus(replace(ctx(read_iolog="/x/bs-4k.iolog"), concurrent=8)) == []
    assert lint.p6_cpus(replace(ctx(read_iolog="/x/bs-4k.iolog", replay_no_stall="1"), concurrent=8))
    pinned = replace(ctx(cpus_allowed="0-1", cpus_allowed_policy="split"), concurrent=4)
    assert "on 2 usable CPU(s)" in lint.p6_cpus(pinned)[0].message
    # Concurrency is counted per stonewall group, sqthread_poll adds a thread per job.
    sections = [("a", {"numjobs": "2"}), ("b", {"numjobs": "2", "sqthread_poll": "1"}), ("c", {"stonewall": None})]
    assert lint._concurrency(sections) == [6, 6, 1]


def test_p7_iodepth_with_sync_engine() -> None:
    (found,) = lint.p7_sync_depth(ctx(ioengine="<unset>", iodepth="16"))
    assert "ioengine=psync (fio's default engine)" in found.message
    assert lint.p7_sync_depth(ctx(ioengine="pvsync2", iodepth="1")) == []
    assert lint.p7_sync_depth(ctx(ioengine="io_uring", iodepth="16")) == []


def test_p8_ssd_not_preconditioned() -> None:
    fresh = replace(ctx(rw="randwrite"), preconditioned=False)
    assert [f.id for f in lint.p8_precondition(fresh)] == ["P8"]
    assert lint.p8_precondition(replace(fresh, preconditioned=True)) == []
    hdd = replace(BLOCK, device=replace(SSD, rotational=True))
    assert lint.p8_precondition(replace(fresh, target=hdd)) == []
    assert lint.p8_precondition(replace(ctx(rw="randread"), preconditioned=False)) == []


def test_p9_reading_never_written_blocks() -> None:
    unwritten = replace(ctx(), written_before=False)
    assert "read before anything in the plan writes it" in lint.p9_unwritten(unwritten)[0].message
    assert lint.p9_unwritten(replace(ctx(rw="randwrite"), written_before=False)) == []
    sparse = replace(ctx(FILE_ON_SSD, size="<unset>"), written_before=False, allocated_bytes=GiB // 2)
    assert "is sparse" in lint.p9_unwritten(sparse)[0].message
    assert lint.p9_unwritten(replace(sparse, allocated_bytes=2 * GiB)) == []


def test_p11_unlike_params_and_runs() -> None:
    same = {"rw": "randread", "size": "1g"}
    assert lint.unlike_params("w", {"a": same, "b": same}) == []
    assert lint.unlike_params("w", {"a": same, "b": {**same, "tune.scheduler": "none"}}) == []
    (found,) = lint.unlike_params("w", {"a": same, "b": {**same, "size": "8g"}})
    assert "(size 1g vs 8g)" in found.message

    def run(run_id: int, fio: str, kernel: str, model: str) -> Run:
        facts = TargetFacts(path="/dev/x", kind="block", device=replace(SSD, model=model))
        result = ResultRecord(id=run_id, run_id=run_id, seq=0, target="ssd", workload="w", repeat=0, status="ok",
                              job_text="", job_hash="h", target_facts=facts)
        info = RunInfo(id=run_id, created_at=datetime.now(UTC), status="complete", origin="run", suite_name="s",
                       fio_version=fio, host=replace(HOST, kernel=kernel))
        return Run(info, (result,))

    assert lint.unlike_runs(run(1, "3.33", "6.1", "A"), run(2, "3.33", "6.1", "A")) == []
    found = lint.unlike_runs(run(1, "3.33", "6.1", "A"), run(2, "3.36", "6.1", "B"))
    assert [f.message.split(": ")[0] for f in found] == ["run 1 and run 2 differ in fio version",
                                                          "run 1 and run 2 differ in device of target ssd"]


def test_p12_randrepeat() -> None:
    buffered = ctx(FILE_ON_SSD, randrepeat="<unset>", direct="0")
    assert "page cache" in lint.p12_randrepeat(buffered)[0].message
    assert "3 repetitions" in lint.p12_randrepeat(replace(ctx(randrepeat="1"), repeats=3))[0].message
    assert lint.p12_randrepeat(ctx(randrepeat="<unset>")) == []  # direct, once
    assert lint.p12_randrepeat(replace(ctx(randrepeat="<unset>", randseed="42"), repeats=3)) == []
    assert lint.p12_randrepeat(replace(ctx(rw="read", randrepeat="<unset>"), repeats=3)) == []


def test_p13_per_io_logging() -> None:
    (found,) = lint.p13_logging(ctx(write_lat_log="lat", write_iops_log="iops"))
    assert found.message.startswith("write_iops_log, write_lat_log without log_avg_msec")
    assert lint.p13_logging(ctx(write_lat_log="lat", log_avg_msec="1000")) == []


def test_p14_verify_with_norandommap() -> None:
    bad = ctx(rw="randwrite", verify="crc32c", norandommap=None)
    (found,) = lint.p14_verify_norandommap(bad)
    assert found.severity == lint.WARNING
    assert lint.p14_verify_norandommap(ctx(rw="randwrite", verify="crc32c", norandommap=None,
                                           random_generator="lfsr")) == []
    assert lint.p14_verify_norandommap(ctx(rw="randwrite", verify="crc32c")) == []
    assert lint.p14_verify_norandommap(ctx(rw="randwrite", verify="crc32c", norandommap=None, iodepth="1")) == []


def test_p15_governor_for_latency_tests() -> None:
    powersave = replace(HOST, cpu_governor="powersave")
    (found,) = lint.p15_power(ctx(host=powersave, iodepth="1"))
    assert "'powersave'" in found.message
    assert lint.p15_power(ctx(host=powersave, iodepth="32")) == []
    assert lint.p15_power(replace(ctx(host=powersave, iodepth="1"), tune={"governor": "performance"})) == []
    assert lint.p15_power(ctx(iodepth="1")) == []  # no cpufreq: nothing to say


HALTPOLL = replace(HOST, cpuidle_driver="haltpoll", cpuidle_governor="haltpoll", cpu_dma_latency_us=2_000_000_000,
                   idle_states=(IdleState("POLL", 0, 0), IdleState("haltpoll idle", 1, 1)))
HDD = replace(BLOCK, device=replace(SSD, rotational=True))


def test_p15_idle_states_for_latency_and_small_block_jobs() -> None:
    """A host whose idle CPUs may enter a state with an exit latency: warned for a latency-sensitive or
    small-block job, with the remedy; silent when the job or the host keeps CPUs out of such states."""
    (found,) = lint.p15_power(ctx(host=HALTPOLL))  # 4k at QD32: small blocks, a high rate
    assert found.id == "P15" and found.severity == lint.WARNING
    assert "exit latencies (haltpoll idle 1 µs; cpuidle driver haltpoll) and no CPU latency limit is held" in \
        found.message
    assert found.remedy.startswith("tune: {cpu_dma_latency: 0} (or --tune cpu_dma_latency=0)")
    assert "pm_qos_interface.rst" in found.source
    assert lint.p15_power(ctx(host=HALTPOLL, bs="1m", iodepth="1"))  # large blocks, but latency-sensitive
    assert lint.p15_power(ctx(host=HALTPOLL, bs="<unset>"))  # fio's 4k
    assert lint.p15_power(ctx(HDD, host=HALTPOLL))  # virtio disks and loop devices say rotational too
    # silent: large blocks at depth, several block sizes, polled completions, no exit latency
    for quiet in (ctx(host=HALTPOLL, bs="1m"), ctx(host=HALTPOLL, bs="4k,1m"), ctx(host=HALTPOLL, hipri=None),
                  ctx(host=HALTPOLL, bssplit="4k/50:1m/50")):
        assert lint.p15_power(quiet) == [], quiet.options
    assert lint.p15_power(ctx(host=replace(HALTPOLL, idle_states=(IdleState("POLL", 0, 0),)))) == []
    assert lint.p15_power(ctx(host=replace(HALTPOLL, idle_states=None))) == []  # unknown: nothing to say
    # the limit: held by the job's tuning, or already in force on the host (tuned's latency-performance)
    assert lint.p15_power(replace(ctx(host=HALTPOLL), tune={"cpu_dma_latency": "0"})) == []
    assert lint.p15_power(ctx(host=replace(HALTPOLL, cpu_dma_latency_us=0))) == []
    deep = replace(HALTPOLL, cpuidle_driver="intel_idle",
                   idle_states=(IdleState("C1", 2, 2), IdleState("C6", 133, 600)))
    (found,) = lint.p15_power(replace(ctx(host=deep), tune={"cpu_dma_latency": "10"}))
    assert "(C1 2 µs;" in found.message and "the CPU latency limit (10 µs) still allows them" in found.message
    # with a slow governor too: two findings, the governor's remedy naming the idle-state knob
    both = lint.p15_power(ctx(host=replace(HALTPOLL, cpu_governor="powersave"), iodepth="1"))
    assert [f.id for f in both] == ["P15", "P15"] and "cpu_dma_latency: 0" in both[0].remedy
    assert lint.p15_power(ctx(host=HALTPOLL, ioengine="null")) == []


def test_merge_joins_places_and_orders_errors_first() -> None:
    a = lint.Finding("P4", lint.WARNING, "m", "r", "s", ("x on t",))
    b = lint.Finding("P4", lint.WARNING, "m", "r", "s", ("y on t",))
    c = lint.Finding("P6", lint.ERROR, "m6", "r", "s", ("x on t",))
    assert lint.merge([a, b, c, a]) == [c, replace(a, where=("x on t", "y on t"))]
    assert a.text() == "P4 [x on t]: m Remedy: r"


# --- real plans ----------------------------------------------------------------------------------


def test_every_fio_example_lints(tmp_path: Path) -> None:
    examples = sorted(Path("/usr/share/doc/fio/examples").glob("*.fio"))
    if not examples:
        pytest.skip("fio-examples is not installed")
    seen = set()
    for path in examples:
        plan = prepare(suite_mod.load(str(path)), RunOptions(), strict=False)
        seen |= {f.id for f in plan.findings}
        for f in plan.findings:
            assert f.message and f.remedy and f.source and f.severity in (lint.ERROR, lint.WARNING), (path, f)
    assert {"P1", "P4", "P5", "P6", "P12", "P13", "FIO"} <= seen


def test_plan_context_written_before_and_precondition(tmp_path: Path) -> None:
    text = f"""
targets: {{t: {tmp_path}/f.bin}}
defaults: {{ioengine: libaio, direct: 1, size: 16m, time_based: 1, runtime: 90s, ramp_time: 5s, randrepeat: 0}}
workloads:
  - {{rw: read, bs: 1m}}
  - {{rw: randwrite, bs: 4k, numjobs: 8}}
"""
    plan = prepare(suite_mod.load_yaml(text, "s.yaml"), RunOptions())
    found = {f.id: f for f in plan.findings}
    assert found["P6"].where == ("randwrite-4k-qd1-j8 on t",) and found["P6"].severity == lint.WARNING
    assert plan.errors == ()  # a methodology finding never stops a run
