"""A suite's matrix expanded: each list value an axis, each combination a workload with a readable
name (``randread-4k-qd32``), each workload on each target under each tuning a ``JobSpec``, and the
plan's order (``plan``: repetitions interleaved, warm-up passes back to back).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import SuiteError
from ..fio.jobfile import Section
from .places import yaml_lines
from .schema import fio_value
from .spec import JobSpec, PlannedJob, Suite, Workload
from .tune import label as tuning_label

#: The most workloads a suite may expand to: well above any real suite, far below what would make
#: planning it slow.
MAX_WORKLOADS = 10_000


def check_matrix(defaults: Mapping[str, Any], raw: Sequence[Mapping[str, Any]], source: str, text: str) -> None:
    """Refuse a matrix that expands to more than ``MAX_WORKLOADS`` workloads, naming the workload."""
    total = 0
    for index, w in enumerate(raw):
        merged = {**defaults, **{k: v for k, v in w.items() if k != "name"}}
        axes = {k: len(v) for k, v in merged.items() if isinstance(v, list)}
        count = math.prod(axes.values())
        total += count
        if total > MAX_WORKLOADS:
            line = yaml_lines(text).get(("workloads", index))
            where = f"{source}:{line}" if line else source
            sizes = f" ({' × '.join(axes)}: {' × '.join(map(str, axes.values()))})" if axes else ""
            raise SuiteError(f"{where}: workloads[{index}]: expands to {count} workloads{sizes}; at most "
                             f"{MAX_WORKLOADS} in a suite", hint="split the sweep into several suites")

_SHORT = {"rwmixread": "r", "rwmixwrite": "w", "numjobs": "j", "iodepth": "qd"}


def _label(key: str, value: str | None) -> str:
    text = "on" if value is None else value
    if key in ("rw", "readwrite", "bs", "blocksize", "ioengine"):
        return text
    return f"{_SHORT.get(key, key)}{text}"


def _name_for(given: str | None, options: Mapping[str, str | None], axes: Sequence[str]) -> str:
    if given:
        parts = [given, *(_label(k, options[k]) for k in axes)]
    else:
        rw = options.get("rw") or options.get("readwrite") or "read"
        bs = options.get("bs") or options.get("blocksize") or "4k"
        parts = [rw, bs, f"qd{options.get('iodepth') or 1}"]
        if options.get("numjobs") not in (None, "1"):
            parts.append(f"j{options['numjobs']}")
        shown = {"rw", "readwrite", "bs", "blocksize", "iodepth", "numjobs"}
        parts += [_label(k, options[k]) for k in axes if k not in shown]
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", "-".join(str(p).replace(":", "_") for p in parts))


def expand_workloads(defaults: Mapping[str, Any], raw: Sequence[Mapping[str, Any]]) -> tuple[Workload, ...]:
    out: list[Workload] = []
    seen: dict[str, int] = {}
    for index, w in enumerate(raw):
        merged = {**defaults, **{k: v for k, v in w.items() if k != "name"}}
        axes = [k for k, v in merged.items() if isinstance(v, list)]
        for combo in itertools.product(*(merged[k] for k in axes)):
            chosen = dict(zip(axes, combo, strict=True))
            options = {k: fio_value(chosen.get(k, v)) for k, v in merged.items()}
            name = _name_for(w.get("name"), options, axes)
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                name = f"{name}-{seen[name]}"
            section = Section(name, tuple((k, v) for k, v in options.items()))
            out.append(Workload(name=name, sections=(section,), origin=f"workloads[{index}]"))
    return tuple(out)


def plan(suite: Suite, repeat: int | None = None) -> list[PlannedJob]:
    """Every (target, workload, repetition) in run order.

    Repetitions are interleaved (all jobs once, then all again) so slow drift of the device
    (thermal, SLC cache, background GC) spreads over every job instead of biasing one. A suite
    with ``passes`` runs each job's passes back to back (a warm-up must not be interrupted by other
    jobs on the same target); the repetitions of the whole sequence are interleaved as above.
    """
    rounds = repeat if repeat is not None else suite.repeat
    specs = [JobSpec(t, tuned, tune) for t in suite.targets for w in suite.workloads
             for tuned, tune in _tunings(w, suite.tune)]
    passes = range(1, suite.passes + 1) if suite.passes > 1 else (0,)
    jobs: list[PlannedJob] = []
    for r in range(rounds):
        for spec in specs:
            for p in passes:
                jobs.append(PlannedJob(seq=len(jobs), spec=spec, repeat=r, pass_index=p))
    return jobs


def _tunings(workload: Workload, tune: Mapping[str, tuple[str, ...]]) -> list[tuple[Workload, dict[str, str]]]:
    """``workload`` under every combination of the tuning values, adjacent in the plan so the
    results of one workload show side by side. An axis (several values) adds its label to the
    name, and to the section name when that is the workload's own; fio options stay equal."""
    keys = list(tune)
    axes = [k for k in keys if len(tune[k]) > 1]
    out = []
    for combo in itertools.product(*(tune[k] for k in keys)):
        chosen = dict(zip(keys, combo, strict=True))
        if not axes:
            out.append((workload, chosen))
            continue
        name = "-".join([workload.name, *(tuning_label(k, chosen[k]) for k in axes)])
        name = re.sub(r"[^A-Za-z0-9_.+-]", "_", name)
        sections = tuple(replace(s, name=name) if s.name == workload.name else s for s in workload.sections)
        out.append((replace(workload, name=name, sections=sections), chosen))
    return out
