"""A Comparison (``analyze.compare``) as tables and as the documented JSON document ``iolab.compare/1``.

``comparison_tables`` gives, per compared side, the metric table (one row per pair × metric), a
geometric-mean summary, the option differences and the environment differences; the terminal,
Markdown, CSV and HTML renderers all draw these same rows.

JSON document (``comparison_document``)::

    {"schema": "iolab.compare/1",
     "threshold": 0.05, "alpha": 0.05,                  # relative threshold; significance level
     "metrics": [{"name": "iops", "title": "IOPS", "unit": "IOPS", "higher_is_better": true}, …],
     "ignored_options": ["bs"],
     "sides": [{"selector": "local-ssd", "run_ids": [2], "labels": ["local-ssd"]}, …],
     "comparisons": [{
        "baseline": 0, "side": 1,                        # indexes into "sides"
        "pairs": [{
           "label": "test", "target": "local", "direction": "write", "comparable": true,
           "a": {"target", "job", "workload", "direction", "repeats", "failed", "run_ids",
                 "options": {canonical option: value}, "unknown_options": [...] | "*"} | null,
           "b": {…} | null,
           "differences": [{"option", "a", "b", "effect": "blocking|ignored|soft"}],
           "unchecked": ["bs", …],                       # key options a side does not record
           "behind": [{"side": "b", "job": "bs-4k", "recorded_ms", "replayed_ms", "ratio",
                       "limit": {"by": "target|replayer|…", "why": "…"} | null}],  # only for a replay behind pace
           "metrics": [{"metric": "iops", "unit": "IOPS", "higher_is_better": true,
                        "a": {"n", "mean", "stdev", "ci95": [lo, hi] | null, "values": [...]},
                        "b": {…}, "change": b-a, "relative_change": (b-a)/a, "ratio": b/a,
                        "ratio_ci95": [lo, hi] | null, "p_value": p | null, "method": "…",
                        "tested": bool, "caveat": "replay behind pace",   # only with a caveat
                        "verdict": "better|worse|better (untested)|worse (untested)|unchanged|inconclusive|
                                    not comparable|missing|failed"}]}],  # the word every format shows;
                                    # with a caveat: "worse (untested; replay behind pace)"
        "geometric_means": [{"metric", "pairs", "ratio", "verdicts": {"better": 1, …},
                             "behind": 2}],              # rows with a caveat, only when any
        "environment": [{"item": "kernel", "a": "6.1.0" | null, "b": …}]}]}

Units: IOPS, bytes/s and ns as the metric's ``unit``; null is unknown, never zero.

CSV (``table.to_csv``): the metric table's values are in the metric's unit, named per row in the
``unit`` column (``IOPS``, ``B/s``, ``ns``), ``metric`` is the metric's name (``bw``, ``clat_p99``), and
``a_ci95_half``/``b_ci95_half`` are the half-widths of each side's 95 % t-interval in that unit.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from ..analyze import sweep
from ..analyze.compare import (
    METHOD_LOG_WELCH,
    METHOD_SINGLE,
    METHOD_WELCH,
    REPLAY_BEHIND,
    Comparison,
    MetricRow,
    Nearest,
    Pair,
    Side,
    SideComparison,
    Slot,
    Verdict,
    nearest,
    verdict_word,
)
from ..analyze.metrics import Metric
from ..describe import canonical
from ..stats import Summary
from .results import ROUNDED
from .sweeps import comparison_grids
from .table import Cell, Column, Table, format_value

SCHEMA = "iolab.compare/1"
_STYLE = {Verdict.BETTER: "green", Verdict.WORSE: "red", Verdict.INCONCLUSIVE: "yellow",
          Verdict.NOT_COMPARABLE: "magenta", Verdict.FAILED: "red", Verdict.MISSING: "dim"}


def _change(unit: str, change: float | None, relative: float | None) -> str:
    if change is None:
        return "–"
    sign = "+" if change > 0 else "-" if change < 0 else "±"
    text = sign + format_value(unit, abs(change))
    return text + (f" ({relative * 100:+.1f}%)" if relative is not None else "")


def _side_cell(unit: str, s: Summary, rounded: bool = False) -> Cell:
    """A side's mean ``±`` the half-width of its 95 % t-interval, in % of the mean; ``≈`` before a
    value from fio's rounded display."""
    text = (ROUNDED if rounded and s.mean is not None else "") + format_value(unit, s.mean)
    if s.ci95 is not None and s.mean:
        text += f" ±{(s.ci95[1] - s.ci95[0]) / 2 / abs(s.mean) * 100:.1f}%"
    return Cell(text, s.mean)


