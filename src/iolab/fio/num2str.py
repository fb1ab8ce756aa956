"""fio's number display, ``num2str()`` (``lib/num2str.c``), in its four generations.

fio prints IOPS, bandwidths, io sizes and block sizes through ``num2str()``, rounded to 3-4
significant figures, and the rounding code changed three times (FIO_NOTES §2.3). This module
reproduces every generation exactly (checked against fio's own compiled C code in
``tests/data/fio/num2str_reference.txt``) so that the normal-output parser can tell which exact
values a display allows: ``decode`` reads a display, ``reproducing_era`` finds the generation
that prints a number that way, ``iops_display_warning`` explains a disagreement, and
``io_size_match``/``bs_candidates`` recover io sizes and block sizes.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

#: Generation of num2str() by first fio version: "2.0" (fio_uint_to_kmg era, upper-case K,
#: decimals from ``(modulo + 9) / 10``), "2.17" (same decimals, SI/IEC prefixes, commit
#: d694a6a7), "2.20" (``%.Nf`` decimals without carry, 9e55f2c7), "3.26" (carry fixed, c736b361).
_ERAS = (((3, 26), "3.26"), ((2, 20), "2.20"), ((2, 17), "2.17"), ((0,), "2.0"))
_SI = {"2.0": ("", "K", "M", "G", "P", "E"), "2.17": ("", "k", "M", "G", "T", "P"),
       "2.20": ("", "k", "M", "G", "T", "P"), "3.26": ("", "k", "M", "G", "T", "P", "E")}
_IEC = {"2.0": _SI["2.0"], "2.17": ("", "Ki", "Mi", "Gi", "Ti", "Pi"),
        "2.20": ("", "Ki", "Mi", "Gi", "Ti", "Pi"), "3.26": ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")}
_ERA_WHY = {
    "2.20": "fio 2.20-3.25 num2str() drops the carry when the decimals round up to 1 (10999 prints "
            "as 10.0k; fixed in fio 3.26 by commit c736b361, FIO_NOTES §2.3)",
    "2.17": "fio 2.17-2.19 num2str() prints the leading digits of the remainder as decimals (25049 "
            "prints as 25.5k; fixed in fio 2.20 by commit 9e55f2c7)",
    "2.0": "fio before 2.17 num2str() prints the leading digits of the remainder as decimals "
           "(1000050 prints as 1000.5K; fixed in fio 2.20 by commit 9e55f2c7)",
}
POWER = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_SHOWN = re.compile(r"(\d+)(?:\.(\d+))?([kKMGTPE]?)(i?)")


def num2str(num: int, maxlen: int, pow2: bool = False, era: str = "3.26") -> str:
    """The number and prefix fio's ``num2str(num, maxlen, 1, pow2, N2S_NONE)`` prints.

    ``era`` selects the generation (see ``_ERAS``): ``num2str(10999, 4, era="2.20")`` is
    ``"10.0k"``, ``era="3.26"`` gives ``"11.0k"``. Units (``B``, ``/s``) are not appended.
    """
    prefixes = (_IEC if pow2 else _SI)[era]
    thousand = 1024 if pow2 else 1000
    post, modulo, carry = 0, -1, False
    while post < len(prefixes) - 1 and len(str(num)) > maxlen:
        modulo = num % thousand
        num //= thousand
        carry = modulo >= thousand // 2
        post += 1
    if modulo < 0:
        return f"{num}{prefixes[post]}"
    room = maxlen - len(str(num))
    if room <= 1:
        return f"{num + carry}{prefixes[post]}"
    if era in ("2.0", "2.17"):
        while len(str(modulo)) > room - 1:
            modulo = (modulo + 9) // 10
        return f"{num}.{modulo}{prefixes[post]}"
    frac = f"{modulo / thousand:.{room - 1}f}"
    if era == "3.26" and frac[0] == "1":
        num += 1
    return f"{num}.{frac[2:]}{prefixes[post]}"


@lru_cache(maxsize=64)
def version_tuple(version: str | None) -> tuple[int, ...] | None:
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match[1]), int(match[2])) if match else None


@lru_cache(maxsize=64)
def eras(version: str | None) -> tuple[str, ...]:
    """The num2str generations that may have printed this output (all of them if unknown)."""
    vt = version_tuple(version)
    if vt is None:
        return tuple(era for _, era in _ERAS)
    return next((era,) for first, era in _ERAS if vt >= first)


def decode(text: str, kilo: int = 1000) -> tuple[float, float] | None:
    """Value and last-digit step of a num2str display (``71.3k`` -> 71300, 100), units stripped."""
    match = _SHOWN.fullmatch(text)
    if match is None:
        return None
    whole, frac, prefix, iec = match.groups()
    mult = float((1024 if iec else kilo) ** POWER[prefix.upper()])
    if len(whole) > 20 or len(frac or "") > 20:
        return None  # no display of fio's 64-bit numbers is that long
    if frac:
        return (int(whole) + int(frac) / 10 ** len(frac)) * mult, mult / 10 ** len(frac)
    return int(whole) * mult, mult


def reproducing_era(shown: str, num: int, pow2: bool, version: str | None) -> str | None:
    """The num2str generation (any maxlen 1-10) that prints ``num`` as ``shown``, if one does."""
    for era in eras(version):
        if any(num2str(num, maxlen, pow2, era) == shown for maxlen in _MAXLENS):
            return era
    return None


#: maxlen 1-10 (``significant_figures``), fio's default 4 first: the answer is the same, found sooner.
_MAXLENS = (4, 5, 3, 6, 2, 7, 8, 9, 10, 1)


def iops_display_warning(shown: str, total: int, runtime_ms: int, version: str | None) -> str | None:
    """A warning when fio's printed IOPS is further from the exact value than its rounding allows.

    "Allows" is one unit of the last printed digit (``71.3k`` ± 100). Beyond that the message
    names the num2str() generation whose known defect explains the display. Returns None when the
    display is consistent. Raises ``ValueError`` (with the reason) when no generation prints the
    exact value that way: the text's numbers contradict each other. Source: ``lib/num2str.c`` per tag.
    """
    exact = 1000 * total / runtime_ms
    decoded = decode(shown)
    if decoded is not None and abs(decoded[0] - exact) <= decoded[1]:
        return None
    head = f"printed IOPS={shown} but {total} I/Os in {runtime_ms} ms are {exact:.4f} IOPS"
    era = reproducing_era(shown, 1000 * total // runtime_ms, False, version)
    if era is not None and era in _ERA_WHY:
        return f"{head}: {_ERA_WHY[era]}; the exact value is used"
    raise ValueError(f"{head}, which no fio rounding explains (a damaged count or runtime, or an edited line)")


def io_size_match(shown_io: str, nbytes: int, version: str | None) -> int:
    """How well ``nbytes`` fits a printed io size (``836MiB``, 2.x ``200284KB``).

    2: num2str() prints exactly this; 1: within one unit of the last digit (e.g. ramp_time
    makes fio's io_bytes a few blocks larger than issued x bs); 0: it does not fit.
    """
    text, bases = _io_size_text(shown_io, version)
    if any(reproducing_era(text, nbytes, pow2, version) is not None for pow2 in bases):
        return 2
    return 1 if _near(text, nbytes, bases) else 0


def io_size_fits(shown_io: str, nbytes: int, version: str | None) -> bool:
    """``io_size_match(…) > 0``, the cheap test (within one unit) first."""
    text, bases = _io_size_text(shown_io, version)
    return _near(text, nbytes, bases) or any(
        reproducing_era(text, nbytes, pow2, version) is not None for pow2 in bases)


def _io_size_text(shown_io: str, version: str | None) -> tuple[str, tuple[bool, ...]]:
    """A printed io size without its ``B``, and whether its prefixes may be powers of 2 (each base)."""
    text = shown_io.removesuffix("B")
    vt = version_tuple(version)
    if "i" in text:
        return text, (True,)
    if vt is not None and vt >= (2, 17):
        return text, (False,)
    return text, (True, False)  # fio < 2.17 prints "K" for both kb_base values


def _near(text: str, nbytes: int, bases: tuple[bool, ...]) -> bool:
    for pow2 in bases:
        decoded = decode(text, 1024 if pow2 else 1000)
        if decoded is not None and abs(decoded[0] - nbytes) <= decoded[1]:
            return True
    return False


@lru_cache(maxsize=512)
def bs_candidates(text: str, version: str | None) -> tuple[int, ...]:
    """Block sizes (bytes) that fio prints as ``text`` in a job header line.

    ``4096B`` and 2.x ``4K`` (``fio_uint_to_kmg()``, exact) give one value; an abbreviated
    ``64.0KiB`` gives the multiples of 512 that num2str() prints that way.
    """
    match = re.fullmatch(r"(\d+)(?:\.(\d+))?([KMGTPE]?)(i?)(B?)", text, re.IGNORECASE)
    if match is None:
        return ()
    whole, frac, prefix, iec, unit = match.groups()
    if not prefix and not frac:
        return (int(whole),)
    if not unit:  # fio < 2.17: fio_uint_to_kmg() only abbreviates exact multiples of 1024
        return () if frac else (int(whole) * 1024 ** POWER[prefix.upper()],)
    pow2 = bool(iec)
    decoded = decode(text[:-1], 1024 if pow2 else 1000)
    if decoded is None:
        return ()
    value, step = decoded
    first = math.ceil((value - step) / 512) * 512
    return tuple(
        size for size in range(max(first, 512), int(value + step) + 1, 512)
        if reproducing_era(text[:-1], size, pow2, version) is not None
    )
