"""The CI gate: is one run worse than the history before it? Pure.

For every series (``analyze.history``) with a point of the run, the run is judged against its
**baseline**, the runs before it at the series' accepted level:

* **A regression holds until it is accepted.** Walking the series forward, a run worse (or better)
  than the baseline so far by more than ``max_regression`` does not join it: a slower disk keeps
  failing the gate night after night, instead of becoming the norm its own spread excuses. A run
  accepted as an intended change (``iolab accept RUN``, ``model.Accepted``) starts a new level: the
  stretch of runs off the old level that ends at it becomes the new baseline. A confirmed change
  point to a *better* level (``changepoints.detect``) with at least ``MIN_RUNS`` runs after it starts
  a new level by itself; a worse one never does.
* ``pinned`` runs (``--baseline``) replace the walk: the baseline is their points, whatever they are.
* ``change`` = run value / baseline mean − 1;
* the test (``METHOD``): a one-sided t-test of the run's value against the baseline's values, on
  logs (a ratio, as ``compare`` tests), ``t = (x − mean) / (s · √(1 + 1/n))`` with n − 1 degrees of
  freedom: the probability of a value at least this much worse if the run were one more run of the
  baseline (the prediction interval of a new observation; NIST/SEMATECH e-Handbook §7.2.2 and
  Hahn & Meeker, *Statistical Intervals*, §4.7). The p-values of all judged series are adjusted
  together by Holm's step-down method (Holm 1979): with twenty workloads × four metrics judged on
  every CI run, an unadjusted 1 % test would fail a clean run most days.
* ``regression`` when the change is worse than ``max_regression`` and the adjusted p-value is below
  ``alpha``; ``worse`` (beyond the bound, not significant), ``better``, ``ok``; ``no history`` when the
  baseline is shorter than ``MIN_RUNS`` (2 for a pinned one).
* A new accepted level still shorter than ``MIN_RUNS`` has too few runs to test against, but it is a
  level: a run worse than its mean by more than the bound is a ``regression`` (by the bound alone, no
  p-value), better by more than it ``better``, neither joining it; within it the run is ``accepted``
  and joins it. An accepted change is not a licence for the nights after it.

Leaving the runs off the level out of the baseline trims it on both sides, so its spread is a little
smaller than the noise's (with a bound of 2 standard deviations, by about a tenth): the test leans
towards flagging, which a gate should.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from .. import stats
from ..errors import RegressionFound, UsageError
from ..model import Accepted
from . import changepoints, changes
from .history import History, Point, Series, SeriesKey, changed, points_of
from .metrics import Metric

#: Runs the baseline needs before a run is judged against it (a pinned baseline: ``MIN_PINNED``).
MIN_RUNS = 5
MIN_PINNED = 2
ALPHA = 0.05
DEFAULT_MAX_REGRESSION = 0.05


class GateVerdict(enum.StrEnum):
    """What the gate says of one series: worse beyond the bound and significantly (``REGRESSION``), worse
    beyond it but not significantly (``WORSE``), better beyond it, within it (``OK``), at a new accepted
    level still being measured (``ACCEPTED``), or too few runs (``NO_HISTORY``)."""

    REGRESSION = "regression"
    WORSE = "worse"
    BETTER = "better"
    OK = "ok"
    ACCEPTED = "accepted"
    NO_HISTORY = "no history"

    @property
    def fails(self) -> bool:
        """Whether the series counts as failing (shown first, a JUnit failure): only a regression fails
        the gate; ``worse`` is shown with it."""
        return self in (GateVerdict.REGRESSION, GateVerdict.WORSE)


METHOD = ("one-sided t-test of the run's value against its baseline (the runs at the series' accepted level, "
          "those off it by more than the bound left out), prediction interval of one more run, on logs; p-values "
          "Holm-adjusted over the series judged")


@dataclass(frozen=True)
class Baseline:
    """What a run is judged against in one series: the ``points`` of the runs at its level, their
    ``summary`` (``stats.describe``), the runs ``left_out`` as off that level by more than the bound,
    the ``accepted`` change its level began with (None: none), and whether it was ``pinned``
    (``--baseline``)."""

    points: tuple[Point, ...]
    summary: stats.Summary
    left_out: tuple[int, ...] = ()
    accepted: Accepted | None = None
    pinned: bool = False

    @property
    def first_run(self) -> int | None:
        return self.points[0].run_id if self.points else None

    @property
    def last_run(self) -> int | None:
        return self.points[-1].run_id if self.points else None

    @property
    def needed(self) -> int:
        return MIN_PINNED if self.pinned else MIN_RUNS


@dataclass(frozen=True)
class GateRow:
    """One series' verdict on the run. ``baseline`` is what it was judged against (None when the
    series has no point before the run); ``value`` the run's value in the metric's unit; ``change``
    relative to the baseline's mean; ``p_value`` the one-sided test's, ``adjusted_p`` after Holm;
    ``what_changed`` between the baseline's last run and the run."""

    key: SeriesKey
    metric: Metric
    value: float
    baseline: Baseline | None
    change: float | None
    p_value: float | None
    adjusted_p: float | None
    verdict: GateVerdict
    what_changed: tuple[changes.Change, ...]


