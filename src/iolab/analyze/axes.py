"""Sides inside runs: the results of one selection split by an axis the runs vary (``compare RUN --by
target``), or narrowed to one target (``RUN:TARGET``), so that ``analyze.compare`` weighs two storage
paths, two tuning values or two pin modes of one run as it weighs two runs.

An **axis** is ``target``; ``pin`` (the run's ``--pin``: ``mq``, ``numa`` or ``none``); ``tune.KNOB`` (a
tuning value in force, ``run.tuning``); or a fio option (``numjobs``, ``iodepth``, ``bs`` … aliases
allowed), read from each result's job as fio ran it (``describe.canonical``). Results that do not
set the axis at all are left out and said so by ``Split.without``.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..describe import canonical
from ..errors import UsageError
from ..model import ResultRecord, Run

#: The axes that are not fio options, and what pairing must ignore for each (pinning adds
#: ``cpus_allowed`` to every job: ``facts.pinning.fio_options``).
NAMED_AXES = {"target": (), "pin": ("cpus_allowed", "cpus_allowed_policy")}


@dataclass(frozen=True)
class Split:
    """``sides``: each value of the axis and the runs narrowed to its results, in the order the values
    first appear (plan order); ``ignore``: the fio options pairing must ignore, the axis itself when
    it is one; ``without``: how many results set no value for the axis."""

    axis: str
    sides: tuple[tuple[str, tuple[Run, ...]], ...]
    ignore: tuple[str, ...]
    without: int = 0


def value_of(run: Run, result: ResultRecord, axis: str) -> str | None:
    """The value ``axis`` has for ``result`` of ``run`` (see the module docstring); None when unset."""
    if axis == "target":
        return result.target
    if axis == "pin":
        return str((run.info.options.get("method") or {}).get("pin") or "none")
    if axis.startswith("tune."):
        return result.params.get(axis)
    version = run.info.fio_version or (result.report.fio_version if result.report else None)
    option = canonical.ALIASES.get(axis, axis)
    values = {o.get(option) for o in canonical.job_options(result, version).values()}
    values.discard(None)
    return "/".join(sorted(v for v in values if v is not None)) or None


def split(runs: Sequence[Run], axis: str, baseline: str | None = None) -> Split:
    """The results of ``runs`` grouped by their value of ``axis``, ``baseline`` first (default: the
    value the plan ran first). Raises ``UsageError`` when fewer than two values are found, or when
    ``baseline`` is not one of them (the message lists the values found)."""
    check_axis(runs, axis)
    groups: dict[str, dict[int, list[ResultRecord]]] = {}
    without = 0
    for run in runs:
        for result in run.results:
            value = value_of(run, result, axis)
            if value is None:
                without += 1
                continue
            groups.setdefault(value, {}).setdefault(run.info.id, []).append(result)
    found = ", ".join(groups) or "none"
    if len(groups) < 2:
        raise UsageError(f"--by {axis}: the selection has {len(groups)} value(s) of {axis} ({found}); comparing "
                         "needs two", hint="name an axis the runs vary: target, pin, tune.KNOB or a fio option "
                                           "such as numjobs, iodepth, bs")
    order = list(groups)
    if baseline is not None:
        if baseline not in groups:
            raise UsageError(f"--baseline {baseline!r} is not a value of {axis} in the selection (found: {found})")
        order.remove(baseline)
        order.insert(0, baseline)
    by_id = {run.info.id: run for run in runs}
    sides = tuple((value, tuple(replace(by_id[rid], results=tuple(results)) for rid, results in groups[value].items()))
                  for value in order)
    ignore = NAMED_AXES.get(axis, () if axis.startswith("tune.") else (axis,))
    return Split(axis, sides, tuple(ignore), without)


def check_axis(runs: Sequence[Run], axis: str) -> None:
    """Raise ``UsageError`` when ``axis`` is none of the module's axes: not ``target``, ``pin``, a
    ``tune.KNOB``, an option the selection's jobs set, nor an option the installed fio knows
    (``runner.optionnames``; without fio, only the first ones count). The message names the valid
    ones, the closest first."""
    if axis in NAMED_AXES or axis.startswith("tune."):
        return
    option = canonical.ALIASES.get(axis, axis)
    set_here = sorted({k for run in runs for result in run.results
                       for o in canonical.job_options(result, run.info.fio_version).values() for k in o.values})
    if option in set_here or option in canonical.KEY_DEFAULTS or option in canonical.DEFAULTS:
        return
    from ..errors import FioNotFound
    from ..runner import optionnames
    try:
        known = optionnames.known_names()
    except FioNotFound:
        known = []
    if option in known:
        return
    tuned = sorted({k for run in runs for result in run.results for k in result.params if k.startswith("tune.")})
    valid = [*NAMED_AXES, *tuned, *set_here]
    close = difflib.get_close_matches(axis, [*valid, *known], n=1)
    raise UsageError(f"--by {axis}: unknown axis" + (f" (did you mean {close[0]}?)" if close else ""),
                     hint=f"valid axes: {', '.join(valid)} (the options these runs' jobs set), tune.KNOB or any "
                          "fio option")


def on_target(runs: Sequence[Run], target: str, selector: str) -> list[Run]:
    """``runs`` narrowed to their results on ``target`` (``RUN:TARGET``), runs without any left out.
    Raises ``UsageError`` naming the targets there are when none of the runs has ``target``."""
    narrowed = [replace(run, results=tuple(r for r in run.results if r.target == target)) for run in runs]
    kept = [run for run in narrowed if run.results]
    if not kept:
        there = sorted({r.target for run in runs for r in run.results})
        raise UsageError(f"{selector!r}: no result on target {target!r}", hint=f"its targets: {', '.join(there)}")
    return kept
