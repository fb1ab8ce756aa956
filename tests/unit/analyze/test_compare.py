"""`compare` on runs stored through Store with constructed fio reports of known differences; the statistics
are checked against scipy. The CLI's comparisons are in tests/cli/test_compare.py."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats as sps

from iolab.analyze import compare as cmp
from iolab.analyze.metrics import metric
from iolab.cli.compare import sides_of
from iolab.errors import UsageError
from iolab.model import HostFacts, IdleState
from iolab.report.comparison import comparison_document, comparison_tables, environment_table
from iolab.report.table import to_markdown
from iolab.store.database import Store
from iolab.workflows import importer
from paths import FIO as DATA
from storedruns import store_run


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path}/t.db")
    yield s
    s.close()


def run_compare(store: Store, *selectors: str, **kwargs) -> cmp.Comparison:
    return cmp.compare(sides_of(store, selectors), **kwargs)


def rows(c: cmp.Comparison, side: int = 0) -> dict[tuple[str, str], cmp.MetricRow]:
    return {(p.label, r.metric.name): r for p in c.comparisons[side].pairs for r in p.metrics}


# --- statistics --------------------------------------------------------------------------------------------


A_IOPS, B_IOPS = [1000.0, 1040.0, 980.0, 1010.0], [1100.0, 1080.0, 1150.0]


def test_repeats_use_welch_on_logs_and_agree_with_scipy(store):
    store_run(store, "a", {"w": [(v, 100_000) for v in A_IOPS]})
    store_run(store, "b", {"w": [(v, 100_000) for v in B_IOPS]})
    row = rows(run_compare(store, "a", "b"))[("w", "iops")]
    assert (row.a.n, row.b.n) == (4, 3) and row.a.mean == pytest.approx(np.mean(A_IOPS))
    # each side: a 95 % Student-t interval of the mean
    lo, hi = sps.t.interval(0.95, 3, loc=np.mean(A_IOPS), scale=sps.sem(A_IOPS))
    assert row.a.ci95 == pytest.approx((lo, hi))
    # the ratio's interval and p: Welch's t-test on the logs, exponentiated
    ref = sps.ttest_ind(np.log(B_IOPS), np.log(A_IOPS), equal_var=False)
    assert row.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    assert row.ratio_ci95 == pytest.approx(tuple(np.exp(ref.confidence_interval(0.95))), rel=1e-9)
    assert row.ratio == pytest.approx(np.mean(B_IOPS) / np.mean(A_IOPS))
    assert row.change == pytest.approx(np.mean(B_IOPS) - np.mean(A_IOPS))
    assert row.relative_change == pytest.approx(row.ratio - 1)
    assert (row.method, row.tested, row.verdict) == (cmp.METHOD_LOG_WELCH, True, cmp.Verdict.BETTER)
    assert row.p_value < 0.05 and row.ratio_ci95[0] > 1  # the interval excludes 1 exactly when p < alpha


def test_noisy_unchanged_and_worse_latency(store):
    store_run(store, "a", {"noisy": [(100, 1e5), (130, 1e5), (80, 1e5)], "flat": [(1000, 1e5), (1001, 1e5)],
                           "slow": [(500, 100_000), (500, 101_000), (500, 99_000)]})
    store_run(store, "b", {"noisy": [(150, 1e5), (90, 1e5), (160, 1e5)], "flat": [(1020, 1e5), (1021, 1e5)],
                           "slow": [(500, 130_000), (500, 131_000), (500, 129_000)]})
    r = rows(run_compare(store, "a", "b"))
    noisy = r[("noisy", "iops")]
    assert noisy.relative_change > 0.05 and noisy.p_value >= 0.05 and noisy.verdict == cmp.Verdict.INCONCLUSIVE
    flat = r[("flat", "iops")]  # +2 %, significant, but within the 5 % threshold
    assert flat.p_value < 0.05 and flat.verdict == cmp.Verdict.UNCHANGED
    slow = r[("slow", "clat_mean")]  # latency up 30 %: lower is better
    assert slow.verdict == cmp.Verdict.WORSE and slow.tested and slow.p_value == pytest.approx(
        sps.ttest_ind(np.log([130_000, 131_000, 129_000]), np.log([100_000, 101_000, 99_000]),
                      equal_var=False).pvalue)
    assert slow.p_value < 0.001
    assert r[("slow", "iops")].verdict == cmp.Verdict.UNCHANGED and r[("slow", "iops")].p_value == 1.0  # zero variance
    assert run_compare(store, "a", "b", threshold=0.5).regressions() == []


def test_single_runs_are_untested(store):
    store_run(store, "a", {"w": [(1000, 2e5)]})
    store_run(store, "b", {"w": [(900, 2e5)]})
    c = run_compare(store, "a", "b")
    row = rows(c)[("w", "iops")]
    assert (row.method, row.tested, row.p_value, row.ratio_ci95, row.verdict) == (
        cmp.METHOD_SINGLE, False, None, None, cmp.Verdict.WORSE)
    assert c.regressions() == []  # untested: never a significant regression
    table = comparison_tables(c)[0]
    assert "worse (untested)" in to_markdown(table)
    assert any("no significance test is possible" in n for n in table.notes)


def test_pooling_a_label_over_runs(store):
    store_run(store, "a", {"w": [(1000, 1e5)]})
    store_run(store, "a", {"w": [(1010, 1e5)]})
    store_run(store, "b", {"w": [(1500, 1e5)]})
    store_run(store, "b", {"w": [(1490, 1e5)]})
    c = run_compare(store, "a", "b")
    row = rows(c)[("w", "iops")]
    assert (row.a.n, row.b.n, row.tested, row.verdict) == (2, 2, True, cmp.Verdict.BETTER)
    assert c.comparisons[0].pairs[0].a.run_ids == (1, 2)


# --- pairing and parameters ---------------------------------------------------------------------------------


def test_sources_recording_different_options_pool_and_know_only_what_both_show(store):
    old = [DATA / "fio-2.2.8_randrw_posixaio.json", DATA / "fio-2.2.8_randrw_posixaio.normal.txt"]
    new = [DATA / "fio-3.33_randrw_posixaio.json"]
    for paths, label in ((old, "old"), (new, "new")):
        assert all(o.run_id for o in importer.import_sources(store, importer.discover(paths), label=label))
    c = run_compare(store, "old", "new", metrics=["iops"])
    pairs = c.comparisons[0].pairs
    assert [(p.direction, p.metrics[0].a.n, p.metrics[0].b.n) for p in pairs] == [("read", 2, 1), ("write", 2, 1)]
    # 2.2.8 JSON lists no options: the pool checks nothing, although the normal output shows rw, bs, …
    assert pairs[0].a.options.values == {} and pairs[0].comparable
    assert "rw" in pairs[0].unchecked and "bs" in pairs[0].unchecked
    row = pairs[0].metrics[0]
    assert row.a_values == (51499 * 1000 / 2001, 50071 * 1000 / 2001)
    assert row.tested is False  # one repeat on the other side




def test_differing_options_are_not_comparable_unless_ignored(store):
    store_run(store, "a", {"w": [(1000, 1e5)] * 2})
    store_run(store, "b", {"w": [(2000, 1e5)] * 2}, bs="8k", runtime="10")
    pair = run_compare(store, "a", "b").comparisons[0].pairs[0]
    assert not pair.comparable and {r.verdict for r in pair.metrics} == {cmp.Verdict.NOT_COMPARABLE}
    assert [(d.option, d.a, d.b, d.effect) for d in pair.differences] == [
        ("bs", "4k", "8k", "blocking"), ("runtime", "2s", "10s", "soft")]
    ignored = run_compare(store, "a", "b", ignore=("blocksize",)).comparisons[0].pairs[0]
    assert ignored.comparable and ignored.differences[0].effect == "ignored"
    assert rows(run_compare(store, "a", "b", ignore=("bs",)))[("w", "iops")].verdict == cmp.Verdict.BETTER
    tables = comparison_tables(run_compare(store, "a", "b"))
    differences = next(t for t in tables if t.title == "Option differences")
    assert [c.text for c in differences.rows[0]] == ["w", "read", "bs", "4k", "8k", "not comparable"]
    notes = " ".join(n for t in tables for n in t.notes)  # the exact command, not "--ignore OPTION"
    assert "1 of 1 pair(s) not comparable: job options differ (see the option differences); to compare them " \
           "anyway: iolab compare a b --ignore bs" in notes


def test_workloads_pair_by_options_not_names_and_missing_or_failed(store):
    store_run(store, "a", {"seq": [(100, 1e5)], "only-a": [(5, 1e5)], "dies": [(7, 1e5)]}, rw="read")
    store_run(store, "b", {"sequential": [(110, 1e5)], "dies": [(7, 1e5)]}, rw="read", failed=("dies",))
    c = run_compare(store, "a", "b")
    pairs = {(p.a.job if p.a else None, p.b.job if p.b else None): p for p in c.comparisons[0].pairs}
    # "seq" and "sequential" run the same job: paired, although named differently
    assert pairs[("seq", "sequential")].comparable and pairs[("seq", "sequential")].label == "seq / sequential"
    assert pairs[("dies", "dies")].metrics[0].verdict == cmp.Verdict.FAILED
    assert pairs[("only-a", None)].metrics[0].verdict == cmp.Verdict.MISSING


def test_three_sides_each_against_the_baseline_and_geomean(store):
    store_run(store, "base", {"r": [(1000, 1e5)], "w": [(1000, 1e5)]})
    store_run(store, "x", {"r": [(2000, 1e5)], "w": [(500, 1e5)]})
    store_run(store, "y", {"r": [(1000, 1e5)], "w": [(1000, 1e5)]}, kernel="6.9.0")
    c = run_compare(store, "base", "x", "y", metrics=["iops"])
    assert [(s.baseline.selector, s.other.selector) for s in c.comparisons] == [("base", "x"), ("base", "y")]
    (gx,), (gy,) = c.comparisons[0].geomeans, c.comparisons[1].geomeans
    assert gx.ratio == pytest.approx(1.0)  # sqrt(2 x 0.5)
    assert gx.verdicts == {"better (untested)": 1, "worse (untested)": 1}  # one run a side: counted apart
    assert gy.ratio == pytest.approx(1.0) and gy.verdicts == {cmp.Verdict.UNCHANGED: 2}
    assert c.comparisons[0].environment == ()
    assert [(e.item, e.a, e.b) for e in c.comparisons[1].environment] == [("kernel", "6.1.0", "6.9.0")]
    doc = comparison_document(c)
    assert doc["schema"] == "iolab.compare/1" and [x["side"] for x in doc["comparisons"]] == [1, 2]
    assert doc["comparisons"][0]["geometric_means"][0]["ratio"] == pytest.approx(1.0)


def test_idle_states_and_the_latency_limit_are_environment_differences(store):
    """The cpuidle facts of each side's host, and the CPU latency limit each result ran under (its tuning
    in force, else its host's), differ: `compare` lists them with the rest of the environment."""
    haltpoll = HostFacts(hostname="lab", kernel="6.1.0", cpu_count=2, cpuidle_driver="haltpoll",
                         cpuidle_governor="haltpoll", cpu_dma_latency_us=2_000_000_000,
                         idle_states=(IdleState("POLL", 0, 0), IdleState("haltpoll idle", 1, 1)))
    store_run(store, "as-is", {"w": [(110_000, 70_000)]}, host=haltpoll)
    store_run(store, "held", {"w": [(255_000, 29_000)]}, host=haltpoll,
              extra={"tuning": {"requested": {"cpu_dma_latency": "0"}, "in_force": {"cpu_dma_latency": "0"}}})
    intel = replace(haltpoll, cpuidle_driver="intel_idle", cpuidle_governor="menu",
                    idle_states=(IdleState("POLL", 0, 0), IdleState("C1", 2, 2), IdleState("C6", 133, 600)))
    store_run(store, "metal", {"w": [(400_000, 20_000)]}, host=intel)
    c = run_compare(store, "as-is", "held", "metal")
    assert [(e.item, e.a, e.b) for e in c.comparisons[0].environment] == [
        ("CPU latency limit (cpu_dma_latency)", "none held (2000000000 µs)", "0 µs")]
    assert [(e.item, e.a, e.b) for e in c.comparisons[1].environment] == [
        ("cpuidle driver", "haltpoll", "intel_idle"), ("cpuidle governor", "haltpoll", "menu"),
        ("CPU idle states", "POLL (exit 0 µs, residency 0 µs), haltpoll idle (exit 1 µs, residency 1 µs)",
         "POLL (exit 0 µs, residency 0 µs), C1 (exit 2 µs, residency 2 µs), C6 (exit 133 µs, residency 600 µs)")]
    table = environment_table(c.comparisons[0])
    assert table is not None and "CPU latency limit (cpu_dma_latency)" in to_markdown(table)


