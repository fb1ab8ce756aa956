"""Charts as PNG and SVG files for wikis, blog posts and Markdown reports.

The same Vega-Lite spec as in the HTML report, rendered by vl-convert (Vega in an embedded
JavaScript engine, no browser). External data is refused (``allowed_base_urls=[]``): every
spec carries its data inline.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .. import outputs
from .charts import Chart
from .html import vega_lite_version

#: What the charts' directory is called in messages.
FOLDER = "the chart folder"
#: PNG pixels per CSS pixel: sharp on high-density screens and in print.
PNG_SCALE = 2.0


def write_images(charts: Sequence[Chart], directory: Path, scale: float = PNG_SCALE) -> dict[str, tuple[Path, Path]]:
    """Write ``<name>.png`` and ``<name>.svg`` of every chart into ``directory`` (created).

    Returns ``name -> (png path, svg path)``. The PNG is the SVG's size times ``scale``. Every file goes
    through ``outputs`` (never onto a device, FIFO or directory, never through a symlink). Raises
    ``outputs.OutputError`` (a ``UsageError``) when ``directory`` cannot be created or written.
    """
    import vl_convert

    outputs.directory(directory, FOLDER)
    written = {}
    for chart in charts:
        spec = dict(chart.spec)
        svg = vl_convert.vegalite_to_svg(spec, vl_version=vega_lite_version(), allowed_base_urls=[])
        png = vl_convert.vegalite_to_png(spec, vl_version=vega_lite_version(), scale=scale, allowed_base_urls=[])
        png_path, svg_path = directory / f"{chart.name}.png", directory / f"{chart.name}.svg"
        outputs.write(png_path, "a chart (PNG)", png)
        outputs.write(svg_path, "a chart (SVG)", svg)
        written[chart.name] = (png_path, svg_path)
    return written
