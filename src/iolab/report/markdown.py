"""The report as Markdown that references the charts' PNG files (``images.write_images``).

User strings are made inert: ``&``, ``<`` and ``>`` become HTML entities (many Markdown
renderers pass raw HTML through) and Markdown's own markup characters are backslash-escaped;
job files go in code fences longer than any run of backticks inside them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from .document import Report
from .table import to_markdown


def text(value: str) -> str:
    """``value`` as literal Markdown text on one line."""
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_\[\]|#])", r"\\\1", value).replace("\n", " ")


def _fence(body: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}ini\n{body.rstrip()}\n{fence}"


def render(report: Report, images: Mapping[str, Path], base: Path) -> str:
    """Markdown for ``report``; ``images`` maps chart names to PNG paths, linked relative to
    ``base`` (the directory the Markdown file is written to)."""
    out = [f"# iolab report: {text(report.title)}", "",
           f"iolab {report.iolab_version} · generated {report.generated_at:%Y-%m-%d %H:%M:%S} UTC", ""]
    for run in report.runs:
        parts = [f"run {run.id}", f"suite {run.suite_name}"] + ([f"label {run.label}"] if run.label else [])
        parts += [f"{k}={v}" for k, v in run.tags.items()] + [run.status]
        out.append("- " + text(" · ".join(parts)))
    out += ["", "## Summary", ""] + [to_markdown(t) for t in (*report.summary, *report.costs)]
    group = None
    for chart in report.charts:
        if chart.group != group:
            group = chart.group
            out += [f"## {group}", ""]
        if chart.name in images:
            link = quote(os.path.relpath(images[chart.name], base).replace(os.sep, "/"))
            out += [f"![{text(chart.title)}]({link})", "", f"*{text(chart.description)}*", ""]
    out += ["## Findings", ""]
    out += [f"- **{text(f.run)}** · {f.severity}: {text(f.text)}" for f in report.findings] or ["None recorded."]
    out += ["", "## Environment", "", "Rows marked ≠ differ between the columns.", ""]
    out += [to_markdown(t) for t in report.facts]
    out += ["## Job files", ""]
    for job in report.job_files:
        out += [f"### {text(job.title)} (hash {job.job_hash})", "", _fence(job.text), ""]
        if job.command:
            out += [_fence(job.command), ""]
    return "\n".join(out).rstrip() + "\n"
