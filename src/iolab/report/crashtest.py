"""A crash-test run (``iolab crash-test``) for people: every cut with what was written, checked, lost
or corrupt (with offsets) and its verdict, and the loss rate over the cuts (``crashtest``)."""

from __future__ import annotations

from typing import Any

from ..model import Run
from ..workflows import crashtest
from .table import Cell, Column, Table

#: Bad blocks listed per cut in the table (all are in the JSON document).
SHOWN_OFFSETS = 3
_STYLE = {crashtest.INTACT: "green", crashtest.LOST: "red", crashtest.FAILED: "red", crashtest.NO_CUT: "yellow"}


def _n(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _offsets(o: crashtest.CutOutcome) -> str:
    shown = ", ".join(str(offset) for offset, _, _ in o.bad[:SHOWN_OFFSETS])
    more = len(o.bad) - SHOWN_OFFSETS
    return shown + (f" … (+{more:,})" if more > 0 else "")


def crash_table(run: Run) -> Table | None:
    """The cuts of a crash-test run (None for other runs)."""
    outcomes = crashtest.cut_outcomes(run)
    if not outcomes:
        return None
    columns = (Column("cut", "cut", True), Column("issued", "writes issued", True),
               Column("checked", "acknowledged & checked", True), Column("intact", "intact", True),
               Column("lost", "lost", True), Column("corrupt", "corrupt", True), Column("offsets", "bad offsets"),
               Column("waited_s", "waited", True), Column("verdict", "verdict"))
    rows = tuple((
        Cell(str(o.cut), o.cut), Cell(_n(o.issued), o.issued), Cell(_n(o.checked), o.checked),
        Cell(_n(o.intact), o.intact), Cell(_n(o.lost), o.lost), Cell(_n(o.corrupt), o.corrupt),
        Cell(_offsets(o), [offset for offset, _, _ in o.bad]),
        Cell("–" if o.waited_s is None else f"{o.waited_s:.1f} s", o.waited_s),
        Cell(o.verdict if o.detail is None else f"{o.verdict}: {o.detail}", o.verdict, _STYLE.get(o.verdict)),
    ) for o in outcomes)
    return Table(title="crash test: cuts", columns=columns, rows=rows, notes=_notes(run, outcomes))


def _notes(run: Run, outcomes: list[crashtest.CutOutcome]) -> tuple[str, ...]:
    rate = crashtest.loss_rate(outcomes)
    notes = []
    if rate.rate is not None and rate.ci95 is not None:
        notes.append(f"loss rate: {rate.with_loss} of {rate.verified} verified cut(s) lost or corrupted an "
                     f"acknowledged write ({rate.rate * 100:.0f} %, 95 % Wilson interval {rate.ci95[0] * 100:.1f}–"
                     f"{rate.ci95[1] * 100:.1f} %); blocks: {rate.blocks_bad:,} bad of {rate.blocks_checked:,} checked")
    reasons: dict[str, int] = {}
    for o in outcomes:
        for _, reason, _ in o.bad:
            reasons[reason.split(",")[0]] = reasons.get(reason.split(",")[0], 0) + 1
    notes += [f"fio said {count:,}×: {reason}" for reason, count in reasons.items()]
    notes.append("lost: the block reads back as never written (header magic 0 after the wipe); corrupt: other "
                 "content. checked: the writes fio's verify state records as complete (its last few may go "
                 "unchecked, fio issue 1440)")
    settings = (run.info.options.get("crash_test") or {}).get("settings") or {}
    if settings and not settings.get("wipe", True):
        notes.append("--no-wipe: a block left at the same offset by an earlier write verifies as intact in fio 3.33's "
                     "verify-only mode, so losses can go unseen")
    return tuple(notes)


def crash_document(run: Run) -> dict[str, Any] | None:
    """A crash-test run's cuts and loss rate for its JSON document (``"crash_test"``); every bad
    block as ``{"offset", "reason", "server"}``. None for other runs."""
    outcomes = crashtest.cut_outcomes(run)
    if not outcomes:
        return None
    rate = crashtest.loss_rate(outcomes)
    return {"cuts": [{"cut": o.cut, "verdict": o.verdict, "detail": o.detail, "issued": o.issued,
                      "checked": o.checked, "intact": o.intact, "lost": o.lost, "corrupt": o.corrupt,
                      "waited_s": o.waited_s, "hosts": list(o.hosts),
                      "bad": [{"offset": b[0], "reason": b[1], "server": b[2]} for b in o.bad]} for o in outcomes],
            "loss_rate": {"verified_cuts": rate.verified, "cuts_with_loss": rate.with_loss, "rate": rate.rate,
                          "ci95": list(rate.ci95) if rate.ci95 else None, "method": "Wilson score interval",
                          "blocks_bad": rate.blocks_bad, "blocks_checked": rate.blocks_checked}}