def _half(s: Summary) -> Cell:
    return Cell("–", None if s.ci95 is None else (s.ci95[1] - s.ci95[0]) / 2)


def _ratio(ratio: float | None, ci: tuple[float, float] | None) -> str:
    if ratio is None:
        return "–"
    def num(v: float) -> str:  # intervals from 2 repeats can span many orders of magnitude
        return f"{v:.2f}" if 0.01 <= abs(v) < 1000 else f"{v:.3g}"

    return f"×{num(ratio)}" + (f" ({num(ci[0])}–{num(ci[1])})" if ci is not None else "")


def _p(p: float | None) -> str:
    return "–" if p is None else "<0.001" if p < 0.001 else f"{p:.3f}"


def _verdict(row: MetricRow) -> Cell:
    """The verdict word (``verdict_word``); an untested one is not coloured as a finding, one with a
    caveat (a replay behind pace) is yellow."""
    word = verdict_word(row)
    return Cell(word, word, _STYLE.get(row.verdict) if word == row.verdict else "yellow" if row.caveat else None)


def describe_side(side: Side) -> str:
    """``local-ssd (run 2)``, ``baseline (runs 1, 3)``, ``ssd (runs 1–98)``: runs in ranges."""
    ids = run_ranges(side.run_ids)
    runs = f"run{'s' if len(side.run_ids) > 1 else ''} {ids}"
    return side.selector if side.selector == ids else f"{side.selector} ({runs})"


def run_ranges(ids: Sequence[int]) -> str:
    """Run ids compactly: ``1–98, 120, 122–124`` (sorted, consecutive ids as a range)."""
    spans: list[list[int]] = []
    for i in sorted(set(ids)):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a}–{b}" for a, b in spans)


def _target_column(c: SideComparison) -> bool:
    """Whether the rows must name their targets: the pairs span several, and the sides' names do not say
    them (``RUN:TARGET``, as ``compare --by target`` names its sides, does for a side of one target)."""
    sides = ((c.baseline.selector, {p.a.target for p in c.pairs if p.a is not None}),
             (c.other.selector, {p.b.target for p in c.pairs if p.b is not None}))
    named = all(len(targets) == 1 and selector.endswith(f":{next(iter(targets))}") for selector, targets in sides)
    return not named and len(set().union(*(targets for _, targets in sides))) > 1


