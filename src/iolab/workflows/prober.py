"""Workflows that decide what to run next from what they have measured: the saturation search
(``saturation.Search``) and auto-tuning (``autotune``).

A workflow never starts fio itself (docs/design.md, section 5): ``Prober.run`` builds a one-workload suite, lets
``execute.prepare`` check it (safety, fio's own parse, lint), adds it to the workflow's run
(``execute.start`` for the first, ``execute.extend`` after) and hands it to ``execute.execute``.
So every probe is a stored result with its job file, host and device facts and tuning in force;
a kill loses at most the probe in flight; tuning is restored after each job as for ``iolab run``.
Scratch files are laid out once and kept until ``Prober.finish``.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from .. import units
from ..analyze.saturation import Point, Search, Slo, knee, point_of
from ..check import lint
from ..check.remote import RemoteTarget
from ..describe.method import Method
from ..describe.suite import Suite, Target, Workload
from ..describe.tune import label as tuning_label
from ..fio.jobfile import Section
from ..model import ResultRecord
from ..run import execute, scratch
from ..run.execute import JobEvent, RunOptions
from ..store.database import Store
from . import autotune

#: What a probe runs unless the user says otherwise (fio options, verbatim).
DEFAULT_OPTIONS = {"rw": "randread", "bs": "4k", "ioengine": "libaio", "direct": "1", "time_based": "1",
                   "ramp_time": "2s", "randrepeat": "0"}
#: The working set of a scratch-file target when no size is given (as the quick suite).
DEFAULT_SIZE = "1g"


@dataclass
class Prober:
    """Runs workloads on one target as the results of one stored run (see the module docstring).

    ``options`` are ``execute``'s (``keep_files`` is forced on until ``finish``); ``name`` is the
    run's suite name, ``description`` its suite text (what the workflow was asked).
    """

    store: Store
    target: Target
    options: RunOptions
    name: str
    description: str
    label: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    on_event: Callable[[JobEvent], None] = lambda e: None
    run_id: int | None = None
    findings: list[lint.Finding] = field(default_factory=list)
    checked: Mapping[str, RemoteTarget] = field(default_factory=dict)

    def run(self, workload: str, fio_options: Mapping[str, str], repeat: int = 1,
            tune: Mapping[str, str] | None = None, pin: str | None = None, first_repeat: int = 0,
            planned: Mapping[str, Any] | None = None, job: str | None = None,
            waived: Collection[str] = ()) -> list[ResultRecord]:
        """Run ``fio_options`` as the workload ``workload``, ``repeat`` times (numbered from
        ``first_repeat``), under host ``tune`` settings and CPU ``pin`` mode; returns its results in
        order (``ok`` or ``failed``). ``planned`` is stored with each (``execute.PLANNED``: a crash
        test's phase); ``job`` names fio's job when it is not the workload's name; ``waived`` are
        lint warnings (``P4`` …) that iolab's own choices for this workload set off, not kept. Raises
        what ``execute.prepare`` and ``execute.execute`` raise (``SafetyError``, ``SuiteError``,
        ``TuningError``, ``Interrupted`` …)."""
        section = Section(job or workload, tuple((k, v) for k, v in fio_options.items()))
        suite = Suite(name=self.name, source=f"<{self.name}>", text=self.description, targets=(self.target,),
                      workloads=(Workload(workload, (section,), workload),), repeat=repeat,
                      tune={k: (v,) for k, v in (tune or {}).items()}, method=Method(pin=pin))
        options = replace(self.options, keep_files=True)
        plan = execute.prepare(suite, options, checked=self.checked)
        self.checked = {**self.checked, **plan.remote}  # each host probed once per run, not per probe
        self.findings += [f for f in plan.findings if not (f.severity == "warning" and f.id in waived)]
        if self.run_id is None:
            self.run_id = execute.start(self.store, plan, options, label=self.label, tags=self.tags, planned=planned)
        else:
            execute.extend(self.store, self.run_id, plan, first_repeat, planned)
        first = max(r.seq for r in self.store.get_run(self.run_id).results) - len(plan.items) + 1
        execute.execute(self.store, self.run_id, options, on_event=self.on_event, checked=self.checked)
        return [r for r in self.store.get_run(self.run_id).results if r.seq >= first]

    def __enter__(self) -> Prober:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """A workflow that stops on an error or Ctrl-C still removes its scratch files (its probes
        ran with ``keep_files``); the run keeps the status ``execute`` gave it."""
        if kind is not None and self.run_id is not None and not self.options.keep_files:
            scratch.cleanup(self.store, self.run_id, keep=False)

    def finish(self, record: Mapping[str, Any]) -> None:
        """Store what the workflow found (``record``, under the run's options) and every lint warning
        of its probes, remove scratch files unless asked to keep them, and close the run."""
        if self.run_id is None:
            return
        run = self.store.get_run(self.run_id)
        warnings = [f.text() for f in lint.merge(self.findings)]  # one finding for all the probes it concerns
        self.store.update_run(self.run_id, options={**run.info.options, **record}, warnings=warnings)
        if not self.options.keep_files:
            scratch.cleanup(self.store, self.run_id, keep=False)
        statuses = {r.status for r in run.results}
        self.store.finish_run(self.run_id, "complete" if statuses <= {"ok"} else "failed")


def describe(command: str, settings: Mapping[str, Any]) -> str:
    """The suite text a workflow's run stores: what it was asked, as YAML."""
    return f"# {command}\n" + yaml.safe_dump(dict(settings), sort_keys=False)


@dataclass(frozen=True)
class Saturation:
    """What ``saturate`` found: every probe's point (in order), the knee, the chosen point (the most
    IOPS under the SLO, or the knee without one) and the results of its full-length repetitions."""

    points: tuple[Point, ...]
    knee: Point | None
    chosen: Point | None
    finals: tuple[ResultRecord, ...]
    fio_target: Mapping[str, Any] | None = None

    def record(self, slo: Slo | None, settings: Mapping[str, Any]) -> dict[str, Any]:
        """What the run stores under ``options["saturation"]`` (read back by the report)."""
        def point(p: Point | None) -> dict[str, Any] | None:
            return None if p is None else {"iodepth": p.iodepth, "numjobs": p.numjobs, "iops": p.iops,
                                           "lat_mean_ns": p.lat_mean_ns, "slo_ns": p.slo_ns, "cpu_pct": p.cpu_pct}

        return {"saturation": {
            "slo": None if slo is None else {"metric": slo.metric.name, "limit_ns": slo.limit_ns, "text": str(slo),
                                             "strict": slo.strict},
            "settings": dict(settings), "probes": [point(p) for p in self.points], "knee": point(self.knee),
            "chosen": point(self.chosen), "final_results": [r.id for r in self.finals],
            "fio_latency_target": self.fio_target}}


def probe_name(options: Mapping[str, str], iodepth: int, numjobs: int, final: bool = False) -> str:
    """``randread-4k-qd16-j2`` for a probe, ``…-final`` for the chosen point's repetitions."""
    name = f"{options.get('rw', 'read')}-{options.get('bs', '4k')}-qd{iodepth}-j{numjobs}"
    return f"{name}-final" if final else name


def saturate(prober: Prober, base: Mapping[str, str], search: Search, probe_runtime: str, runtime: str,
             repeat: int, stage: Callable[[str], None] = lambda text: None) -> Saturation:
    """The saturation search (``saturation.Search``) with real fio runs: probes of ``probe_runtime``
    until the search is done, then the chosen point ``repeat`` times at ``runtime``. A probe that
    fails ends the search (its error is stored with the run). ``stage`` is told, before each fio
    run, what it is for (``probe 3 · most IOPS with clat p99 < 2.0 ms``; ``{index}``/``{total}``
    stand for the repetition and their count), for progress displays."""
    found: list[Point] = []
    goal = f"most IOPS with {search.slo}" if search.slo is not None else "the knee"
    while (step := search.next(found)) is not None:
        iodepth, numjobs = step
        stage(f"probe {len(found) + 1} · {goal}")
        options = {**base, "iodepth": str(iodepth), "numjobs": str(numjobs), "runtime": probe_runtime}
        (result,) = prober.run(probe_name(base, iodepth, numjobs), options)
        point = point_of(result, iodepth, numjobs, search.slo)
        if point is None:
            break
        found.append(point)
    chosen = search.chosen(found)
    finals: list[ResultRecord] = []
    if chosen is not None and repeat > 0:
        options = {**base, "iodepth": str(chosen.iodepth), "numjobs": str(chosen.numjobs), "runtime": runtime}
        stage(f"{chosen.label()} chosen after {len(found)} probes · repetition {{index}}/{{total}}")
        finals = prober.run(probe_name(base, chosen.iodepth, chosen.numjobs, final=True), options, repeat)
    return Saturation(tuple(found), knee(found), chosen, tuple(finals))


def fio_latency_target(prober: Prober, base: Mapping[str, str], slo: Slo, max_iodepth: int,
                       runtime: str) -> dict[str, Any] | None:
    """fio's own search for the same SLO, to set beside iolab's: one job starting at ``max_iodepth``
    whose depth fio halves whenever more than the SLO's share of a 1 s window is slower than the
    target (``latency_target``, ``latency_window``, ``latency_percentile``; ``latency_run`` keeps it
    adjusting for the whole run; ``lat_target_check`` in io_u.c). fio judges total latency
    (submission + completion) and a percentile only, so a mean or max SLO gives None. Returns the
    depth fio settled on (JSON ``latency_depth``), its IOPS over the whole run and the SLO metric
    as measured over it, searching included."""
    percentile = slo.metric.name.partition("_p")[2]
    if not percentile:
        return None
    options = {**base, "iodepth": str(max_iodepth), "numjobs": "1", "runtime": runtime,
               "latency_target": f"{int(slo.limit_ns // 1000)}us", "latency_window": "1s",
               "latency_percentile": percentile, "latency_run": "1"}
    (result,) = prober.run(f"{base.get('rw', 'read')}-{base.get('bs', '4k')}-fio-latency-target", options)
    point = point_of(result, max_iodepth, 1, slo)
    raw = prober.store.raw_json(result.id) if point is not None else None
    if point is None or raw is None:
        return None
    depth = json.loads(raw[raw.index("{"):])["jobs"][0].get("latency_depth")
    return {"depth": depth, "iops": point.iops, "slo_ns": point.slo_ns, "result": result.id}


@dataclass(frozen=True)
class Tuned:
    """What ``autotune`` found: the operating point's search, every configuration probed (in order),
    the best few ranked over their full-length repetitions, and whether the budget cut the descent."""

    operating: Saturation
    measured: tuple[autotune.Measured, ...]
    ranking: tuple[autotune.Ranked, ...]
    cut_by_budget: bool

    def record(self, slo: Slo | None, settings: Mapping[str, Any]) -> dict[str, Any]:
        """What the run stores under ``options["autotune"]``."""
        def config(c: autotune.Config) -> dict[str, str]:
            return dict(c)

        point = self.operating.chosen
        return {"autotune": {
            "slo": None if slo is None else {"metric": slo.metric.name, "limit_ns": slo.limit_ns, "text": str(slo)},
            "settings": dict(settings), "cut_by_budget": self.cut_by_budget,
            "operating_point": None if point is None else {"iodepth": point.iodepth, "numjobs": point.numjobs},
            "probes": [{"config": config(m.config), "iops": m.point.iops, "slo_ns": m.point.slo_ns}
                       for m in self.measured],
            "ranking": [{"config": config(r.config), "iops": r.iops.mean, "ci95": r.interval, "n": r.iops.n,
                         "slo_ns": r.slo_ns, "feasible": r.feasible} for r in self.ranking]}}


def configured(base: Mapping[str, str], config: autotune.Config, point: Point
               ) -> tuple[dict[str, str], dict[str, str], str | None]:
    """A configuration as fio options, host tuning and pin mode, at ``point``'s outstanding I/Os
    (a numjobs axis value divides them among more jobs)."""
    values = dict(config)
    numjobs = int(values.get("numjobs", point.numjobs))
    options = {**base, "iodepth": str(max(1, point.concurrency // numjobs)), "numjobs": str(numjobs)}
    if "ioengine" in values:
        options["ioengine"] = values["ioengine"]
    return options, {k: values[k] for k in autotune.HOST if k in values}, values.get("pin")


def config_name(base: Mapping[str, str], config: autotune.Config, options: Mapping[str, str]) -> str:
    """``randread-4k-qd16-j2-io_uring-sched_none``: the probe's workload name."""
    parts = [probe_name(base, int(options["iodepth"]), int(options["numjobs"]))]
    for key, value in config:
        if key in autotune.HOST:
            parts.append(tuning_label(key, value))
        elif key == "pin":
            parts.append(f"pin_{value}")
        elif key == "ioengine":
            parts.append(value)
    return "-".join(parts)


def autotune_run(prober: Prober, base: Mapping[str, str], search: Search, axes: Sequence[autotune.Axis],
                 budget_s: float, probe_runtime: str, runtime: str, repeat: int, top: int = 3,
                 clock: Callable[[], float] = time.monotonic) -> Tuned:
    """Auto-tuning with real fio runs (``autotune``): the operating point by the saturation search
    (probes only), the coordinate descent of configurations at that point while the budget lasts
    (a probe's measured duration and the repetitions still to come are its estimate), then the best
    ``top`` configurations ``repeat`` times each at ``runtime``, in rounds."""
    start = clock()
    operating = saturate(prober, base, search, probe_runtime, runtime, repeat=0)
    point = operating.chosen
    if point is None:
        return Tuned(operating, (), (), False)
    at_point = [replace(a, values=tuple(v for v in a.values if (a.name, v) != ("numjobs", str(point.numjobs))))
                for a in axes]  # the point's own numjobs is "as it is"
    descent = autotune.Descent(tuple(a for a in at_point if a.values), search.slo)
    measured: list[autotune.Measured] = []
    spent: list[float] = []
    extra_s = (units.parse_duration_us(runtime) - units.parse_duration_us(probe_runtime)) / 1e6
    cut = False
    while (config := descent.next(measured)) is not None:
        probe_s = statistics.median(spent) if spent else 0.0
        if clock() - start + probe_s + top * repeat * (probe_s + extra_s) > budget_s:
            cut = True
            break
        options, host, pin = configured(base, config, point)
        began = clock()
        (result,) = prober.run(config_name(base, config, options), {**options, "runtime": probe_runtime},
                               tune=host, pin=pin)
        spent.append(clock() - began)
        found = point_of(result, int(options["iodepth"]), int(options["numjobs"]), search.slo)
        measured.append(autotune.Measured(config, found or Point(point.iodepth, point.numjobs, 0.0)))
    finalists = descent.best(measured, top)
    points: dict[autotune.Config, list[Point]] = {c: [] for c in finalists}
    for round_ in range(repeat):  # rounds: every finalist once, then again, so drift spreads over all
        for config in finalists:
            options, host, pin = configured(base, config, point)
            (result,) = prober.run(config_name(base, config, options) + "-final", {**options, "runtime": runtime},
                                   tune=host, pin=pin, first_repeat=round_)
            found = point_of(result, int(options["iodepth"]), int(options["numjobs"]), search.slo)
            if found is not None:
                points[config].append(found)
    return Tuned(operating, tuple(measured), tuple(autotune.rank(points, search.slo)), cut)


def best_suite(target: Target, base: Mapping[str, str], config: autotune.Config, point: Point, runtime: str,
               comment: str) -> str:
    """The configuration as a suite file to run again (``iolab run FILE``), headed by ``comment``."""
    options, host, pin = configured(base, config, point)
    workload = {k: options[k] for k in ("rw", "bs", "iodepth", "numjobs") if k in options}
    defaults = {k: v for k, v in options.items() if k not in workload} | {"runtime": runtime}
    doc: dict[str, Any] = {"name": "autotuned", "targets": {target.name: {"path": target.path, "size": target.size}
                                                             if target.size else target.path}}
    if host:
        doc["tune"] = host
    if pin:
        doc["pin"] = pin
    doc |= {"defaults": defaults, "workloads": [workload]}
    return "".join(f"# {line}\n" for line in comment.splitlines()) + yaml.safe_dump(doc, sort_keys=False)
