"""Charts as PNG and SVG files for wikis, blog posts and Markdown reports.

The same Vega-Lite spec as in the HTML report, rendered by vl-convert (Vega in an embedded
JavaScript engine, no browser). External data is refused (``allowed_base_urls=[]``): every
spec carries its data inline.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import UsageError
from .charts import Chart
from .html import vega_lite_version

#: PNG pixels per CSS pixel: sharp on high-density screens and in print.
PNG_SCALE = 2.0


def write_images(charts: Sequence[Chart], directory: Path, scale: float = PNG_SCALE) -> dict[str, tuple[Path, Path]]:
    """Write ``<name>.png`` and ``<name>.svg`` of every chart into ``directory`` (created).

    Returns ``name -> (png path, svg path)``. The PNG is the SVG's size times ``scale``.
    Raises ``UsageError`` when ``directory`` cannot be created or written.
    """
    import vl_convert

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the image directory {directory}: {exc.strerror}") from exc
    written = {}
    for chart in charts:
        spec = dict(chart.spec)
        svg = vl_convert.vegalite_to_svg(spec, vl_version=vega_lite_version(), allowed_base_urls=[])
        png = vl_convert.vegalite_to_png(spec, vl_version=vega_lite_version(), scale=scale, allowed_base_urls=[])
        png_path, svg_path = directory / f"{chart.name}.png", directory / f"{chart.name}.svg"
        try:
            png_path.write_bytes(png)
            svg_path.write_text(svg, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {png_path}: {exc.strerror}") from exc
        written[chart.name] = (png_path, svg_path)
    return written
