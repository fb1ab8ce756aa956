"""Lint findings a user has acknowledged (``--ignore-lint CODE``, a suite's ``lint: {ignore: [CODE]}``).

An acknowledged finding is still found and stored with the run (``acknowledged: P3 [...]: ...`` among its
warnings), so that whoever reads the run later knows the method was chosen knowingly; it is only not
printed in full again. Only warnings can be acknowledged: P16 (a destructive write) and FIO (a job fio
rejects) are refusals, not advice (docs/design.md, sections 2 and 3).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from ..describe.lintcodes import WARNINGS, check_codes
from .lint import ERROR, Finding

__all__ = ["ACKNOWLEDGED", "PREFIX", "WARNINGS", "acknowledge", "catalogue", "check_codes", "stored_text"]

#: The severity of a warning the user acknowledged.
ACKNOWLEDGED = "acknowledged"
#: How an acknowledged finding's text starts among a run's stored warnings.
PREFIX = "acknowledged: "


def acknowledge(findings: Sequence[Finding], codes: Iterable[str]) -> list[Finding]:
    """``findings`` with the warnings whose id is one of ``codes`` marked ``ACKNOWLEDGED``."""
    chosen = set(codes)
    return [replace(f, severity=ACKNOWLEDGED) if f.id in chosen and f.severity != ERROR else f for f in findings]


def stored_text(finding: Finding) -> str:
    """How ``finding`` is stored among a run's warnings (``Finding.text``, prefixed when acknowledged)."""
    return PREFIX + finding.text() if finding.severity == ACKNOWLEDGED else finding.text()


def catalogue() -> list[tuple[str, str, str]]:
    """The lint catalogue (``iolab lint --list``): ``(id, severity, what it finds)`` for every rule, P1–P16 and
    FIO, from the rules' own docstrings (``check.lint``), so that the list cannot drift from the rules."""
    from . import lint
    rows = []
    for rule in lint.JOB_RULES:
        doc = " ".join((rule.__doc__ or "").split("\n\n")[0].split())
        ident, _, what = doc.partition(": ")
        rows.append((ident, lint.WARNING, what.replace("``", "")))
    rows.append(("P11", lint.WARNING, "the same workload with different fio parameters on different targets of a "
                                      "plan, or two compared runs whose environment differs (fio, kernel, device)."))
    rows.sort(key=lambda r: int(r[0][1:]))
    rows.append(("P16", lint.ERROR, "a write to a block device not named with --destroy, or one with data "
                                    "(mounted, signatures, holders), or a program run without --allow-exec: refused."))
    rows.append(("FIO", lint.ERROR, "a job fio rejects (fio --parse-only): refused, with fio's message."))
    return rows