@dataclass(frozen=True)
class Gate:
    """The run's verdicts, ``max_regression`` relative (0.05 = 5 %)."""

    run_id: int
    rows: tuple[GateRow, ...]
    max_regression: float
    alpha: float
    method: str = METHOD

    @property
    def regressions(self) -> tuple[GateRow, ...]:
        return tuple(r for r in self.rows if r.verdict == GateVerdict.REGRESSION)

    @property
    def judged(self) -> int:
        """Series judged: every one with a baseline long enough, and those at a new accepted level."""
        return sum(r.verdict != GateVerdict.NO_HISTORY for r in self.rows)

    @property
    def longest_history(self) -> int:
        """Runs in the longest baseline of any series (what ``MIN_RUNS`` is held against)."""
        return max((len(r.baseline.points) for r in self.rows if r.baseline is not None), default=0)

    def shown(self, every: bool = False) -> tuple[GateRow, ...]:
        """The rows, failing series first (``GateVerdict.fails``); only those unless ``every``."""
        failing = tuple(r for r in self.rows if r.verdict.fails)
        return failing + tuple(r for r in self.rows if not r.verdict.fails) if every else failing


def judge(history: History, run_id: int, max_regression: float = DEFAULT_MAX_REGRESSION, alpha: float = ALPHA,
          accepted: Mapping[int, Accepted] | None = None, pinned: Collection[int] | None = None) -> Gate:
    """The gate of run ``run_id`` against ``history`` (which holds it and the runs before it): against
    each series' baseline (see the module docstring), with the changes ``accepted`` (by run id), or
    against the runs ``pinned`` when given. A run with no series in ``history`` gives no rows."""
    rows = [_row(series, index, max_regression, accepted or {}, pinned) for series, index in points_of(history, run_id)]
    adjusted = holm([r.p_value for r in rows])
    final = tuple(_verdict(r, p, max_regression, alpha) for r, p in zip(rows, adjusted, strict=True))
    return Gate(run_id, final, max_regression, alpha)


def _row(series: Series, index: int, max_regression: float, accepted: Mapping[int, Accepted],
         pinned: Collection[int] | None) -> GateRow:
    """The run's point of ``series`` against its baseline, before adjustment."""
    point, before = series.points[index], series.points[:index]
    if not before:
        return GateRow(series.key, series.metric, point.value, None, None, None, None, GateVerdict.NO_HISTORY, ())
    if pinned is not None:
        chosen = tuple(p for p in before if p.run_id in pinned)
        base = Baseline(chosen, stats.describe([p.value for p in chosen]), pinned=True)
    else:
        base = baseline_of(before, series.metric, max_regression, accepted)
    short = len(base.points) < base.needed
    if short and base.accepted is None:
        return GateRow(series.key, series.metric, point.value, base, None, None, None, GateVerdict.NO_HISTORY, ())
    mean = base.summary.mean
    change = point.value / mean - 1 if mean else None
    # a new accepted level too short to test against is held to the bound alone (_verdict)
    p = None if short else prediction_p([b.value for b in base.points], point.value, series.metric.higher_is_better)
    assert base.last_run is not None
    return GateRow(series.key, series.metric, point.value, base, change, p, None,
                   GateVerdict.ACCEPTED if short else GateVerdict.OK,  # _verdict decides
                   changed(series, base.last_run, point.run_id))


