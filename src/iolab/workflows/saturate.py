"""The saturation search with real fio runs: short probes until the search (``analyze.saturation``)
is done, then the chosen point repeated at full length; and fio's own ``latency_target`` search for
the same SLO, to set beside it. Every probe runs through a ``workflows.prober.Prober``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..analyze.saturation import Point, Search, Slo, knee, point_of
from ..model import ResultRecord
from .prober import Prober


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
    """The saturation search (``analyze.saturation.Search``) with real fio runs: probes of ``probe_runtime``
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
