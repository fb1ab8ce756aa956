"""Compare stored runs: pair their results by workload, test each metric, give verdicts. Pure.

``compare([("local-ssd", runs_a), ("ceph-rbd", runs_b)])`` returns a ``Comparison``; the
renderers in ``report.comparison`` turn it into tables (terminal, Markdown, CSV, HTML) and the JSON
document ``iolab.compare/1``.

**Sides.** Each side is a selector and the runs it matched. All runs of a side are pooled: the
results of one workload (same target, fio job name, canonical options and direction) are its
repetitions, whichever run they come from. With more than two sides each is compared with the
first, the baseline.

**Pairing.** A side's results become *slots*: one per target × fio job × canonical options
(``describe.canonical``) × direction, holding every repetition's merged figures (``fio.merge.by_job``: numjobs
clones summed, percentiles from merged histograms). Slots of the two sides
pair when their directions agree and no known option differs (options made equal by ``ignore``
and ``SOFT`` options such as ``runtime`` do not count); among several candidates the same target,
then the same job name, then the fewest unknown options win. Slots left over pair, as "not
comparable", when their job names agree, or when each side has exactly one left for a direction;
the rest are "missing" on the other side.

**Statistics** per metric (``analyze.metrics``): each side's mean over its repetitions with a 95 % Student-t
interval (n >= 2); the absolute and relative change and the ratio of the means. With at least two
repetitions on both sides, Welch's t-test on the log values (positive metrics) gives a p-value and
a 95 % interval of the ratio of geometric means; the 95 % interval excludes 1 exactly when
p < ``alpha`` (0.05). With 3-5 repeats a rank test (Mann-Whitney) cannot reach small p-values
(its smallest two-sided p with 3+3 values is 0.1), hence the t-test. With one repetition on a side
nothing can be tested: verdicts then follow the threshold alone and are marked untested.

**Verdicts** (direction-aware: IOPS and bandwidth higher is better, latency lower):
``unchanged`` (|relative change| <= threshold), ``better``/``worse`` (beyond the threshold and
significant, or untested), ``inconclusive`` (beyond the threshold but not significant: the 95 %
interval of the ratio is wider than the change and includes 1 — or, with one repetition on one side, the
other side's own 95 % interval is wider than the change), ``not comparable``
(job options differ), ``missing`` (no result or no value on a side), ``failed`` (fio failed on a
side). A geometric mean of the ratios summarises each metric over the tested-or-untested pairs.

**Words.** ``verdict_word`` is the one word every format shows (terminal, Markdown, CSV, HTML and
the JSON ``verdict``): a verdict beyond the threshold without a test is ``better (untested)`` or
``worse (untested)``, never a bare ``better``, and the summary counts it apart from tested ones.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .. import stats
from ..describe import canonical
from ..errors import UsageError
from ..facts import idle
from ..fio.merge import by_job
from ..model import DirectionStats, ResultRecord, Run
from .metrics import DEFAULT_METRICS, Metric, metric


class Verdict(enum.StrEnum):
    """What a comparison says of one metric of one pair (see the module docstring)."""

    BETTER = "better"
    WORSE = "worse"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    NOT_COMPARABLE = "not comparable"
    MISSING = "missing"
    FAILED = "failed"


#: The verdicts of a pair whose figures were weighed (a ratio means something).
_TESTED = (Verdict.BETTER, Verdict.WORSE, Verdict.UNCHANGED, Verdict.INCONCLUSIVE)
UNTESTED_SUFFIX = " (untested)"
#: Every word ``verdict_word`` gives (what every format shows).
WORDS = (*Verdict, Verdict.BETTER + UNTESTED_SUFFIX, Verdict.WORSE + UNTESTED_SUFFIX)
ALPHA = 0.05
METHOD_LOG_WELCH = "Welch t-test on log values; 95 % interval of the ratio of geometric means"
METHOD_WELCH = "Welch t-test on the values (some not positive); 95 % interval of the difference"
METHOD_SINGLE = "single run, no test"


# ---------------------------------------------------------------------------------------------
# The comparison as data


@dataclass(frozen=True)
class Side:
    """A selector and the runs it matched (``labels`` are theirs, for display)."""

    selector: str
    run_ids: tuple[int, ...]
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Slot:
    """One target × fio job × canonical options × direction of a side, its repetitions pooled.

    ``values`` holds one merged DirectionStats per successful repetition; ``failed`` counts the
    repetitions fio failed. ``direction`` is ``–`` for a workload that only failed.
    """

    target: str
    job: str
    workload: str
    direction: str
    options: canonical.Options
    values: tuple[DirectionStats, ...] = ()
    failed: int = 0
    run_ids: tuple[int, ...] = ()
    results: tuple[ResultRecord, ...] = ()


@dataclass(frozen=True)
class MetricRow:
    """One metric of one pair. Units as ``Metric.unit``; ``change`` is ``b - a`` (means),
    ``relative_change`` ``change / a``, ``ratio`` ``b / a``; ``ratio_ci95`` and ``p_value`` only
    when tested (for ``METHOD_WELCH`` the interval is of the difference, in ``ratio_ci95`` divided
    by the baseline mean). ``rounded``: a side's values are fio's rounded display (``Metric.rounded``):
    changes within that rounding (up to half a unit of the last printed digit) are not resolved."""

    metric: Metric
    a: stats.Summary
    b: stats.Summary
    a_values: tuple[float | None, ...]
    b_values: tuple[float | None, ...]
    change: float | None
    relative_change: float | None
    ratio: float | None
    ratio_ci95: tuple[float, float] | None
    p_value: float | None
    method: str
    tested: bool
    verdict: Verdict
    rounded: bool = False


@dataclass(frozen=True)
class Pair:
    """A slot of the baseline and its counterpart (either may be None: missing on that side).

    ``differences`` are every option the two disagree on (``describe.canonical.Difference.effect`` says
    whether it blocks); ``unchecked`` the key options a side does not record.
    """

    a: Slot | None
    b: Slot | None
    comparable: bool
    differences: tuple[canonical.Difference, ...]
    unchecked: tuple[str, ...]
    metrics: tuple[MetricRow, ...]

    @property
    def direction(self) -> str:
        known = [s.direction for s in (self.a, self.b) if s is not None and s.direction != "–"]
        return known[0] if known else "–"

    @property
    def label(self) -> str:
        """The fio job name, or ``a-name / b-name`` when the paired jobs are named differently; a common
        start up to a ``-`` or ``_`` is said once (``randread-qd1 / …qd8``)."""
        names = [s.job for s in (self.a, self.b) if s is not None]
        if len(set(names)) == 1:
            return names[0]
        if len(names) == 2:
            same = next((i for i, (x, y) in enumerate(zip(*names, strict=False)) if x != y), min(map(len, names)))
            cut = max(names[0].rfind("-", 0, same), names[0].rfind("_", 0, same)) + 1
            if cut >= 4:
                return f"{names[0]} / …{names[1][cut:]}"
        return " / ".join(names)

    @property
    def target(self) -> str:
        """The target name, or ``a / b`` when they differ."""
        names = [s.target for s in (self.a, self.b) if s is not None]
        return names[0] if len(set(names)) == 1 else " / ".join(names)


@dataclass(frozen=True)
class GeoMean:
    """The geometric mean of one metric's ratios over the pairs with a ratio, and the verdicts."""

    metric: Metric
    pairs: int
    ratio: float | None
    verdicts: Mapping[Verdict, int]