def baseline_of(points: Sequence[Point], metric: Metric, bound: float,
                accepted: Mapping[int, Accepted]) -> Baseline:
    """The baseline ``points`` (a series' runs before the one judged, in time order) give: the walk of the
    module docstring, from the last confirmed change to a better level with ``MIN_RUNS`` runs after it."""
    start = 0
    for c in changepoints.detect([p.value for p in points]):
        level = sum(p.value for p in points[c.index:]) / (len(points) - c.index)
        earlier = sum(p.value for p in points[:c.index]) / c.index
        better = level > earlier if metric.higher_is_better else level < earlier
        if c.confirmed and better and len(points) - c.index >= MIN_RUNS:
            start = c.index
    kept: list[Point] = []
    off: list[Point] = []  # the stretch of runs off the level, up to the walk's place
    left_out: list[int] = []
    began: Accepted | None = None
    for p in points[start:]:  # an accepted level holds to the bound from its first run; the first one from MIN_RUNS
        measured = len(kept) >= MIN_RUNS or (began is not None and bool(kept))
        beyond = measured and abs(p.value / _mean(kept) - 1) > bound
        if p.run_id in accepted:  # a new level: the stretch off the old one that ends here, or this run
            kept, began = ([*off, p] if beyond else [p]), accepted[p.run_id]
            left_out = [r for r in left_out if r not in {q.run_id for q in off}]
            off = []
        elif beyond:
            off.append(p)
            left_out.append(p.run_id)
        else:
            kept.append(p)
            off = []
    return Baseline(tuple(kept), stats.describe([p.value for p in kept]), tuple(left_out), began)


def _mean(points: Sequence[Point]) -> float:
    return sum(p.value for p in points) / len(points)


def prediction_p(values: Sequence[float], x: float, higher_is_better: bool) -> float:
    """One-sided p-value of ``x`` being this much worse than one more draw of ``values`` (see the module
    docstring), on logs when every value is positive."""
    from scipy import stats as sps

    logs = all(v > 0 for v in (*values, x))
    ys = [math.log(v) for v in values] if logs else list(values)
    y = math.log(x) if logs else x
    n = len(ys)
    mean = sum(ys) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in ys) / (n - 1))
    if sd == 0:
        worse = y < mean if higher_is_better else y > mean
        return 0.0 if worse else 1.0
    t = (y - mean) / (sd * math.sqrt(1 + 1 / n))
    return float(sps.t.cdf(t, n - 1) if higher_is_better else sps.t.sf(t, n - 1))


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of the known p-values (None stays None): the i-th smallest of m
    becomes max over j <= i of min(1, (m − j + 1) p₍ⱼ₎). Source: S. Holm, "A simple sequentially
    rejective multiple test procedure", Scandinavian Journal of Statistics 6 (1979) 65–70."""
    known = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(known)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(known):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def _verdict(row: GateRow, adjusted: float | None, max_regression: float, alpha: float) -> GateRow:
    if row.change is None:
        return row
    worse = row.change < 0 if row.metric.higher_is_better else row.change > 0
    beyond = abs(row.change) > max_regression
    if row.verdict == GateVerdict.ACCEPTED:  # a new level still being measured: the bound alone
        verdict = (GateVerdict.REGRESSION if worse else GateVerdict.BETTER) if beyond else GateVerdict.ACCEPTED
    elif worse and beyond:
        verdict = GateVerdict.REGRESSION if adjusted is not None and adjusted < alpha else GateVerdict.WORSE
    elif not worse and beyond:
        verdict = GateVerdict.BETTER
    else:
        verdict = GateVerdict.OK
    return GateRow(row.key, row.metric, row.value, row.baseline, row.change, row.p_value, adjusted, verdict,
                   row.what_changed)


class NoHistory(UsageError):
    """The gate has no series with enough runs to judge a run against (exit code 2)."""


def enforce(gate: Gate) -> None:
    """Raise ``RegressionFound`` (exit 3) when the gate found a regression, ``NoHistory`` (exit 2) when
    it could judge no series; return when the run passed."""
    if gate.regressions:
        worst = gate.regressions[0]
        raise RegressionFound(f"run {gate.run_id} is worse than its history in {len(gate.regressions)} series "
                              f"(first: {worst.key.name} on {worst.key.target}, {worst.metric.name} "
                              f"{(worst.change or 0) * 100:+.1f} %)",
                              hint=f"the table shows what changed since each baseline's last run; if the change is "
                                   f"intended: iolab accept {gate.run_id} --reason TEXT")
    if not gate.judged:
        raise NoHistory(f"no history to judge run {gate.run_id} against: its series have at most "
                        f"{gate.longest_history} comparable run(s) at their level, and the gate needs "
                        f"{MIN_RUNS}", hint=f"store at least {MIN_RUNS} runs of the same suite on this host "
                                            "(iolab run, or iolab import of earlier fio outputs) before gating")
