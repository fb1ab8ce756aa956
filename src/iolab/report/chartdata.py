"""Runs flattened into the rows the charts draw: plain dicts of numbers and names.

A *subject* is one line or bar colour: a target of a run (``ssd``), or with several runs the
run and its target (``baseline · ssd``). A *category* is what a panel shows: a workload, plus
the fio job when a job file has several, plus the direction when the workload does several
(``mixed · read``). Aggregation follows ``fio.merge``: per repetition, numjobs clones and
hosts are summed (IOPS, bandwidth) and latency is merged over all I/Os; repetitions stay
separate rows (bars show their mean, points each one) except for latency percentiles, which
are computed from the repetitions' pooled json+ histograms (never by averaging percentiles).

A multi-host target (fio's client/server mode) is drawn as its ``all hosts`` aggregate, like
its row in the results table, except in the time series: there each host is a subject of its
own (``many · 10.0.0.11:8765``), since what one host did over time is what they are for.

Units in the rows are for people: IOPS, MiB/s, µs, seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..analyze import sweep
from ..analyze.compare import Comparison, verdict_word
from ..fio.merge import by_job, merge_latency
from ..model import DirectionStats, Latency, ResultRecord, Run, TimeSeries
from .results import ALL_HOSTS, ResultRow, result_rows

Row = dict[str, Any]


@dataclass(frozen=True)
class Subjects:
    """Display names: ``(run id, target) -> name``, in run then plan order."""

    names: Mapping[tuple[int, str], str]

    @property
    def order(self) -> list[str]:
        return list(dict.fromkeys(self.names.values()))


def run_name(run: Run, runs: Sequence[Run]) -> str:
    """``label`` when it is set and tells the runs apart, else ``run N`` (with the label)."""
    label = run.info.label
    labels = [r.info.label for r in runs]
    if label and labels.count(label) == 1:
        return label
    return f"run {run.info.id}" + (f" ({label})" if label else "")


def subjects(runs: Sequence[Run]) -> Subjects:
    """Names for every (run, target): the target alone for one run; for several, the run
    (label), followed by ``· target`` when a run has several targets or the runs' targets have
    different names (unless the target is named like the run)."""
    targets = {run.info.id: list(dict.fromkeys(r.target for r in run.results)) for run in runs}
    one_each = all(len(t) == 1 for t in targets.values())
    same_target = one_each and len({t[0] for t in targets.values()}) == 1
    names = {}
    for run in runs:
        name = run_name(run, runs)
        for target in targets[run.info.id]:
            if len(runs) == 1:
                names[(run.info.id, target)] = target
            elif same_target or (one_each and target == name):
                names[(run.info.id, target)] = name
            else:
                names[(run.info.id, target)] = f"{name} · {target}"
    return Subjects(names)


def _completion(d: DirectionStats) -> Latency | None:
    """Completion latency; sync-only directions carry only ``lat`` (as in the results table)."""
    return d.clat if d.clat is not None and d.clat.samples != 0 else d.lat


class Categories:
    """Panel names for (workload, fio job, direction, warm-up pass), built from every run shown: a
    warm-up's passes are panels of their own (``… · pass 2``), never repetitions of one."""

    def __init__(self, runs: Sequence[Run]) -> None:
        self._dirs: dict[tuple[str, str], list[str]] = {}
        self._passes: dict[tuple[str, str], list[int]] = {}
        for run in runs:
            for row in result_rows(run):
                if row.direction != "–":
                    dirs = self._dirs.setdefault((row.workload, row.job), [])
                    passes = self._passes.setdefault((row.workload, row.job), [])
                    dirs += [row.direction] if row.direction not in dirs else []
                    passes += [row.pass_index] if row.pass_index not in passes else []

    def name(self, workload: str, job: str, direction: str, pass_index: int = 0) -> str:
        parts = [workload] + ([job] if job != workload else [])
        if len(self._dirs.get((workload, job), [])) > 1:
            parts.append(direction)
        if pass_index:
            parts.append(f"pass {pass_index}")
        return " · ".join(parts)

    @property
    def order(self) -> list[str]:
        return [self.name(w, j, d, p) for (w, j), dirs in self._dirs.items() for p in sorted(self._passes[(w, j)])
                for d in dirs]


def pass_of(result: ResultRecord) -> int:
    """A result's warm-up pass (``extra["pass"]``), 0 without."""
    return int((result.extra or {}).get("pass") or 0)


def aggregate_rows(run: Run) -> list[ResultRow]:
    """``result_rows`` without the per-host rows of multi-host targets (their ``all hosts``
    row is the target's figure)."""
    return [r for r in result_rows(run) if r.host in (None, ALL_HOSTS)]