@dataclass(frozen=True)
class EnvDifference:
    """One fact about where the runs ran that differs between the sides (None = unknown)."""

    item: str
    a: str | None
    b: str | None


@dataclass(frozen=True)
class SideComparison:
    """The baseline (``sides[0]``) against one other side. ``unknown_imported``: a fact is unknown
    (None) for a side holding an imported run, whose fio output does not record its machine."""

    baseline: Side
    other: Side
    pairs: tuple[Pair, ...]
    geomeans: tuple[GeoMean, ...]
    environment: tuple[EnvDifference, ...]
    unknown_imported: bool = False


@dataclass(frozen=True)
class Comparison:
    """The result of ``compare``; ``threshold`` is relative (0.05 = 5 %)."""

    sides: tuple[Side, ...]
    comparisons: tuple[SideComparison, ...]
    metrics: tuple[Metric, ...]
    threshold: float
    ignore: tuple[str, ...] = ()
    alpha: float = ALPHA

    def regressions(self) -> list[tuple[SideComparison, Pair, MetricRow]]:
        """Metrics worse by more than the threshold with a significant difference (tested)."""
        return [(c, p, m) for c in self.comparisons for p in c.pairs for m in p.metrics
                if m.verdict == Verdict.WORSE and m.tested]


# ---------------------------------------------------------------------------------------------
# Building slots from stored runs


