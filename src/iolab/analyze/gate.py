"""The CI gate: is one run worse than the history before it? Pure.

For every series (``analyze.history``) with a point of the run, the points before it (in time
order) are segmented as ``history`` segments them, and the run is judged against the **last stable
segment**, the runs since the last change point, when it holds at least ``MIN_RUNS`` runs:

* ``change`` = run value / segment mean − 1;
* the test (``METHOD``): a one-sided t-test of the run's value against the segment's values, on logs
  (a ratio, as ``compare`` tests), ``t = (x − mean) / (s · √(1 + 1/n))`` with n − 1 degrees of
  freedom: the probability of a value at least this much worse if the run were one more run of the
  segment (the prediction interval of a new observation; NIST/SEMATECH e-Handbook §7.2.2 and
  Hahn & Meeker, *Statistical Intervals*, §4.7). The p-values of all judged series are adjusted
  together by Holm's step-down method (Holm 1979): with twenty workloads × four metrics judged on
  every CI run, an unadjusted 1 % test would fail a clean run most days.
* ``regression`` when the change is worse than ``max_regression`` and the adjusted p-value is below
  ``alpha``; ``worse`` (beyond the bound, not significant), ``better``, ``ok``; ``no history`` when
  the last stable segment is shorter than ``MIN_RUNS`` (it says how many runs it has).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import RegressionFound, UsageError
from . import changepoints, changes
from .history import History, Segment, Series, SeriesKey, changed, points_of, segments_of
from .metrics import Metric

#: Runs the last stable segment needs before a run is judged against it.
MIN_RUNS = 5
ALPHA = 0.05
DEFAULT_MAX_REGRESSION = 0.05


class GateVerdict(enum.StrEnum):
    """What the gate says of one series: worse beyond the bound and significantly (``REGRESSION``), worse
    beyond it but not significantly (``WORSE``), better beyond it, within it (``OK``), or too few runs."""

    REGRESSION = "regression"
    WORSE = "worse"
    BETTER = "better"
    OK = "ok"
    NO_HISTORY = "no history"

METHOD = ("one-sided t-test of the run's value against the last stable segment's values (prediction interval of "
          "one more run, on logs), p-values Holm-adjusted over the series judged")


@dataclass(frozen=True)
class GateRow:
    """One series' verdict on the run. ``segment`` is the last stable segment before the run (None
    when the series has no point before it); ``value`` the run's value in the metric's unit;
    ``change`` relative to the segment's mean; ``p_value`` the one-sided test's, ``adjusted_p`` after
    Holm; ``what_changed`` between the segment's last run and the run."""

    key: SeriesKey
    metric: Metric
    value: float
    segment: Segment | None
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
        return sum(r.verdict != GateVerdict.NO_HISTORY for r in self.rows)

    @property
    def longest_history(self) -> int:
        """Runs in the longest last stable segment of any series (what ``MIN_RUNS`` is held against)."""
        return max((r.segment.end - r.segment.start for r in self.rows if r.segment is not None), default=0)


def judge(history: History, run_id: int, max_regression: float = DEFAULT_MAX_REGRESSION,
          alpha: float = ALPHA) -> Gate:
    """The gate of run ``run_id`` against ``history`` (which holds it and the runs before it). A run
    with no series in ``history`` gives no rows."""
    rows = []
    for series, index in points_of(history, run_id):
        rows.append(_row(series, index, max_regression))
    adjusted = holm([r.p_value for r in rows])
    final = tuple(_verdict(r, p, max_regression, alpha) for r, p in zip(rows, adjusted, strict=True))
    return Gate(run_id, final, max_regression, alpha)


def _row(series: Series, index: int, max_regression: float) -> GateRow:
    """The run's point of ``series`` against its last stable segment, before adjustment."""
    point, before = series.points[index], series.points[:index]
    found = changepoints.detect([p.value for p in before])
    segments = segments_of(before, [c.index for c in found])
    last = segments[-1] if segments else None
    values = [p.value for p in before[last.start:last.end]] if last is not None else []
    if last is None or len(values) < MIN_RUNS:
        return GateRow(series.key, series.metric, point.value, last, None, None, None, GateVerdict.NO_HISTORY, ())
    assert last.summary.mean is not None
    change = point.value / last.summary.mean - 1 if last.summary.mean else None
    p = prediction_p(values, point.value, series.metric.higher_is_better)
    return GateRow(series.key, series.metric, point.value, last, change, p, None, GateVerdict.OK,  # _verdict decides
                   changed(series, before[-1].run_id, point.run_id))


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
    if row.verdict == GateVerdict.NO_HISTORY or row.change is None:
        return row
    worse = row.change < 0 if row.metric.higher_is_better else row.change > 0
    beyond = abs(row.change) > max_regression
    if worse and beyond:
        verdict = GateVerdict.REGRESSION if adjusted is not None and adjusted < alpha else GateVerdict.WORSE
    elif not worse and beyond:
        verdict = GateVerdict.BETTER
    else:
        verdict = GateVerdict.OK
    return GateRow(row.key, row.metric, row.value, row.segment, row.change, row.p_value, adjusted, verdict,
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
                              hint="the table shows what changed since each series' last stable runs")
    if not gate.judged:
        raise NoHistory(f"no history to judge run {gate.run_id} against: its series have at most "
                        f"{gate.longest_history} comparable run(s) since their last change, and the gate needs "
                        f"{MIN_RUNS}", hint=f"store at least {MIN_RUNS} runs of the same suite on this host "
                                            "(iolab run, or iolab import of earlier fio outputs) before gating")