def test_unknown_environment_blames_imported_outputs_only_when_a_side_is_imported(store):
    store_run(store, "mine", {"w": [(1000, 1e5)]}, kernel=None, rw="write")  # e.g. not readable on that host
    store_run(store, "theirs", {"w": [(1000, 1e5)]}, rw="write")
    [seed] = importer.import_sources(store, importer.discover([DATA / "seed001_local_ssd_fio316.txt"]), label="pasted")
    assert seed.run_id is not None
    own = environment_table(run_compare(store, "mine", "theirs").comparisons[0])
    assert own is not None and own.notes == ("– = not known for that side",)
    mixed = environment_table(run_compare(store, "pasted", "theirs").comparisons[0])
    assert mixed is not None and mixed.notes == ("– = not known for that side (imported outputs do not record "
                                                 "their machine)",)


def test_metrics_catalogue():
    assert metric("clat_p99.90").name == "clat_p99.9" and not metric("lat_max").higher_is_better
    assert metric("bw").unit == "B/s"
    for bad in ("cpu", "clat_p101", "clat_median"):
        with pytest.raises(UsageError):
            metric(bad)


def test_unknown_default_metric_is_left_out_but_explicit_is_missing(store):
    store_run(store, "a", {"w": [(1000, 1e5)]})
    store_run(store, "b", {"w": [(1000, 1e5)]})
    assert "slat_mean" not in {m for _, m in rows(run_compare(store, "a", "b"))}
    explicit = rows(run_compare(store, "a", "b", metrics=["iops", "slat_mean"]))
    assert explicit[("w", "slat_mean")].verdict == cmp.Verdict.MISSING