def slots(runs: Sequence[Run]) -> list[Slot]:
    """The slots of a side, in order of first appearance (see module docstring)."""
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    failures: dict[tuple[Any, ...], dict[str, Any]] = {}
    for run in runs:
        for result in run.results:
            if result.status not in ("ok", "failed"):
                continue  # pending or interrupted: nothing measured
            version = run.info.fio_version or (result.report.fio_version if result.report else None)
            options = canonical.job_options(result, version)
            if result.status == "failed":
                for job, opts in (options or {result.workload: canonical.Options({}, None)}).items():
                    entry = failures.setdefault((result.target, job, opts.key), _entry(result, job, opts))
                    entry["failed"] += 1
                    entry["runs"][run.info.id] = None
                continue
            for (job, direction), stats_ in by_job(result.report).items():
                opts = options.get(job) or canonical.Options({}, None)
                entry = found.setdefault((result.target, job, opts.key, direction), _entry(result, job, opts))
                entry["values"].append(stats_)
                entry["results"].append(result)
                entry["runs"][run.info.id] = None
    out = []
    for (target, job, key, direction), e in found.items():
        failed = failures.pop((target, job, key), {"failed": 0, "runs": {}})
        out.append(Slot(target, job, e["workload"], direction, e["options"], tuple(e["values"]),
                        failed["failed"], tuple({**e["runs"], **failed["runs"]}), tuple(e["results"])))
    out += [Slot(t, j, e["workload"], "–", e["options"], (), e["failed"], tuple(e["runs"]))
            for (t, j, _), e in failures.items()]
    return _pool_compatible(out)


def _pool_compatible(found: Sequence[Slot]) -> list[Slot]:
    """Slots of one target, job and direction whose known options agree are one workload whose
    sources record different options (JSON and normal output): their repetitions are pooled, and
    the pool knows only what both know (``describe.canonical.common``)."""
    pooled: list[Slot] = []
    for slot in found:
        for k, other in enumerate(pooled):
            if (other.target, other.job, other.direction) != (slot.target, slot.job, slot.direction):
                continue
            diffs, _ = canonical.differences(other.options, slot.options)
            if not any(d.effect == "blocking" for d in diffs):
                pooled[k] = Slot(other.target, other.job, other.workload, other.direction,
                                 canonical.common(other.options, slot.options), other.values + slot.values,
                                 other.failed + slot.failed, tuple(dict.fromkeys(other.run_ids + slot.run_ids)),
                                 other.results + slot.results)
                break
        else:
            pooled.append(slot)
    return pooled


def _entry(result: ResultRecord, job: str, options: canonical.Options) -> dict[str, Any]:
    return {"workload": result.workload, "options": options, "values": [], "results": [], "failed": 0, "runs": {}}


# ---------------------------------------------------------------------------------------------
# Pairing


def pair_slots(a_slots: Sequence[Slot], b_slots: Sequence[Slot],
               ignore: Iterable[str] = ()) -> list[tuple[Slot | None, Slot | None]]:
    """Pairs of slots, in baseline order, then the other side's unpaired ones (see module docstring)."""
    ignore = tuple(ignore)
    candidates = []
    for i, a in enumerate(a_slots):
        for j, b in enumerate(b_slots):
            if not _same_direction(a, b):
                continue
            diffs, unchecked = canonical.differences(a.options, b.options, ignore)
            if any(d.effect == "blocking" for d in diffs):
                continue
            score = (a.target == b.target, a.job == b.job, a.workload == b.workload, -len(unchecked), -len(diffs))
            candidates.append((tuple(-s for s in score), i, j))
    partner: dict[int, int] = {}
    taken: set[int] = set()

    def join(i: int, j: int) -> None:
        partner[i] = j
        taken.add(j)

    for _, i, j in sorted(candidates):
        if i not in partner and j not in taken:
            join(i, j)
    for i, a in enumerate(a_slots):  # left over: the same job name makes a (not comparable) pair
        for j, b in enumerate(b_slots):
            if i not in partner and j not in taken and _same_direction(a, b) and \
                    (a.job == b.job or a.workload == b.workload):
                join(i, j)
    left_a: dict[str, list[int]] = {}
    left_b: dict[str, list[int]] = {}
    for i, a in enumerate(a_slots):
        if i not in partner:
            left_a.setdefault(a.direction, []).append(i)
    for j, b in enumerate(b_slots):
        if j not in taken:
            left_b.setdefault(b.direction, []).append(j)
    for direction, idx in left_a.items():  # one left on each side for a direction: they pair
        if direction != "–" and len(idx) == 1 and len(left_b.get(direction, ())) == 1:
            join(idx[0], left_b[direction][0])
    pairs: list[tuple[Slot | None, Slot | None]] = [
        (a, b_slots[partner[i]] if i in partner else None) for i, a in enumerate(a_slots)]
    pairs += [(None, b) for j, b in enumerate(b_slots) if j not in taken]
    return pairs