def metric_table(c: SideComparison, threshold: float) -> Table:
    """One row per pair × metric: both sides, change, ratio, its interval, p, verdict. Workloads are
    named as ``analyze.sweep.naming`` says: by name, or for sweeps by a column per varying option, pairs in
    option order."""
    several_targets = _target_column(c)
    pairs = list(c.pairs)
    options = sweep.option_table([_options(p) for p in pairs])
    naming = sweep.naming([p.label for p in pairs], options)
    if naming.by_options:
        order = sorted(range(len(pairs)), key=lambda i: (pairs[i].target, naming.sort_key(options[i])))
        pairs, options = [pairs[i] for i in order], [options[i] for i in order]
    workload = [Column(k, k.removeprefix("tune."), k in sweep.GRID) for k in naming.keys] if naming.by_options \
        else [Column("workload", "workload")]
    spread_a, spread_b = (" (±CI95)" if any(getattr(r, side).ci95 for p in pairs for r in p.metrics) else ""
                          for side in ("a", "b"))
    columns = (
        *((Column("target", "target"),) if several_targets else ()), *workload,
        Column("direction", "dir"), Column("metric", "metric"), Column("unit", "unit", csv_only=True),
        Column("n", "n", True), Column("a_mean", c.baseline.selector + spread_a, True),
        Column("a_ci95_half", "", True, csv_only=True), Column("b_mean", c.other.selector + spread_b, True),
        Column("b_ci95_half", "", True, csv_only=True),
        Column("change", "change", True), Column("ratio", "ratio (95% CI)", True),
        Column("ratio_ci95_low", "", True, csv_only=True), Column("ratio_ci95_high", "", True, csv_only=True),
        Column("p_value", "p", True), Column("verdict", "verdict"),
    )
    rows = []
    for pair, opts in zip(pairs, options, strict=True):
        names = [Cell(opts.get(k) or "–", opts.get(k)) for k in naming.keys] if naming.by_options \
            else [Cell(pair.label)]
        for r in pair.metrics:
            unit = r.metric.unit
            rows.append((
                *((Cell(pair.target),) if several_targets else ()), *names,
                Cell(pair.direction), Cell(_title(pair, r.metric), r.metric.name), Cell(unit),
                Cell(f"{r.a.n}/{r.b.n}"), _side_cell(unit, r.a, r.rounded), _half(r.a),
                _side_cell(unit, r.b, r.rounded), _half(r.b),
                Cell(_change(unit, r.change, r.relative_change), r.change),
                Cell(_ratio(r.ratio, r.ratio_ci95), r.ratio),
                *(Cell("–", r.ratio_ci95[i] if r.ratio_ci95 else None) for i in (0, 1)),
                Cell(_p(r.p_value), r.p_value), _verdict(r),
            ))
    title = f"{describe_side(c.baseline)} → {describe_side(c.other)}"
    notes = _notes(c, threshold) + ((str(naming.note()),) if naming.note() else ())
    return Table(title=title, columns=columns, rows=tuple(rows), notes=notes)


def _title(pair: Pair, m: Metric) -> str:
    """The metric's title; a sync pair's IOPS is its rate of syncs (flushes, for a capture and its replays)."""
    return "syncs/s" if pair.direction == "sync" and m.name == "iops" else m.title


def _options(pair: Pair) -> canonical.Options:
    """What a pair's workload is: the baseline's options, or the other side's when it has none."""
    slot = pair.a if pair.a is not None else pair.b
    return slot.options if slot is not None else canonical.Options({}, None)


def _notes(c: SideComparison, threshold: float) -> tuple[str, ...]:
    rows = [r for p in c.pairs for r in p.metrics]
    notes = [f"threshold ±{threshold * 100:g}%: smaller changes are 'unchanged'; IOPS and bandwidth: higher is "
             f"better, latency: lower is better"]
    methods = {r.method for r in rows if r.verdict not in (Verdict.NOT_COMPARABLE, Verdict.MISSING, Verdict.FAILED)}
    if METHOD_SINGLE in methods:
        notes.append("single run on a side: no significance test is possible, verdicts beyond the threshold are "
                     "untested, or 'inconclusive' where the other side's own 95% interval is wider than the change")
    if METHOD_LOG_WELCH in methods or METHOD_WELCH in methods:
        notes.append("with repeats on both sides: Welch's t-test on log values, 95% interval of the ratio of "
                     "geometric means; 'inconclusive' = beyond the threshold, but the interval is wider than the "
                     "change and includes ×1 (p >= 0.05)")
    if any(r.rounded for r in rows):
        notes.append(f"{ROUNDED}: compared from fio's printed values, rounded to 3–4 significant figures (a side's "
                     "output lacks the issued totals or one block size that make them exact): a change within that "
                     "rounding is not resolved")
    if any(r.a.ci95 or r.b.ci95 for r in rows):
        notes.append("±CI95: the half-width of a side's 95% t-interval of the mean over its repeats, in % of the "
                     "mean (n = A/B)")
    if any(p.direction == "sync" and p.a is not None and p.b is not None for p in c.pairs):
        notes.append("sync: fio's sync calls (a replayed flush each; a capture's flushes): their rate over the job's "
                     "runtime and their latency (fio times the whole call; a capture, the device's service time)")
    notes += _pairing_notes(c) + _behind_notes(c)
    unchecked = sorted({u for p in c.pairs for u in p.unchecked})
    if unchecked:
        notes.append(f"not recorded by a side's fio output, so not checked: {', '.join(unchecked)}")
    return tuple(notes)