def repeat_rows(runs: Sequence[Run], subj: Subjects, cats: Categories) -> list[Row]:
    """One row per subject × category × successful repetition: IOPS and MiB/s."""
    rows = []
    for run in runs:
        for r in aggregate_rows(run):
            for i, (iops, bw) in enumerate(zip(r.iops_values, r.bw_values, strict=True)):
                if iops is None:
                    continue
                rows.append({"subject": subj.names[(run.info.id, r.target)],
                             "category": cats.name(r.workload, r.job, r.direction, r.pass_index), "repeat": i + 1,
                             "iops": iops, "mib_s": None if bw is None else bw / 1048576})
    return rows


def percentile_rows(runs: Sequence[Run], subj: Subjects, cats: Categories) -> tuple[list[Row], list[str]]:
    """Completion-latency percentiles per subject × category over all repetitions, and the
    percentile labels in order (``p1`` … ``p99.99``). Without json+ bins several repetitions
    cannot be pooled, so each is drawn on its own (``repeat`` set)."""
    pooled: dict[tuple[str, str], list[Latency | None]] = {}
    for run in runs:
        for result in run.results:
            if result.status != "ok":
                continue
            for (job, direction), d in by_job(result.report).items():
                key = (subj.names[(run.info.id, result.target)],
                       cats.name(result.workload, job, direction, pass_of(result)))
                pooled.setdefault(key, []).append(_completion(d))
    rows: list[Row] = []
    for (subject, category), parts in pooled.items():
        merged = merge_latency(parts)
        groups = [(None, merged)] if merged is not None and merged.percentiles_ns else list(enumerate(parts, 1))
        for repeat, lat in groups:
            for pct, ns in (lat.percentiles_ns if lat else {}).items():
                if ns > 0:
                    rows.append({"subject": subject, "category": category, "repeat": repeat,
                                 "pct": f"p{pct}", "pct_value": float(pct), "lat_us": ns / 1000})
    labels = [f"p{k:g}" for k in sorted({r["pct_value"] for r in rows})]
    return rows, labels


def sweep_rows(runs: Sequence[Run], subj: Subjects) -> list[Row]:
    """The points of sweeps: per subject and workload (and direction), its iodepth, numjobs, IOPS,
    MiB/s and completion latency (mean, p99; µs), its family (``sweep.families``' name, plus the
    direction for a mixed workload) and the panel it is drawn in when the lines are of one subject
    each (``subject · family``, with several subjects). Only families with two or more grid points are
    kept; empty when there are none."""
    found = [(run, r) for run in runs for r in aggregate_rows(run) if r.iops.mean is not None and r.direction != "–"]
    names = sweep.families([r.options for _, r in found])
    several = len({subj.names[(run.info.id, r.target)] for run, r in found}) > 1
    rows: list[Row] = []
    for (run, r), family in zip(found, names, strict=True):
        if r.options.get("rw") in (None, "rw", "randrw"):
            family += f" {r.direction}"
        subject = subj.names[(run.info.id, r.target)]
        rows.append({"subject": subject, "family": family, "panel": f"{subject} · {family}" if several else family,
                     "workload": r.name, "iodepth": _int(r.options.get("iodepth")),
                     "numjobs": _int(r.options.get("numjobs")), "iops": r.iops.mean,
                     "mib_s": None if r.bw.mean is None else r.bw.mean / 1048576,
                     "lat_mean_us": None if r.clat_mean.mean is None else r.clat_mean.mean / 1000,
                     "lat_p99_us": None if r.clat_p99.mean is None else r.clat_p99.mean / 1000})
    points: dict[str, set[tuple[int, int]]] = {}
    for row in rows:
        points.setdefault(row["panel"], set()).add((row["iodepth"], row["numjobs"]))
    return [row for row in rows if len(points[row["panel"]]) >= 2]


def _int(value: str | None) -> int:
    return int(value) if value is not None and value.isdigit() else 1


def ratio_rows(comparison: Comparison) -> list[Row]:
    """The ratio (other side / baseline) of the comparison's first metric at each grid point of
    paired sweeps: ``panel`` is ``other / baseline · family``; empty when no side is a sweep."""
    if not comparison.metrics:
        return []
    metric = comparison.metrics[0]
    rows: list[Row] = []
    for c in comparison.comparisons:
        pairs = [p for p in c.pairs if p.a is not None and p.b is not None]
        table = sweep.option_table([p.a.options for p in pairs if p.a is not None])
        if not sweep.is_sweep(table):
            continue
        for pair, options, family in zip(pairs, table, sweep.families(table), strict=True):
            row = next((m for m in pair.metrics if m.metric.name == metric.name), None)
            if row is None or row.ratio is None or row.ratio <= 0:
                continue
            rows.append({"panel": f"{c.other.selector} / {c.baseline.selector} · {family}"
                         + (f" {pair.direction}" if options.get("rw") in (None, "rw", "randrw") else ""),
                         "metric": metric.title, "higher_is_better": metric.higher_is_better,
                         "iodepth": _int(options.get("iodepth")), "numjobs": _int(options.get("numjobs")),
                         "ratio": row.ratio, "verdict": verdict_word(row)})
    return rows