@dataclass(frozen=True)
class Nearest:
    """Why a slot found no partner: ``slot`` (of side ``side``, ``a`` the baseline or ``b``), the
    other side's slot that comes closest (the same direction, then the fewest options that block,
    then the same job name) and the options that block between them, with the ``--ignore`` flags
    that would let them pair (None when nothing on the other side has its direction)."""

    side: str
    slot: Slot
    candidate: Slot | None
    blocking: tuple[canonical.Difference, ...]

    @property
    def flags(self) -> str:
        return " ".join(f"--ignore {d.option}" for d in self.blocking)


def nearest(pairs: Sequence[Pair], ignore: Sequence[str] = ()) -> list[Nearest]:
    """For every slot that is missing its partner, the nearest slot of the other side (``Nearest``)."""
    a_slots = [p.a for p in pairs if p.a is not None]
    b_slots = [p.b for p in pairs if p.b is not None]
    out = []
    for p in pairs:
        if (p.a is None) == (p.b is None):
            continue
        side, slot, others = ("a", p.a, b_slots) if p.a is not None else ("b", p.b, a_slots)
        assert slot is not None
        best: tuple[tuple[int, bool], Slot, list[canonical.Difference]] | None = None
        for other in others:
            if not _same_direction(slot, other):
                continue
            a_opts, b_opts = (slot.options, other.options) if side == "a" else (other.options, slot.options)
            blocking = [d for d in canonical.differences(a_opts, b_opts, ignore)[0] if d.effect == "blocking"]
            score = (len(blocking), other.job != slot.job)
            if best is None or score < best[0]:
                best = (score, other, blocking)
        out.append(Nearest(side, slot, best[1] if best else None, tuple(best[2]) if best else ()))
    return out


def _same_direction(a: Slot, b: Slot) -> bool:
    return a.direction == b.direction or "–" in (a.direction, b.direction)


# ---------------------------------------------------------------------------------------------
# Statistics and verdicts


def compare_metric(m: Metric, a_values: Sequence[float | None], b_values: Sequence[float | None],
                   threshold: float, alpha: float = ALPHA) -> MetricRow:
    """Statistics and verdict of one metric between two comparable sides (see module docstring)."""
    sa, sb = stats.describe(a_values), stats.describe(b_values)
    row: dict[str, Any] = {"metric": m, "a": sa, "b": sb, "a_values": tuple(a_values), "b_values": tuple(b_values),
                           "change": None, "relative_change": None, "ratio": None, "ratio_ci95": None,
                           "p_value": None, "method": METHOD_SINGLE, "tested": False}
    if sa.mean is None or sb.mean is None:
        return MetricRow(**row, verdict=Verdict.MISSING)
    row["change"] = sb.mean - sa.mean
    if sa.mean:
        row["relative_change"] = row["change"] / sa.mean
        row["ratio"] = sb.mean / sa.mean
    a_known = [float(v) for v in a_values if v is not None and not math.isnan(v)]
    b_known = [float(v) for v in b_values if v is not None and not math.isnan(v)]
    if len(a_known) >= 2 and len(b_known) >= 2:
        positive = all(v > 0 for v in (*a_known, *b_known))
        test = stats.welch(a_known, b_known, log=positive)
        row["p_value"], row["tested"] = test.p_value, True
        if positive:
            row["ratio_ci95"], row["method"] = test.ci95, METHOD_LOG_WELCH
        else:
            row["method"] = METHOD_WELCH
            if sa.mean:
                row["ratio_ci95"] = (1 + test.ci95[0] / sa.mean, 1 + test.ci95[1] / sa.mean)
    # one side repeated, the other not: no test, but when that side's own interval is wider than the
    # change, the change is inside its noise
    spread = next((s.ci95 for s in (sa, sb) if s.ci95 is not None), None) if not row["tested"] else None
    wide = spread is not None and abs(row["change"]) <= (spread[1] - spread[0]) / 2
    return MetricRow(**row, verdict=_verdict(m, row, threshold, alpha, wide))


