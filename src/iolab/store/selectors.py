"""Run selectors, as every command that takes a run reads them (``Store.resolve``).

A selector is one of: an id (``12``), ``latest``, a range of ids (``3-7``, both ends included; the
runs of the range that exist, at least one), a tag ``key=value``, a list of any of these joined by commas
(``3,5,9``, ``1-4,latest``: each part must match), or a label. A label or tag matches every run that
carries it. A label that is itself spelt like a list (``a,b``) is still found by its name; one spelt like a range
(``7-9``) is not (the range is meant).
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import UsageError
from .schema import run_tags, runs

RANGE = re.compile(r"^(\d+)-(\d+)$")
HINT = ("give a run id, 'latest', a range 3-7, a list 3,5,9, a label or a key=value tag; list runs with: "
        "iolab runs")


def resolve(conn: Connection, selector: str) -> list[int]:
    """Run ids for ``selector`` (see the module): a range or a label in id order, a list in its own order,
    without repeats. Raises ``UsageError`` when it (or a part of a list) matches nothing, or for a range
    whose ends are the wrong way round."""
    if "," in selector and "=" not in selector and not _label(conn, selector):
        parts = [p.strip() for p in selector.split(",")]
        if not all(parts):
            raise UsageError(f"run selector {selector!r} has an empty part", hint=HINT)
        return list(dict.fromkeys(i for p in parts for i in _one(conn, p, within=selector)))
    return _one(conn, selector)


def _one(conn: Connection, selector: str, within: str | None = None) -> list[int]:
    found: list[int]
    if selector.isdigit():
        found = list(conn.execute(sa.select(runs.c.id).where(runs.c.id == int(selector))).scalars())
    elif selector == "latest":
        found = [f for f in conn.execute(sa.select(sa.func.max(runs.c.id))).scalars() if f is not None]
    elif match := RANGE.match(selector):
        low, high = int(match[1]), int(match[2])
        if low > high:
            raise UsageError(f"run range {selector!r} runs backwards", hint=f"give it low to high: {high}-{low}")
        found = list(conn.execute(sa.select(runs.c.id).where(runs.c.id.between(low, high))
                                  .order_by(runs.c.id)).scalars())
    elif "=" in selector:
        key, value = selector.split("=", 1)
        found = list(conn.execute(sa.select(run_tags.c.run_id).where(run_tags.c.key == key, run_tags.c.value == value)
                                  .order_by(run_tags.c.run_id)).scalars())
    else:
        found = _label(conn, selector)
    if not found:
        where = f" (in {within!r})" if within else ""
        raise UsageError(f"no run matches {selector!r}{where}", hint=HINT)
    return [int(f) for f in found]


def _label(conn: Connection, label: str) -> list[int]:
    return [int(i) for i in conn.execute(sa.select(runs.c.id).where(runs.c.label == label).order_by(runs.c.id))
            .scalars()]
