"""A methodology finding (``check.lint``'s catalogue P1–P16): its id, severity, message, remedy and source."""

from __future__ import annotations

from dataclasses import dataclass

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    """One methodology problem: ``id`` (``P1``…), ``severity`` (``error``/``warning``), what is
    wrong (``message``, with the numbers), what to do (``remedy``), where the rule comes from
    (``source``) and the places it was found (``workload on target``)."""

    id: str
    severity: str
    message: str
    remedy: str
    source: str
    where: tuple[str, ...] = ()

    def text(self) -> str:
        """One line for a log or the run's stored warnings."""
        where = f" [{', '.join(self.where)}]" if self.where else ""
        return f"{self.id}{where}: {self.message} Remedy: {self.remedy}"