def _verdict(m: Metric, row: Mapping[str, Any], threshold: float, alpha: float, wide: bool = False) -> Verdict:
    change, relative = row["change"], row["relative_change"]
    if change == 0 or (relative is not None and abs(relative) <= threshold):
        return Verdict.UNCHANGED
    if (row["tested"] and row["p_value"] >= alpha) or wide:
        return Verdict.INCONCLUSIVE
    return Verdict.BETTER if (change > 0) == m.higher_is_better else Verdict.WORSE


def verdict_word(row: MetricRow) -> str:
    """The verdict as every format shows it: ``better (untested)`` for a change beyond the threshold
    that no test backs (one repetition on a side), else the verdict itself."""
    untested = row.verdict in (Verdict.BETTER, Verdict.WORSE) and not row.tested
    return row.verdict + (UNTESTED_SUFFIX if untested else "")


def _pair(a: Slot | None, b: Slot | None, metrics: Sequence[Metric], threshold: float, ignore: Sequence[str],
          alpha: float, explicit: bool) -> Pair:
    diffs: list[canonical.Difference] = []
    unchecked: list[str] = []
    if a is not None and b is not None:
        diffs, unchecked = canonical.differences(a.options, b.options, ignore)
    comparable = a is not None and b is not None and not any(d.effect == "blocking" for d in diffs)
    rows = []
    sync = any(s is not None and s.direction == "sync" for s in (a, b))
    for m in metrics:
        a_values, b_values = _values(m, a), _values(m, b)
        unmeasured = all(v is None for v in (*a_values, *b_values)) and \
            not ((a and a.failed and not a.values) or (b and b.failed and not b.values))
        if unmeasured and (not explicit or (m.unit in ("IOPS", "B/s") and sync)):
            continue  # a default metric neither side measured (slat of a sync engine); fio reports no rate for syncs
        row = compare_metric(m, a_values, b_values, threshold, alpha)
        verdict = row.verdict
        if a is None or b is None:
            verdict = Verdict.MISSING
        elif (a.failed and not a.values) or (b.failed and not b.values):
            verdict = Verdict.FAILED
        elif not comparable:
            verdict = Verdict.NOT_COMPARABLE
        if verdict != row.verdict:
            row = MetricRow(**{**row.__dict__, "verdict": verdict, "tested": False})
        if m.rounded is not None and any(m.rounded(d) for s in (a, b) if s is not None for d in s.values):
            row = replace(row, rounded=True)
        rows.append(row)
    return Pair(a, b, comparable, tuple(diffs), tuple(unchecked), tuple(rows))


def _values(m: Metric, slot: Slot | None) -> tuple[float | None, ...]:
    """The metric's value in each repetition of ``slot``."""
    if slot is None:
        return ()
    if m.of_result is not None:
        return tuple(m.of_result(r) for r in slot.results)
    return tuple(m.value(d) for d in slot.values)


def _geomeans(pairs: Sequence[Pair], metrics: Sequence[Metric]) -> tuple[GeoMean, ...]:
    out = []
    for m in metrics:
        rows = [r for p in pairs for r in p.metrics if r.metric.name == m.name]
        if not rows:
            continue
        ratios = [r.ratio for r in rows if r.verdict in _TESTED and r.ratio and r.ratio > 0]
        ratio = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else None
        counts = {v: sum(1 for r in rows if verdict_word(r) == v) for v in WORDS}
        out.append(GeoMean(m, len(ratios), ratio, {k: n for k, n in counts.items() if n}))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Environment


_HOST_FACTS = (("host", "hostname"), ("kernel", "kernel"), ("distribution", "distribution"), ("CPU", "cpu_model"),
               ("CPUs", "cpu_count"), ("memory bytes", "memory_bytes"), ("virtualization", "virtualization"),
               ("CPU governor", "cpu_governor"), ("cpuidle driver", "cpuidle_driver"),
               ("cpuidle governor", "cpuidle_governor"), ("CPU idle states", "idle_states"))
#: The CPU latency limit a result ran under: the value in force during its job, else its host's.
LATENCY_LIMIT = "CPU latency limit (cpu_dma_latency)"


def _host_fact(host: Any, attr: str) -> Any:
    return idle.describe_states(host.idle_states) if attr == "idle_states" else getattr(host, attr)


def _latency_limit(result: ResultRecord, host: Any) -> str | None:
    in_force = ((result.extra or {}).get("tuning") or {}).get("in_force") or {}
    value = in_force.get("cpu_dma_latency", host.cpu_dma_latency_us if host is not None else None)
    return idle.describe_limit(int(value)) if value is not None else None


