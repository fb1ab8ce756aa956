"""History: the same workload across stored runs, its change points, and what changed at each. Pure.

``build(stored)`` takes what ``Store.history`` read and returns a ``History``: one ``Series`` per
workload × target × host × metric, its points in time order, its change points
(``analyze.changepoints``) and segments, each change point with what changed between the runs
on either side of it (``analyze.changes``).

**Series.** A result's fio jobs are split as ``compare`` splits them (``fio.merge.by_job``: numjobs
clones summed, percentiles from merged histograms; one series per direction), and a job belongs to
the series of its target, host and fio job name whose canonical options (``canonical``) it is
comparable with: no option that blocks ``compare`` differs. A run whose
options differ starts a new series (``Series.started_by`` names the options), never a silent join;
options that only change how long or how a job is measured (``canonical.SOFT``: ``runtime`` …) do
not, and show as a change instead. Every origin counts (``run``, ``imported``, ``capture``); a
point's time is when its first result ended (an imported output's own timestamp), else when its run
was stored. A run with several repetitions of a workload is one point: their mean (each kept in
``Point.repeats``).

**Host** identity is the host name the run recorded, else its tag ``host`` (imports record no host:
``iolab import --tag host=NAME``), else unknown (None); runs on another host are another series.

**Metrics** are ``compare.metric`` names (default ``DEFAULT_METRICS``: IOPS, bandwidth, clat mean
and p99, and the observers' CPU µs per I/O where they measured it); a series whose runs never
measured a metric is left out. A result's figures of ``store.history.FIGURES`` and the cost metrics
come from what the store keeps of it (``HistoryResult.figures``) when it is given, else from its report.

**Change points** of a series are those ``changepoints.detect`` finds (the last one possibly
unconfirmed: too few runs after it to be significant), with its segments' summaries; given a
``ChangeCache``, those of a series whose values were seen before are read from it instead
(``changepoints.key``), and those found are added to it. Changes people accepted as intended
(``iolab accept``) are listed with the series whose runs they name (``Series.accepted``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

from .. import stats
from ..describe import canonical
from ..fio.merge import by_job
from ..model import Accepted, DirectionStats, FioReport, ResultRecord, RunInfo
from ..store.history import FIGURES, HistoryResult, light_report
from ..store.history import History as Stored
from . import changepoints, changes
from .compare import Verdict
from .metrics import Metric, metric

DEFAULT_METRICS = ("iops", "bw", "clat_mean", "clat_p99", "cpu_us_per_io")


@dataclass(frozen=True)
class SeriesKey:
    """What a series is of: ``workload`` is the fio job name (as ``compare`` pairs results), ``direction``
    fio's, ``host`` the host identity (None: unknown), ``part`` 1 for the first comparable stretch,
    2 … after options changed; ``label`` the workload name the results were stored under when all of
    them share one that is not the job name (a sweep's ``randread 4k QD8``, a suite's ``w1``)."""

    target: str
    workload: str
    direction: str
    host: str | None
    part: int = 1
    label: str | None = None

    @property
    def name(self) -> str:
        """``workload (direction)`` as tables show it, with the label and part when there are."""
        name = f"{self.label}/{self.workload}" if self.label else self.workload
        return f"{name} ({self.direction})" + (f" #{self.part}" if self.part > 1 else "")


class Point(NamedTuple):
    """One run's value of a series, in the metric's unit: the mean of ``repeats``, the values of its
    repetitions; ``time`` as the module docstring says. (A named tuple: a history of 1,000 runs × 20
    workloads makes 100,000 of them, three times as fast as a frozen dataclass.)"""

    run_id: int
    time: datetime
    value: float
    repeats: tuple[float, ...]


@dataclass(frozen=True)
class Segment:
    """Points ``start`` to ``end`` (exclusive) of a series between change points, and their summary
    (mean and 95 % Student-t interval of the points' values, ``stats.describe``)."""

    start: int
    end: int
    first_run: int
    last_run: int
    summary: stats.Summary


@dataclass(frozen=True)
class ChangeAt:
    """A change point: ``run_id`` is the first run of the new level, ``previous_run`` the last of the
    old; ``before``/``after`` the two segments' means, ``change`` ``after / before - 1``; ``p_value``
    the permutation test's; ``verdict`` ``better`` or ``worse`` (the metric's direction);
    ``what_changed`` the facts that differ between the two runs. ``confirmed`` False: too few runs
    after it for the test to reach its level, ``runs_needed`` more at the new level would
    (``changepoints.ChangePoint``)."""

    run_id: int
    previous_run: int
    time: datetime
    before: float
    after: float
    change: float
    p_value: float
    verdict: str
    what_changed: tuple[changes.Change, ...]
    confirmed: bool = True
    runs_needed: int = 0


@dataclass(frozen=True)
class Series:
    """One metric of one workload over time. ``started_by``: for a series that began because its
    options stopped being comparable with the series before it (``key.part`` > 1), the options that
    differ (``canonical.Difference``, blocking). ``accepted``: the changes accepted as intended at runs
    of this series (``iolab accept``), oldest first."""

    key: SeriesKey
    metric: Metric
    options: canonical.Options
    points: tuple[Point, ...]
    segments: tuple[Segment, ...]
    changes: tuple[ChangeAt, ...]
    started_by: tuple[canonical.Difference, ...] = ()
    accepted: tuple[Accepted, ...] = ()
    #: The first observation of each run (for ``changed``).
    observed: Mapping[int, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class History:
    """Every series found, in order of target, workload, direction, host, part and metric; ``unreadable``
    the runs left out because a stored report of theirs is not in the form iolab writes (id, why)."""

    series: tuple[Series, ...]
    metrics: tuple[Metric, ...]
    method: str = changepoints.METHOD
    unreadable: tuple[tuple[int, str], ...] = ()


class ChangeCache(Protocol):
    """Where detections are kept between calls (``store.history.ChangePointCache``): an entry is the
    JSON ``build`` makes of one series' detection, by ``changepoints.key`` of its values."""

    def get(self, keys: Sequence[str]) -> Mapping[str, Any]: ...

    def put(self, entries: Mapping[str, Any]) -> None: ...


@dataclass
class _Observation:
    """One fio job × direction of one stored result, with what a series needs of it: its merged
    ``stats`` and the ``report`` they came from, or ``figures`` (``FIGURES``' values) and the stored
    I/O count ``ios``."""

    run: RunInfo
    result: HistoryResult
    job: str
    direction: str
    options: canonical.Options
    fio_version: str | None
    time: datetime  # the result's end, else its run's start
    stats: DirectionStats | None = None
    report: FioReport | None = None
    figures: tuple[float | None, ...] = ()
    ios: int | None = None


@dataclass
class _Track:
    """The observations of one comparable stretch of a target × host × fio job × direction."""

    key: SeriesKey
    options: list[canonical.Options]
    started_by: tuple[canonical.Difference, ...]
    observations: list[_Observation] = field(default_factory=list)


def metrics_of(names: Sequence[str] | None) -> tuple[Metric, ...]:
    """The metrics called ``names`` (default ``DEFAULT_METRICS``), without repeats. Raises
    ``UsageError`` for an unknown name (``compare.metric``)."""
    return tuple({m.name: m for m in (metric(n) for n in (names or DEFAULT_METRICS))}.values())


def host_of(run: RunInfo) -> str | None:
    """The host identity of a run (see the module docstring)."""
    return (run.host.hostname if run.host is not None and run.host.hostname else None) or run.tags.get("host")


def figured(metrics: Sequence[Metric]) -> bool:
    """Whether the stored figures (``Store.history(figures=True)``) give every metric of ``metrics``."""
    return all(m.name in FIGURES if m.of_result is None else m.of_ios is not None for m in metrics)


def build(stored: Stored, metric_names: Sequence[str] | None = None, host: str | None = None,
          cache: ChangeCache | None = None, accepted: Mapping[int, Accepted] | None = None) -> History:
    """The history of the results ``stored`` (``Store.history``), for the metrics ``metric_names``
    (default ``DEFAULT_METRICS``), of the host ``host`` only when given; change points kept in and
    read from ``cache`` when given; the changes ``accepted`` (by run id) listed with their series.
    Results with stored figures need metrics ``figured`` gives. Raises ``UsageError`` for an unknown
    metric."""
    chosen = metrics_of(metric_names)
    runs = {r.id: r for r in stored.runs if host is None or host_of(r) == host}
    unreadable: dict[int, str] = {}
    tracks = _tracks(_observations(stored.results, runs, unreadable))
    found = [s for track in sorted(tracks, key=lambda t: _order(t.key)) for s in _track_points(track, chosen)]
    keys = [changepoints.key([p.value for p in points]) for *_, points, _ in found]
    known = dict(cache.get(sorted(set(keys)))) if cache is not None else {}
    new: dict[str, Any] = {}
    for k, (_, _, _, points, _) in zip(keys, found, strict=True):
        if k not in known:
            known[k] = new[k] = _detected(points)
    if cache is not None and new:
        cache.put(new)
    return History(tuple(_series(key, m, track, points, first, known[k], accepted or {})
                         for k, (key, m, track, points, first) in zip(keys, found, strict=True)), chosen,
                   unreadable=tuple(unreadable.items()))


def _order(key: SeriesKey) -> tuple[Any, ...]:
    return (key.target, key.workload, key.direction, key.host or "", key.part)


def _observations(results: Iterable[HistoryResult], runs: Mapping[int, RunInfo],
                  unreadable: dict[int, str]) -> list[_Observation]:
    """Every job × direction of the results of ``runs``, in time order; a run with a report not in the
    stored form goes to ``unreadable`` (id -> why) and is left out whole."""
    found = []
    for result in results:
        run = runs.get(result.run_id)
        if run is None:
            continue
        figures = result.figures
        report = None
        if figures is None:
            try:
                report = light_report(result.report or {})
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                unreadable.setdefault(run.id, f"result {result.id} ({result.target} / {result.workload}): report: "
                                              f"{type(exc).__name__}: {exc}")
                continue
        fio_version = figures.fio_version if figures is not None else report.fio_version if report else None
        options = _job_options(result.job_text, _unknown(result.extra), run.fio_version or fio_version,
                               _size(result), (result.extra or {}).get("pass"))
        parts: list[tuple[str, str, dict[str, Any]]] = (
            [(job, direction, {"figures": values, "ios": figures.ios}) for job, direction, values in figures.jobs]
            if figures is not None else
            [(job, direction, {"stats": merged, "report": report})
             for (job, direction), merged in by_job(report).items()])
        time = result.ended_at or run.created_at
        found += [_Observation(run, result, job, direction, options.get(job) or canonical.Options({}, None),
                               fio_version, time, **data) for job, direction, data in parts]
    found = [o for o in found if o.run.id not in unreadable]
    found.sort(key=lambda o: (o.time, o.run.id, o.result.id))
    return found


def _unknown(extra: Mapping[str, Any] | None) -> tuple[str, ...] | None:
    unknown = (extra or {}).get("unknown_options")
    return None if unknown is None else tuple(unknown)


def _size(result: HistoryResult) -> int | None:
    facts = result.target_facts
    return facts.size_bytes if facts is not None and facts.kind in ("block", "file") else None


@lru_cache(maxsize=4096)
def _job_options(job_text: str, unknown: tuple[str, ...] | None, version: str | None, size: int | None,
                 number: int | None) -> dict[str, canonical.Options]:
    """``canonical.job_options`` of a result, computed once per distinct job text (runs repeat them)."""
    found = canonical.job_text_options(job_text, None if unknown is None else list(unknown), version, size)
    if not number:
        return found
    return {job: canonical.Options(dict(sorted({**o.values, canonical.PASS: str(number)}.items())), o.unknown)
            for job, o in found.items()}


def _tracks(observations: Iterable[_Observation]) -> list[_Track]:
    """Observations grouped into comparable stretches (see the module docstring): each joins the
    latest stretch of its target, host, fio job and direction whose options it agrees with."""
    groups: dict[tuple[Any, ...], list[_Track]] = {}
    for o in observations:
        group_key = (o.result.target, host_of(o.run), o.job, o.direction)
        tracks = groups.setdefault(group_key, [])
        track = next((t for t in reversed(tracks) if _comparable(t, o.options)), None)
        if track is None:
            blocking: tuple[canonical.Difference, ...] = ()
            if tracks:
                diffs, _ = canonical.differences(tracks[-1].options[0], o.options)
                blocking = tuple(d for d in diffs if d.effect == "blocking")
            target, host, job, direction = group_key
            track = _Track(SeriesKey(target, job, direction, host, len(tracks) + 1), [o.options], blocking)
            tracks.append(track)
        elif o.options not in track.options:
            track.options.append(o.options)
        track.observations.append(o)
    return [t for tracks in groups.values() for t in tracks]


def _comparable(track: _Track, options: canonical.Options) -> bool:
    return all(known is options or known == options  # equal options differ in nothing (most runs: one job text)
               or not any(d.effect == "blocking" for d in canonical.differences(known, options)[0])
               for known in track.options)


def _track_points(track: _Track, metrics: Sequence[Metric]) -> list[tuple[SeriesKey, Metric, _Track,
                                                                           tuple[Point, ...], dict[int, _Observation]]]:
    """The points of each metric over ``track`` that some run of it measured, with the series' key and
    the first observation of each run."""
    runs: dict[int, list[_Observation]] = {}
    for o in track.observations:  # in time order: a run's first observation is its earliest
        runs.setdefault(o.run.id, []).append(o)
    first = {run_id: observed[0] for run_id, observed in runs.items()}
    labels = {o.result.workload for o in track.observations}
    label = labels.pop() if len(labels) == 1 else None
    key = replace(track.key, label=label if label != track.key.workload else None)
    observed_any = any("observed" in (o.result.extra or {}) for o in track.observations)
    found = []
    for m in metrics:
        if m.of_result is not None and not observed_any:
            continue  # a cost metric where no observer measured: no point (``_cost``)
        value = _reader(m)
        points = []
        for run_id, observed in runs.items():
            if len(observed) == 1:  # most runs: one repetition, its value the point (no list, sum or tuple)
                if (v := value(observed[0])) is not None:
                    points.append(Point(run_id, observed[0].time, v, (v,)))
                continue
            values = [v for o in observed if (v := value(o)) is not None]
            if values:
                points.append(Point(run_id, observed[0].time, sum(values) / len(values), tuple(values)))
        if points:
            found.append((key, m, track, tuple(points), first))
    return found


def _detected(points: Sequence[Point]) -> dict[str, Any]:
    """The change points of ``points`` (``changepoints.detect``) and their segments' summaries, as JSON
    (``{"changes": [[index, p, confirmed, runs needed], …], "segments": [[n, mean, stdev, min, max, ci95 low,
    high], …]}``)."""
    found = changepoints.detect([p.value for p in points])
    segments = segments_of(points, [c.index for c in found])
    return {"changes": [[c.index, c.p_value, c.confirmed, c.runs_needed] for c in found],
            "segments": [[g.summary.n, g.summary.mean, g.summary.stdev, g.summary.minimum, g.summary.maximum,
                          *(g.summary.ci95 or (None, None))] for g in segments]}


def _series(key: SeriesKey, m: Metric, track: _Track, points: tuple[Point, ...],
            first: Mapping[int, _Observation], detected: Mapping[str, Any], accepted: Mapping[int, Accepted]) -> Series:
    """One metric's series over ``track``: its change points and segments (``_detected``'s), what
    changed at each, and the changes accepted at its runs."""
    starts = [int(index) for index, *_ in detected["changes"]]
    bounds = [0, *starts, len(points)]
    segments = [Segment(a, b, points[a].run_id, points[b - 1].run_id,
                        stats.Summary(n, mean, stdev, low, high, None if lo is None else (lo, hi)))
                for (a, b), (n, mean, stdev, low, high, lo, hi) in zip(itertools.pairwise(bounds),
                                                                      detected["segments"], strict=True)]
    at = []
    for (index, p_value, confirmed, needed), before, after in zip(detected["changes"], segments, segments[1:],
                                                                  strict=False):
        old, new = points[index - 1], points[index]
        assert before.summary.mean is not None and after.summary.mean is not None
        ratio = after.summary.mean / before.summary.mean - 1 if before.summary.mean else 0.0
        at.append(ChangeAt(new.run_id, old.run_id, new.time, before.summary.mean, after.summary.mean, ratio,
                           p_value, Verdict.BETTER if (ratio > 0) == m.higher_is_better else Verdict.WORSE,
                           what_changed(first[old.run_id], first[new.run_id]), confirmed, needed))
    mine = tuple(accepted[p.run_id] for p in points if p.run_id in accepted)
    return Series(key, m, track.options[0], points, tuple(segments), tuple(at), track.started_by, mine, first)


def changed(series: Series, before_run: int, after_run: int) -> tuple[changes.Change, ...]:
    """What changed between two runs of ``series`` (``analyze.changes``)."""
    return what_changed(series.observed[before_run], series.observed[after_run])


def segments_of(points: Sequence[Point], starts: Sequence[int]) -> list[Segment]:
    """The segments of ``points`` cut before each index of ``starts`` (ascending)."""
    bounds = [0, *starts, len(points)]
    return [Segment(a, b, points[a].run_id, points[b - 1].run_id, stats.describe([p.value for p in points[a:b]]))
            for a, b in itertools.pairwise(bounds) if b > a]


def _reader(m: Metric) -> Callable[[_Observation], float | None]:
    """What reads the metric's value of an observation: from its stats, else its stored figures (a
    cost metric from the observers' figures, ``_cost``)."""
    of_result, of_ios = m.of_result, m.of_ios
    if of_result is not None:
        return lambda o: _cost(of_result, of_ios, o)
    index = FIGURES.index(m.name) if m.name in FIGURES else -1
    return lambda o: m.value(o.stats) if o.stats is not None else o.figures[index]


def _cost(of_result: Callable[[ResultRecord], float | None],
          of_ios: Callable[[ResultRecord, int | None], float | None] | None, o: _Observation) -> float | None:
    if "observed" not in (o.result.extra or {}):
        return None
    r = o.result
    record = ResultRecord(id=r.id, run_id=r.run_id, seq=0, target=r.target, workload=r.workload, repeat=0,
                          status="ok", job_text=r.job_text, job_hash="", report=o.report, extra=r.extra,
                          target_facts=r.target_facts, ended_at=r.ended_at)
    if o.report is None and of_ios is not None:
        return of_ios(record, o.ios)
    return of_result(record)


def what_changed(before: _Observation, after: _Observation) -> tuple[changes.Change, ...]:
    """The facts that differ between two observations of a series (``analyze.changes``)."""
    return changes.between(changes.facts(before.run, before.result, before.fio_version),
                           changes.facts(after.run, after.result, after.fio_version), before.options, after.options)


def select(history: History, workloads: Sequence[str] = ()) -> History:
    """The series of ``history`` of ``workloads`` (fio job names or stored workload names; empty: all)."""
    return replace(history, series=tuple(s for s in history.series if not workloads or s.key.workload in workloads
                                         or s.key.label in workloads))


def points_of(history: History, run_id: int) -> Iterator[tuple[Series, int]]:
    """Each series with a point of run ``run_id``, and that point's index."""
    for s in history.series:
        for i, p in enumerate(s.points):
            if p.run_id == run_id:
                yield s, i
                break