def _behind_notes(c: SideComparison) -> list[str]:
    """A note per replay class that fell behind the recorded pace (``analyze.pace``): by how much and
    what held it (the verdicts of its pairs say ``replay behind pace``)."""
    names = {"a": c.baseline.selector, "b": c.other.selector}
    notes = []
    for p in c.pairs:
        for side, pace in p.behind:
            limit = f"; limit: {pace.limit.by} ({pace.limit.why})" if pace.limit else ""
            notes.append(f"{REPLAY_BEHIND}: {names[side]}'s {pace.job} took {pace.replayed_ms:,.0f} ms against "
                         f"{pace.recorded_ms:,.0f} ms recorded (×{pace.ratio:.2f}){limit}: its rate is the replay's "
                         "pace, not the application's")
    return list(dict.fromkeys(notes))


def _pairing_notes(c: SideComparison) -> list[str]:
    """What paired and what did not, in words that agree with the option-differences table."""
    notes = []
    blocked = [p for p in c.pairs if p.a is not None and p.b is not None and not p.comparable]
    paired = sum(1 for p in c.pairs if p.a is not None and p.b is not None)
    other = sorted({f"{d.option} ({'does not change the I/O' if d.effect == 'soft' else 'ignored'})"
                    for p in c.pairs for d in p.differences if d.effect != "blocking"})
    if blocked:
        flags = " ".join(f"--ignore {o}" for o in sorted({d.option for p in blocked for d in p.differences
                                                          if d.effect == "blocking"}))
        notes.append(f"{len(blocked)} of {paired} pair(s) not comparable: job options differ (see the option "
                     f"differences); to compare them anyway: iolab compare {shlex.quote(c.baseline.selector)} "
                     f"{shlex.quote(c.other.selector)} {flags}")
    elif paired and other:
        notes.append(f"job options: all {paired} pair(s) comparable; options that differ without blocking (see the "
                     f"option differences): {', '.join(other)}")
    elif paired:
        notes.append(f"job options: all {paired} pair(s) comparable, no option differs")
    alone = [p for p in c.pairs if (p.a is None) != (p.b is None)]
    if alone:
        notes.append(f"{len(alone)} result(s) found no partner on the other side: see 'Why results do not pair'")
    return notes


def nearest_table(c: SideComparison, ignore: Sequence[str] = ()) -> Table | None:
    """For each result without a partner: the other side's nearest result, the options that keep them
    apart and the exact ``--ignore`` flags that would pair them (``analyze.compare.nearest``); None when
    everything paired."""
    found = nearest(c.pairs, ignore)
    if not found:
        return None
    names = {"a": (c.baseline.selector, c.other.selector), "b": (c.other.selector, c.baseline.selector)}
    rows = []
    for n in found:
        mine, theirs = names[n.side]
        rows.append((Cell(mine), Cell(n.slot.job), Cell(n.slot.direction),
                     Cell(f"{theirs}: {n.candidate.job}" if n.candidate else f"{theirs}: –"),
                     Cell(_blocking(n)), Cell(n.flags or _why_not(n))))
    flags = sorted({d.option for n in found for d in n.blocking})
    notes = (f"to pair them all: {' '.join(f'--ignore {o}' for o in flags)} (compares workloads whose options "
             "differ: say so where you quote the numbers)",) if flags else ()
    columns = (Column("side", "side"), Column("job", "fio job"), Column("direction", "dir"),
               Column("nearest", "nearest on the other side"), Column("differ", "options that differ"),
               Column("flags", "to pair it"))
    return Table(title="Why results do not pair", columns=columns, rows=tuple(rows), notes=notes)