def search_rows(runs: Sequence[Run], subj: Subjects) -> list[Row]:
    """The probes of saturation runs (``iolab saturate``): per probe its IOPS, the latency the search
    judged by (the SLO metric, else the mean; µs), iodepth, numjobs and role (``probe``, ``knee``,
    ``chosen``, or ``knee & chosen``), and the SLO limit (µs) of its run."""
    rows: list[Row] = []
    for run in runs:
        found = run.info.options.get("saturation")
        if not isinstance(found, Mapping):
            continue
        slo = found.get("slo")
        marked = {"knee": found.get("knee"), "chosen": found.get("chosen")}
        subject = subj.names[(run.info.id, run.results[0].target)] if run.results else run_name(run, runs)
        for p in found.get("probes", ()):
            latency = p["slo_ns"] if slo else p["lat_mean_ns"]
            roles = [role for role, m in marked.items() if m is not None and (m["iodepth"], m["numjobs"]) ==
                     (p["iodepth"], p["numjobs"])]
            rows.append({"subject": subject, "iodepth": p["iodepth"], "numjobs": p["numjobs"],
                         "point": f"QD{p['iodepth']} ×{p['numjobs']}", "iops": p["iops"],
                         "lat_us": None if latency is None else latency / 1000,
                         "role": " & ".join(roles) or "probe", "slo_us": slo["limit_ns"] / 1000 if slo else None,
                         "metric": slo["text"].split(" ≤")[0] if slo else "clat mean"})
    return rows


def time_rows(runs: Sequence[Run], series: Mapping[int, Sequence[TimeSeries]], subj: Subjects,
              cats: Categories) -> list[Row]:
    """Per second of each repetition: IOPS and MiB/s summed over numjobs clones, completion
    latency (µs) averaged over them weighted by each one's IOPS in that window.

    A multi-host result (``extra["hosts"]``) gives rows per host, subject ``target · host``
    (also of a ``partial`` repetition: the hosts that reported), since hosts' logs start with
    their own jobs; an imported client output is already one result per host.
    """
    rows: list[Row] = []
    for run in runs:
        for result in run.results:
            mine = series.get(result.id, ())
            per_host = bool((result.extra or {}).get("hosts"))
            if not mine or not (result.status == "ok" or (per_host and result.status == "partial")):
                continue
            subject = subj.names[(run.info.id, result.target)]
            groups: dict[str | None, list[TimeSeries]] = {}
            for s in mine:
                groups.setdefault(s.hostname if per_host else None, []).append(s)
            for host, host_series in groups.items():
                name = subject if host is None else f"{subject} · {host}"
                for (job, direction), points in _per_second(host_series).items():
                    category = cats.name(result.workload, job, direction, pass_of(result))
                    for t_s, p in sorted(points.items()):
                        rows.append({"subject": name, "host": host, "category": category,
                                     "repeat": result.repeat + 1, "t_s": t_s, **p})
    return rows


def _point(points: dict[float, Row], t_s: float) -> Row:
    return points.setdefault(t_s, {"iops": None, "mib_s": None, "lat_us": None})


def _per_second(series: Sequence[TimeSeries]) -> dict[tuple[str, str], dict[float, Row]]:
    """``(job, direction) -> {window end in s: {"iops", "mib_s", "lat_us"}}``.

    A sum is drawn only for windows every clone logged: fio's final window is often missing
    for some clones only (FIO_NOTES §6.1), and half a sum would look like a collapse."""
    groups: dict[tuple[str, str], dict[str, dict[tuple[int, str | None], dict[float, float]]]] = {}
    for s in series:
        width = s.interval_ms or 1000
        # fio logs 999 and 1000 for the same window: times snap to the window grid
        values = {round(t / width) * width / 1000: v for t, v in zip(s.t_ms, s.values, strict=True)}
        groups.setdefault((s.job, s.direction), {}).setdefault(s.metric, {})[(s.job_index, s.hostname)] = values
    out: dict[tuple[str, str], dict[float, Row]] = {}
    for key, metrics in groups.items():
        points: dict[float, Row] = {}
        for metric, field, scale in (("iops", "iops", 1.0), ("bw_bytes_s", "mib_s", 1 / 1048576)):
            threads = list(metrics.get(metric, {}).values())
            for t_s in set.intersection(*(set(v) for v in threads)) if threads else ():
                _point(points, t_s)[field] = sum(v[t_s] for v in threads) * scale
        lat = metrics.get("clat_ns") or metrics.get("lat_ns") or {}
        iops = metrics.get("iops", {})
        for t_s in set().union(*lat.values()):
            present = [thread for thread, v in lat.items() if t_s in v]
            weights = [iops.get(thread, {}).get(t_s, 0.0) for thread in present]
            if not all(w > 0 for w in weights):
                weights = [1.0] * len(present)
            _point(points, t_s)["lat_us"] = sum(lat[th][t_s] / 1000 * w for th, w in zip(present, weights,
                                                                                         strict=True)) / sum(weights)
        out[key] = points
    return out