def _facts(runs: Sequence[Run]) -> dict[str, set[str]]:
    """Facts about where a side's runs ran, each as the set of values seen."""
    facts: dict[str, set[str]] = {}

    def add(item: str, value: Any) -> None:
        facts.setdefault(item, set())
        if value is not None and value != "":
            facts[item].add(str(value))

    for run in runs:
        info, host = run.info, run.info.host
        add("fio version", info.fio_version)
        add("source", f"imported {info.source.get('format')} output" if info.source else "iolab run")
        for item, attr in _HOST_FACTS:
            add(item, _host_fact(host, attr) if host else None)
        for result in run.results:
            add(LATENCY_LIMIT, _latency_limit(result, host) if not (result.extra or {}).get("hosts") else None)
            for label, other in _other_hosts_facts(result).items():  # fio servers, watched hosts
                for item, attr in _HOST_FACTS:
                    add(f"{item} ({label})", _host_fact(other, attr))
                add(f"{LATENCY_LIMIT} ({label})", idle.describe_limit(other.cpu_dma_latency_us))
            t = result.target_facts
            d = t.device if t else None
            add("target kind", t.kind if t else None)
            add("filesystem", t.fs_type if t else None)
            add("mount options", t.mount_options if t else None)
            for item, attr in (("device", "name"), ("device model", "model"), ("scheduler", "scheduler"),
                               ("rotational", "rotational"), ("write cache", "write_cache"),
                               ("nr_requests", "nr_requests"), ("read_ahead_kb", "read_ahead_kb")):
                add(item, getattr(d, attr) if d else None)
            if result.report is not None:
                for disk in result.report.disk_util:
                    add("disks (fio disk stats)", disk.name)
    return facts


def environment(a_runs: Sequence[Run], b_runs: Sequence[Run]) -> tuple[EnvDifference, ...]:
    """The facts that differ between two sides; a fact neither side knows is left out."""
    fa, fb = _facts(a_runs), _facts(b_runs)
    out = []
    for item in dict.fromkeys([*fa, *fb]):
        va, vb = fa.get(item, set()), fb.get(item, set())
        if va != vb:
            out.append(EnvDifference(item, " | ".join(sorted(va)) or None, " | ".join(sorted(vb)) or None))
    return tuple(out)


def _imported(runs: Sequence[Run]) -> bool:
    return any(r.info.origin == "imported" for r in runs)


# ---------------------------------------------------------------------------------------------
# Entry point


def compare(sides: Sequence[tuple[Side, Sequence[Run]]], metrics: Sequence[str] | None = None,
            threshold: float = 0.05, ignore: Sequence[str] = (), alpha: float = ALPHA) -> Comparison:
    """Compare every side with the first (see module docstring).

    ``metrics`` are names for ``metric`` (default ``DEFAULT_METRICS``: a default metric that no
    side knows for a pair is left out; an explicitly named one shows as missing). ``threshold``
    is relative (0.05 = 5 %). Raises ``UsageError`` for fewer than two sides, an unknown metric or
    a negative threshold.
    """
    if len(sides) < 2:
        raise UsageError("compare needs at least two sides (A B …)")
    if threshold < 0:
        raise UsageError(f"the threshold must not be negative, got {threshold}")
    chosen = [metric(name) for name in (metrics or DEFAULT_METRICS)]
    chosen = list({m.name: m for m in chosen}.values())
    base_side, base_runs = sides[0]
    base_slots = slots(base_runs)
    results = []
    for side, runs in sides[1:]:
        pairs = tuple(_pair(a, b, chosen, threshold, ignore, alpha, explicit=bool(metrics))
                      for a, b in pair_slots(base_slots, slots(runs), ignore))
        env = environment(base_runs, runs)
        unknown_imported = any((e.a is None and _imported(base_runs)) or (e.b is None and _imported(runs)) for e in env)
        results.append(SideComparison(base_side, side, pairs, _geomeans(pairs, chosen), env, unknown_imported))
    return Comparison(tuple(s for s, _ in sides), tuple(results), tuple(chosen), threshold, tuple(ignore), alpha)


def _other_hosts_facts(result: ResultRecord) -> dict[str, Any]:
    """``observe.usage.other_hosts_facts``, imported only for a result that has other hosts or was
    observed (the observers' modules bring ssh and the fence: 0.2 s of a report's start-up)."""
    if not {"hosts", "observed"} & set(result.extra or {}):
        return {}
    from ..observe import usage
    return usage.other_hosts_facts(result)
