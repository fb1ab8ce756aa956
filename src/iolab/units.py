"""Sizes, durations and rates in fio's own spellings.

Parsing follows fio exactly, because the strings are handed to fio verbatim and iolab must
read them the way fio does:

* sizes: ``__get_mult_bytes()`` in ``parse.c`` (fio 3.x). With the default ``kb_base=1024``
  ``4k``, ``4kb`` and ``4K`` are 4096 bytes, while the IEC spellings are *inverted*: ``4kib``
  means 4000 bytes. With ``kb_base=1000`` it is the other way round. This is documented in
  fio's HOWTO ("Parameter types") and kept for compatibility with old job files.
* durations: ``get_mult_time()`` in ``parse.c``: ``us``, ``ms``, ``s``, ``m``, ``h``, ``d``;
  a bare number means seconds for options such as ``runtime`` and ``ramp_time``.

Formatting is for people: IEC units (KiB/s, MiB/s) for bytes, ns/us/ms/s for latencies,
never rounded to fio's 3-4 significant figures.
"""

from __future__ import annotations

import math
import re

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z%]*)\s*$")
_POW = {"k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_TIME_US = {"us": 1, "usec": 1, "ms": 1000, "msec": 1000, "s": 1_000_000, "sec": 1_000_000,
            "m": 60_000_000, "min": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}


def parse_size(text: str | int, kb_base: int = 1024) -> int:
    """Return the number of bytes fio reads from a size such as ``4k``, ``1m``, ``2g``, ``4096``.

    ``kb_base`` is fio's option of that name (1024 by default, or 1000). Fractions are allowed
    (``1.5g``) and truncated to whole bytes as fio does. Raises ``ValueError`` for anything fio
    would not read as a size, including percentages (``50%``), which are not absolute sizes.
    """
    if isinstance(text, bool):
        raise ValueError(f"expected a size like 4k, got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"expected a non-negative size, got {text}")
        return text
    match = _SIZE_RE.match(str(text))
    if not match:
        raise ValueError(f"expected a size like 4k or 1m, got {text!r}")
    number, suffix = match.groups()
    suffix = suffix.lower()
    if suffix == "%":
        raise ValueError(f"expected an absolute size like 4k, got a percentage {text!r}")
    if suffix not in ("", "b") and (suffix[0] not in _POW or suffix not in (suffix[0], suffix[0] + "b",
                                                                            suffix[0] + "ib")):
        raise ValueError(f"expected a size like 4k or 1m, got {text!r}")
    iec = suffix.endswith("ib")
    mult = 1 if suffix in ("", "b") else ((1000 if kb_base == 1024 else 1024) if iec else kb_base) ** _POW[suffix[0]]
    try:
        return int(float(number) * mult)
    except OverflowError:  # float("9" * 400) is infinite
        raise ValueError(f"expected a size like 4k or 1m, got {str(text)[:20]!r}…: larger than any size") from None


def parse_duration_us(text: str | int, default_unit: str = "s") -> int:
    """Return microseconds for a fio time value such as ``10``, ``10s``, ``500ms``, ``2m``.

    A bare number is in ``default_unit`` (seconds for ``runtime``/``ramp_time``, as in fio).
    Raises ``ValueError`` for anything else.
    """
    if isinstance(text, bool):
        raise ValueError(f"expected a duration like 10s, got {text!r}")
    if isinstance(text, int | float):
        try:
            return int(text * _TIME_US[default_unit])
        except (OverflowError, ValueError):  # an infinite or NaN float from YAML (.inf, .nan)
            raise ValueError(f"expected a duration like 10s, got {text!r}") from None
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$", str(text))
    if not match or match.group(2).lower() not in ("", *_TIME_US):
        raise ValueError(f"expected a duration like 10s or 500ms, got {text!r}")
    number, unit = match.groups()
    try:
        return int(float(number) * _TIME_US[unit.lower() or default_unit])
    except OverflowError:  # float("9" * 400) is infinite
        raise ValueError(f"expected a duration like 10s or 500ms, got {str(text)[:20]!r}…: longer than any "
                         "duration") from None


def format_bytes(n: float | None) -> str:
    """``1048576`` -> ``1.00 MiB``; ``None`` -> ``–`` (unknown)."""
    if n is None:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def format_size_fio(n: int) -> str:
    """Bytes in fio's compact spelling, exact: ``4096`` -> ``4k``, ``1048576`` -> ``1m``, ``1000`` -> ``1000``."""
    for suffix, power in (("p", 5), ("t", 4), ("g", 3), ("m", 2), ("k", 1)):
        if n and n % 1024**power == 0:
            return f"{n // 1024**power}{suffix}"
    return str(n)


def format_rate(bytes_per_s: float | None) -> str:
    """Bandwidth in MiB/s with two decimals (``–`` when unknown)."""
    return "–" if bytes_per_s is None else f"{bytes_per_s / 1048576:.2f}"


def format_iops(iops: float | None) -> str:
    """IOPS (or another rate or count per unit) as every table shows it: one decimal, no thousands
    separator (tables are pasted into wikis and spreadsheets, whatever their locale): ``71314.6``,
    ``1197.5``, ``0.4``; ``–`` when unknown. One decimal at every size, so that a column's values line
    up and two tables never show one figure two ways."""
    if iops is None or math.isnan(iops):
        return "–"
    return f"{iops:.1f}"


def format_share(fraction: float | None) -> str:
    """A fraction 0..1 as a percentage with one decimal: ``0.123`` -> ``12.3%`` (``–`` when unknown)."""
    return "–" if fraction is None else f"{fraction * 100:.1f}%"


def format_ns(ns: float | None) -> str:
    """A latency in the largest unit that keeps it >= 1: ``145160`` -> ``145.2 us``."""
    if ns is None or math.isnan(ns):
        return "–"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.1f} {unit}"
    return f"{ns:.0f} ns"


def format_duration(seconds: float | None) -> str:
    """``75`` -> ``1m15s``; ``None`` -> ``?``."""
    if seconds is None:
        return "?"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