def _blocking(n: Nearest) -> str:
    a_first = n.side == "a"
    return "; ".join(f"{d.option}: {_opt(d.a if a_first else d.b)} vs {_opt(d.b if a_first else d.a)}"
                     for d in n.blocking) or "–"


def _why_not(n: Nearest) -> str:
    if n.candidate is None:
        return "nothing on the other side has this direction"
    return "no option differs: its nearest pairs with a closer match (same target or job), none is left for it"


def summary_table(c: SideComparison) -> Table:
    """The geometric mean of the ratios per metric, and how many pairs got each verdict."""
    # tested verdicts; untested ones count under "other"
    shown = (Verdict.BETTER, Verdict.WORSE, Verdict.UNCHANGED, Verdict.INCONCLUSIVE)
    columns = (Column("metric", "metric"), Column("pairs", "pairs", True),
               Column("geomean_ratio", "geo-mean ratio", True), *(Column(v, v, True) for v in shown),
               Column("other", "other"))
    rows = []
    for g in c.geomeans:
        other = ", ".join([f"{n} {v}" for v, n in g.verdicts.items() if v not in shown]
                          + ([f"{g.behind} {REPLAY_BEHIND}"] if g.behind else []))
        rows.append((Cell(g.metric.title), Cell(str(g.pairs), g.pairs),
                     Cell("–" if g.ratio is None else f"×{g.ratio:.3f}", g.ratio),
                     *(Cell(str(g.verdicts.get(v, 0)), g.verdicts.get(v, 0)) for v in shown), Cell(other)))
    return Table(title=f"Summary: geometric mean of {c.other.selector} / {c.baseline.selector}",
                 columns=columns, rows=tuple(rows))


def differences_table(c: SideComparison) -> Table | None:
    """The options on which paired jobs differ; None when there are none."""
    effects = {"blocking": "not comparable", "ignored": "ignored (--ignore)", "soft": "does not change the I/O"}
    directions: dict[tuple[str, str, str | None, str | None, str], list[str]] = {}
    for p in c.pairs:  # one row per difference, naming every direction it concerns
        for d in p.differences:
            directions.setdefault((p.label, d.option, d.a, d.b, d.effect), []).append(p.direction)
    rows = tuple(
        (Cell(label), Cell(", ".join(dirs)), Cell(option), Cell(_opt(a)), Cell(_opt(b)),
         Cell(effects[effect], effect, "magenta" if effect == "blocking" else None))
        for (label, option, a, b, effect), dirs in directions.items()
    )
    if not rows:
        return None
    columns = (Column("workload", "workload"), Column("direction", "dir"), Column("option", "option"),
               Column("a", c.baseline.selector), Column("b", c.other.selector), Column("effect", "effect"))
    return Table(title="Option differences", columns=columns, rows=rows)


def _opt(value: str | None) -> str:
    return "–" if value is None else value


def environment_table(c: SideComparison) -> Table | None:
    """Facts about where the sides ran that differ; None when none do."""
    if not c.environment:
        return None
    columns = (Column("item", "item"), Column("a", c.baseline.selector), Column("b", c.other.selector))
    rows = tuple((Cell(e.item), Cell(_opt(e.a), e.a), Cell(_opt(e.b), e.b)) for e in c.environment)
    why = " (imported outputs do not record their machine)" if c.unknown_imported else ""
    unknown = any(e.a is None or e.b is None for e in c.environment)
    return Table(title="Environment differences", columns=columns, rows=rows,
                 notes=(f"– = not known for that side{why}",) if unknown else ())


