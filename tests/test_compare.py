"""`compare` on runs stored through Store with constructed fio reports of known differences; the statistics
are checked against scipy. Then the CLI: the seed files of the issue, --fail-on-regression, and two real runs."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pytest
from scipy import stats as sps

from clirun import iolab
from iolab.analyze import compare as cmp
from iolab.analyze.metrics import metric
from iolab.cli.compare import sides_of
from iolab.errors import UsageError
from iolab.model import DirectionStats, FioReport, HostFacts, JobResult, Latency
from iolab.report.comparison import comparison_document, comparison_tables, environment_table
from iolab.report.table import read_csv, to_markdown
from iolab.store.database import Store
from iolab.store.records import PendingResult
from iolab.workflows import importer
from paths import FIO as DATA

JOB = "[{name}]\nrw={rw}\nbs={bs}\niodepth=8\nioengine=libaio\ndirect=1\nsize=64m\ntime_based\nruntime={runtime}\n"


def report(name: str, iops: float, clat_ns: float, direction: str = "read", error: int = 0) -> FioReport:
    total = round(iops * 2)  # 2 s runtime: iops = total * 1000 / 2000
    clat = Latency(min_ns=clat_ns / 4, max_ns=clat_ns * 10, mean_ns=clat_ns, stddev_ns=clat_ns / 10, samples=total,
                   percentiles_ns={"50": clat_ns * 0.9, "99": clat_ns * 3, "99.9": clat_ns * 5})
    d = DirectionStats(direction=direction, total_ios=total, io_bytes=total * 4096, runtime_ms=2000,
                       iops=total * 1000 / 2000, bw_bytes_s=total * 4096 / 2, clat=clat, lat=clat)
    return FioReport(source_format="json", jobs=(JobResult(name=name, error=error, directions={direction: d}),),
                     fio_version="3.33")


def store_run(store: Store, label: str, workloads: dict[str, Sequence[tuple[float, float]]], *, bs: str = "4k",
              rw: str = "randread", runtime: str = "2", kernel: str | None = "6.1.0",
              failed: Sequence[str] = ()) -> int:
    """A run with one result per (workload, repeat): each repeat is (iops, clat mean ns)."""
    run_id = store.create_run(suite_name="t", suite_text="", label=label, fio_version="3.33",
                              host=HostFacts(hostname="lab", kernel=kernel, cpu_count=2))
    planned, values = [], []
    for name, repeats in workloads.items():
        text = JOB.format(name=name, rw=rw, bs=bs, runtime=runtime)
        for repeat, value in enumerate(repeats):
            planned.append(PendingResult(seq=len(planned), target="disk", target_path="/dev/x", workload=name,
                                         repeat=repeat, job_text=text, job_hash="h", params={}))
            values.append((name, value))
    for result_id, (name, (iops, clat)) in zip(store.add_pending(run_id, planned), values, strict=True):
        if name in failed:
            store.save_result(result_id, status="failed", error="fio: engine failed")
        else:
            store.save_result(result_id, status="ok", report=report(name, iops, clat))
    store.finish_run(run_id, "complete")
    return run_id


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



def test_a_sync_direction_has_no_rate_and_its_clat_is_fios_lat(store, tmp_path):
    """fio times a sync call as a whole (``sync.lat_ns`` only) and reports no rate for it: asked for
    IOPS, a sync pair has no row (not a "missing" one); its clat p99 is the lat the results table shows."""
    sample = DATA / "fio-3.33_psync_fsync_all_percentiles.json"
    doc = json.loads(sample.read_text())
    for label in ("a", "b"):
        doc["timestamp"] += 1  # another file, not a duplicate
        (tmp_path / f"{label}.json").write_text(json.dumps(doc))
        list(importer.import_sources(store, importer.discover([tmp_path / f"{label}.json"]), label=label))
    pairs = run_compare(store, "a", "b", metrics=["iops", "clat_p99"]).comparisons[0].pairs
    sync = [p for p in pairs if p.direction == "sync"]
    assert sync and [r.metric.name for p in sync for r in p.metrics] == ["clat_p99"]
    assert [r.a.mean for p in sync for r in p.metrics] == [536576.0]
    assert all(r.verdict != cmp.Verdict.MISSING for p in pairs for r in p.metrics)


# --- CLI ------------------------------------------------------------------------------------------------------


def test_issue_done_when_seed_files(tmp_path):
    db = tmp_path / "iolab.db"
    for name, label in (("seed001_local_ssd_fio316.txt", "local-ssd"), ("seed001_ceph_rbd_fio316.txt", "ceph-rbd")):
        assert iolab("import", str(DATA / name), "--label", label, db=db).returncode == 0
    proc = iolab("compare", "local-ssd", "ceph-rbd", "--format", "markdown", db=db)
    assert proc.returncode == 0, proc.stderr
    md = proc.stdout
    assert "### local-ssd (run 1) → ceph-rbd (run 2)" in md
    assert "| test | write | IOPS | 1/1 | 1197.5 | 4801.3 | +3603.8 (+300.9%) | ×4.01 | – | better (untested) |" in md
    assert "| test | write | clat p99 | 1/1 | 180.0 ms | 317.0 ms | +137.0 ms (+76.1%) | ×1.76 |" in md
    assert "job options: all 1 pair(s) comparable, no option differs" in md
    assert "Option differences" not in md
    doc = json.loads(iolab("compare", "local-ssd", "ceph-rbd", "--format", "json", db=db).stdout)
    pair = doc["comparisons"][0]["pairs"][0]
    assert pair["comparable"] and pair["a"]["options"] == {"iodepth": "32", "numjobs": "4", "size": "2g"}
    iops = next(m for m in pair["metrics"] if m["metric"] == "iops")
    assert iops["a"]["values"] == [71936 * 1000 / 60071] and iops["b"]["values"] == [288149 * 1000 / 60015]
    assert iops["ratio"] == pytest.approx(4.00937, abs=1e-5) and iops["p_value"] is None
    # the pasted outputs lack the job header line, so no block size makes the bandwidth exact: fio's printed
    # values (4790KiB/s, 18.8MiB/s) are compared, marked as rounded, rather than "missing"
    bw = next(m for m in pair["metrics"] if m["metric"] == "bw")
    assert bw["rounded"] and bw["a"]["values"] == [4790 * 1024] and bw["b"]["values"] == [18.8 * 2**20]
    assert "| test | write | bw MiB/s | 1/1 | ≈4.68 | ≈18.80 |" in md
    assert "≈: compared from fio's printed values, rounded to 3–4 significant figures" in md
    shown = iolab("show", "ceph-rbd", db=db).stdout
    assert "≈18.80" in shown and "≈: fio's printed value, rounded" in shown


def test_fail_on_regression_exits_3(tmp_path):
    db = tmp_path / "iolab.db"
    store = Store(f"sqlite:///{db}")
    store_run(store, "old", {"w": [(1000, 1e5), (1010, 1e5), (990, 1e5)]})
    store_run(store, "new", {"w": [(800, 1e5), (810, 1e5), (790, 1e5)]})
    store.close()
    proc = iolab("compare", "old", "new", "--metric", "iops,clat_p99", "--fail-on-regression", db=db)
    assert proc.returncode == 3 and "1 significant regression(s)" in proc.stderr
    assert " worse " in proc.stdout and "Welch" in proc.stdout
    assert iolab("compare", "old", "new", db=db).returncode == 0  # reported, but no --fail-on-regression
    assert iolab("compare", "old", "new", "--threshold", "25%", "--fail-on-regression", db=db).returncode == 0
    csv = iolab("compare", "old", "new", "--metric", "iops", "--format", "csv", db=db).stdout
    (title, rows), (summary, _) = read_csv(csv)[:2]
    assert title == "old (run 1) → new (run 2)" and summary.startswith("Summary")
    assert rows[0][:8] == ["workload", "direction", "metric", "unit", "n", "a_mean", "a_ci95_half", "b_mean"]
    assert rows[1][2:4] == ["iops", "IOPS"] and rows[1][-1] == "worse"
    bad = iolab("compare", "old", "--metric", "iops", db=db)
    assert bad.returncode == 2 and "at least two" in bad.stderr
    assert iolab("compare", "old", "new", "--metric", "cpu", db=db).returncode == 2
    assert iolab("compare", "old", "nosuchlabel", db=db).returncode == 2


def test_two_real_runs_end_to_end(tmp_path):
    """Two short real fio runs (ioengine=null) compared through the CLI."""
    db = tmp_path / "iolab.db"
    suite = tmp_path / "null.yaml"
    suite.write_text("name: null\ntargets:\n  none: {path: " + str(tmp_path / "f") + "}\n"
                     "defaults: {ioengine: 'null', size: 16m, time_based: 1, runtime: 1s}\nrepeat: 2\n"
                     "workloads:\n  - {rw: randread, bs: 4k, iodepth: 1}\n  - {rw: write, bs: 64k, iodepth: 1}\n")
    for label in ("first", "second"):
        proc = iolab("run", str(suite), "--label", label, db=db, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    proc = iolab("compare", "first", "second", "--format", "json", db=db)
    assert proc.returncode == 0, proc.stderr
    (c,) = json.loads(proc.stdout)["comparisons"]
    assert [(p["label"], p["direction"], p["comparable"]) for p in c["pairs"]] == [
        ("randread-4k-qd1", "read", True), ("write-64k-qd1", "write", True)]
    assert all(p["unchecked"] == [] and p["differences"] == [] for p in c["pairs"])
    iops = next(m for m in c["pairs"][0]["metrics"] if m["metric"] == "iops")
    assert iops["tested"] and iops["method"].startswith("Welch") and len(iops["a"]["values"]) == 2
    assert 0 <= iops["p_value"] <= 1 and iops["verdict"] in cmp.WORDS
    assert math.isclose(iops["ratio"], iops["b"]["mean"] / iops["a"]["mean"])
    table = iolab("compare", "first", "second", db=db).stdout
    assert "first (run 1) → second (run 2)" in table and "randread-4k-qd1   read    IOPS" in table
