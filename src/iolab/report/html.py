"""The report as one self-contained HTML file: opens from disk, offline, in any current browser.

Everything is inline: CSS, the chart specs with their data, and the Vega, Vega-Lite and
vega-embed JavaScript, which vl-convert bundles from the copies it ships (no CDN, no network).
Bundling takes about ten seconds, so the bundle is cached per vl-convert version under
``$XDG_CACHE_HOME/iolab`` (``~/.cache/iolab``).

Escaping: Jinja2 autoescapes every user string; chart specs go through ``|tojson``, which
escapes ``<``, ``>``, ``&`` and ``'`` so a label such as ``</script>`` stays data. Defence in
depth: a Content-Security-Policy allows only the page's own two scripts (by SHA-256), no
network access of any kind, and images from ``data:``/``blob:`` only, so even a string that
slipped through could neither run nor call home. Vega compiles its expressions with
``Function``, hence ``'unsafe-eval'``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
from functools import cache
from importlib import resources
from importlib.metadata import version
from pathlib import Path
from typing import Any

import altair as alt
import jinja2
from markupsafe import Markup

from .. import outputs
from .document import Report
from .table import Table, shown

#: Chart group (``Chart.group``) -> the id of its report section and navigation anchor; a group not
#: here would share the fallback id ``charts`` with every other such group (duplicate ids, one anchor).
GROUP_IDS = {"Throughput": "throughput", "Latency": "latency", "Sweep": "sweep", "Time series": "timeseries",
             "Host cost": "hostcost", "Warm-up": "warmup", "Captured workload": "capture", "History": "history"}


def vega_lite_version() -> str:
    """The Vega-Lite version Altair writes specs for, as vl-convert names it (``6.4``)."""
    return ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "iolab"


@cache
def vega_bundle() -> str:
    """vega + vega-lite + vega-embed as one classic script that defines ``window.vegaEmbed``.

    Cached on disk; an unwritable cache only costs the ten seconds again.
    """
    path = _cache_dir() / f"vega-bundle-{version('vl-convert-python')}-vl{vega_lite_version()}.js"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    import vl_convert

    text: str = vl_convert.javascript_bundle(vl_version=vega_lite_version())  # type: ignore[call-arg]
    with contextlib.suppress(outputs.OutputError):
        outputs.write(path, "the cached Vega bundle", text)
    return text


def _script_safe(js: str) -> str:
    """JavaScript that cannot end its ``<script>`` element early: ``</script`` and ``<!--`` only
    occur in strings, regular expressions and comments, where ``<\\/`` and ``<\\!`` mean the same."""
    return re.sub(r"<(/script|!--)", lambda m: "<\\" + m.group(1), js, flags=re.IGNORECASE)


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def _template(name: str) -> str:
    return (resources.files("iolab") / "report" / "templates" / name).read_text(encoding="utf-8")


def table_view(table: Table) -> list[dict[str, Any]]:
    """A table's rows for the template: per cell its text and CSS classes, per row its class.

    Cells: ``num`` (right-aligned), ``style-<style>`` (verdict colours, ``diff`` ...), and
    ``repeat`` for a leading key cell (the text columns before the first number) equal to the
    one above while every key cell left of it is too: a long comparison then reads as one block
    per workload, every cell still holding its text for copying. A row is ``diff`` when a cell
    is styled so, ``total`` when one is ``bold`` (a multi-host target's ``all hosts`` row, which
    ends its group), and ``group`` when its first key cell differs from the row above.
    """
    numeric = [c.numeric for c in table.columns]
    keys = numeric.index(True) if True in numeric else 0
    grouped = keys > 0 and len({row[0].text for row in table.rows}) < len(table.rows)
    out = []
    previous: tuple[Any, ...] = ()
    for row in table.rows:
        cells = []
        same = bool(previous)
        for i, cell in enumerate(row):
            same = same and i < keys and previous[i].text == cell.text
            classes = [name for name, on in (("num", numeric[i]), (f"style-{cell.style}", cell.style),
                                             ("repeat", same)) if on]
            cells.append({"text": cell.text, "class": " ".join(classes)})
        styles = {c.style for c in row}
        row_class = [name for name, on in (("diff", "diff" in styles), ("total", "bold" in styles),
                                           ("group", grouped and previous and previous[0].text != row[0].text)) if on]
        out.append({"cells": cells, "class": " ".join(row_class)})
        previous = row
    return out


def render(report: Report) -> str:
    """The report as HTML text (UTF-8). Raises nothing for any report content."""
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = env.from_string(_template("report.html.j2"))
    vega_js = _script_safe(vega_bundle())
    init_js = _script_safe(_template("report.js"))
    csp = ("default-src 'none'; "
           f"script-src {_sha256(vega_js)} {_sha256(init_js)} 'unsafe-eval'; "
           "style-src 'unsafe-inline'; img-src data: blob:; base-uri 'none'; form-action 'none'")
    groups: list[dict[str, Any]] = []
    for chart in report.charts:
        if not groups or groups[-1]["title"] != chart.group:
            groups.append({"id": GROUP_IDS.get(chart.group, "charts"), "title": chart.group, "charts": []})
        groups[-1]["charts"].append(chart)
    return template.render(report=report, groups=groups, csp=csp, css=Markup(_template("report.css")),
                           vega_js=Markup(vega_js), init_js=Markup(init_js), table_view=table_view,
                           shown=shown)