def comparison_tables(comparison: Comparison, summary_first: bool = False) -> list[Table]:
    """Every table of a comparison, per compared side: metrics, summary, for two sweeps the grids of
    the first metric's ratio (``sweeps.comparison_grids``), differences, environment (the
    geometric-mean summary before the metrics with ``summary_first``, as reports show it)."""
    tables: list[Table] = []
    for c in comparison.comparisons:
        pair = [metric_table(c, comparison.threshold), summary_table(c)]
        tables += pair[::-1] if summary_first else pair
        tables += comparison_grids(comparison, c)
        tables += [t for t in (nearest_table(c, comparison.ignore), differences_table(c), environment_table(c))
                   if t is not None]
    return tables


# ---------------------------------------------------------------------------------------------
# JSON


def _summary(s: Summary, values: Sequence[float | None]) -> dict[str, Any]:
    return {"n": s.n, "mean": s.mean, "stdev": s.stdev, "ci95": list(s.ci95) if s.ci95 else None,
            "values": list(values)}


def _slot(s: Slot | None) -> dict[str, Any] | None:
    if s is None:
        return None
    unknown: Any = "*" if s.options.unknown is None else sorted(s.options.unknown)
    return {"target": s.target, "job": s.job, "workload": s.workload, "direction": s.direction,
            "repeats": len(s.values), "failed": s.failed, "run_ids": list(s.run_ids),
            "options": dict(s.options.values), "unknown_options": unknown}


def _metric(m: Metric) -> dict[str, Any]:
    return {"name": m.name, "title": m.title, "unit": m.unit, "higher_is_better": m.higher_is_better}


def _row(r: MetricRow) -> dict[str, Any]:
    return {"metric": r.metric.name, "unit": r.metric.unit, "higher_is_better": r.metric.higher_is_better,
            "a": _summary(r.a, r.a_values), "b": _summary(r.b, r.b_values), "change": r.change,
            "relative_change": r.relative_change, "ratio": r.ratio,
            "ratio_ci95": list(r.ratio_ci95) if r.ratio_ci95 else None, "p_value": r.p_value, "method": r.method,
            **({"rounded": True} if r.rounded else {}), **({"caveat": r.caveat} if r.caveat else {}),
            "tested": r.tested, "verdict": verdict_word(r)}


def _pair(p: Pair) -> dict[str, Any]:
    return {"label": p.label, "target": p.target, "direction": p.direction, "comparable": p.comparable,
            "a": _slot(p.a), "b": _slot(p.b),
            "differences": [{"option": d.option, "a": d.a, "b": d.b, "effect": d.effect} for d in p.differences],
            "unchecked": list(p.unchecked), "metrics": [_row(r) for r in p.metrics],
            **({"behind": [{"side": side, "job": b.job, "recorded_ms": b.recorded_ms, "replayed_ms": b.replayed_ms,
                            "ratio": b.ratio, "limit": {"by": b.limit.by, "why": b.limit.why} if b.limit else None}
                           for side, b in p.behind]} if p.behind else {})}


def comparison_document(comparison: Comparison) -> dict[str, Any]:
    """The JSON document of a comparison (schema ``iolab.compare/1``, see the module docstring)."""
    sides = list(comparison.sides)
    return {
        "schema": SCHEMA, "threshold": comparison.threshold, "alpha": comparison.alpha,
        "metrics": [_metric(m) for m in comparison.metrics], "ignored_options": list(comparison.ignore),
        "sides": [{"selector": s.selector, "run_ids": list(s.run_ids), "labels": list(s.labels)} for s in sides],
        "comparisons": [{
            "baseline": 0, "side": index,
            "pairs": [_pair(p) for p in c.pairs],
            "geometric_means": [{"metric": g.metric.name, "pairs": g.pairs, "ratio": g.ratio,
                                 "verdicts": dict(g.verdicts), **({"behind": g.behind} if g.behind else {})}
                                for g in c.geomeans],
            "environment": [{"item": e.item, "a": e.a, "b": e.b} for e in c.environment],
        } for index, c in enumerate(comparison.comparisons, 1)],
    }