def test_a_sync_direction_is_rated_over_its_jobs_runtime_and_its_clat_is_fios_lat(store, tmp_path):
    """fio times a sync call as a whole (``sync.lat_ns`` only) and reports no rate for it: a sync's
    IOPS is its calls over its job's runtime (4,048 fsyncs in 1,001 ms: ``fio.merge.with_sync_rates``,
    as a capture's flushes are rated); its clat p99 is the lat the results table shows."""
    sample = DATA / "fio-3.33_psync_fsync_all_percentiles.json"
    doc = json.loads(sample.read_text())
    for label in ("a", "b"):
        doc["timestamp"] += 1  # another file, not a duplicate
        (tmp_path / f"{label}.json").write_text(json.dumps(doc))
        list(importer.import_sources(store, importer.discover([tmp_path / f"{label}.json"]), label=label))
    pairs = run_compare(store, "a", "b", metrics=["iops", "clat_p99"]).comparisons[0].pairs
    sync = [p for p in pairs if p.direction == "sync"]
    assert sync and [r.metric.name for p in sync for r in p.metrics] == ["iops", "clat_p99"]
    assert [r.a.mean for p in sync for r in p.metrics] == [pytest.approx(4048 * 1000 / 1001), 536576.0]
    assert all(r.verdict != cmp.Verdict.MISSING for p in pairs for r in p.metrics)
