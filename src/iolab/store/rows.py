"""Reading stored rows back: what reading a row can raise (``ROW_ERRORS``), a stored JSON column as
the model it holds (``column``) and the ``UnreadableRun`` a row that does not load becomes
(``unreadable``).

pydantic validates the columns: it is imported here, with the code that reads, and not with the
records that are written (``store.records``): ``iolab import`` parses and stores fio output without
it, and its import (~0.08 s of CPU) was most of what that command's worker processes waited for
before they started.
"""

from __future__ import annotations

from typing import Any, TypeVar

import pydantic

from ..fio import validate
from ..model import FioReport, from_jsonable
from .records import UnreadableRun

T = TypeVar("T")


class _ColumnError(Exception):
    """A stored column that does not load: which one, and why (``cause``)."""

    def __init__(self, column: str, cause: Exception) -> None:
        super().__init__(column)
        self.column, self.cause = column, cause

#: What reading a stored row can raise when the row is not what this iolab writes.
ROW_ERRORS = (_ColumnError, pydantic.ValidationError, ValueError, TypeError, KeyError, AttributeError,
               ArithmeticError)


def column(name: str, cls: type[T], data: Any) -> T:
    """Stored JSON ``data`` of the column ``name`` as a ``cls``; ``_ColumnError`` when it does not load.
    A report must also pass ``fio.validate``, as a parser's does."""
    try:
        value = from_jsonable(cls, data)
        if isinstance(value, FioReport):
            validate.check_report(value)
    except (pydantic.ValidationError, validate.Violation) as exc:
        raise _ColumnError(name, exc) from exc
    return value


def unreadable(run_id: int, exc: Exception) -> UnreadableRun:
    """The ``UnreadableRun`` for ``exc`` raised while reading run ``run_id`` (its cause, for --debug)."""
    unreadable = UnreadableRun(run_id, _reason(exc))
    unreadable.__cause__ = exc
    return unreadable


def _reason(exc: Exception) -> str:
    """One line on why a stored value does not load."""
    if isinstance(exc, _ColumnError):
        return f"{exc.column}: {_reason(exc.cause)}"
    if isinstance(exc, pydantic.ValidationError):
        errors = exc.errors()
        first = errors[0]
        where = ".".join(str(part) for part in first["loc"])
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return f"{where}: {first['msg']}, got {validate.short_repr(first.get('input'))}{more}"
    if isinstance(exc, validate.Violation):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
