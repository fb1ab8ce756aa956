"""How values are stored: JSON text handed to the database as it is, fio's raw output and time
series compressed (``compress_raw``, ``encode_series``), datetimes read back as UTC, and the rows of
finished results and their series.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from itertools import chain
from typing import Any

import orjson

from ..errors import StoreError


class JSONText(str):
    """A JSON document already serialised (``model.to_json_text``): the store writes it as it is
    instead of serialising it again, which for reports with json+ histograms halves the cost."""


def json_serializer(value: Any) -> str:
    """JSON columns as text: orjson (several times as fast as the json module for the small documents
    a row holds), json for what orjson refuses (an int beyond 64 bits)."""
    if isinstance(value, JSONText):
        return str(value)
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value)

try:  # ISA-L's deflate writes the same zlib stream as zlib (zlib.decompress reads it), several times faster
    from isal import isal_zlib as raw_codec
except ImportError:  # pragma: no cover - isal is installed where it has wheels (pyproject.toml)
    raw_codec = zlib  # type: ignore[misc]


#: Compression level for the stored text of imported fio outputs. With zlib, level 1 compresses about
#: 1.7x faster than the default 6 for 15-25 % more bytes; ISA-L's level 1 (of 0-3) is about 5x faster
#: than zlib's level 1 and a little smaller. The parsed report stored beside it (uncompressed JSON) is
#: larger than either; benchmarks/import.py measures them.
RAW_ZLIB_LEVEL = 1


def compress_raw(data: bytes) -> bytes:
    """Imported fio output as stored: a zlib stream (``zlib.decompress`` reads it) at ``RAW_ZLIB_LEVEL``."""
    return raw_codec.compress(data, RAW_ZLIB_LEVEL)


def utc(value: datetime | None) -> datetime | None:
    """SQLite hands datetimes back naive; they were stored as UTC."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


#: ``encode_series`` format: ``<BBI`` header (format, flags, sample count), then int64 time deltas
#: and the values (int64 deltas when every value is an integer, flag bit 0; else float64), all
#: little-endian and compressed as ``compress_raw`` does. Migration 0004 writes the same format.
SERIES_FORMAT = 1

_SERIES_HEADER = struct.Struct("<BBI")

_INTEGRAL = 1


def encode_series(t_ms: Sequence[int], values: Sequence[float]) -> bytes:
    """A time series as stored: a few bytes a sample instead of fio's ~20 characters a log row.

    Times are ms (integers), delta-encoded; values are kept exactly (float64, or int64 deltas when
    all are integers below 2**53, as fio's IOPS, KiB/s and ns logs mostly are). Raises ValueError
    when the two sequences differ in length.
    """
    import numpy as np  # here: reading run lists and reports needs no numpy
    t = np.asarray(t_ms, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    if t.shape != v.shape or t.ndim != 1:
        raise ValueError(f"a time series needs as many values as times, got {v.shape} and {t.shape}")
    # NaN and infinities fail the first test (every comparison with NaN is false)
    integral = bool((np.abs(v) < 2.0 ** 53).all() and (v == np.round(v)).all())
    body = _deltas(v.astype(np.int64)) if integral else v
    data = (_SERIES_HEADER.pack(SERIES_FORMAT, _INTEGRAL if integral else 0, len(t))
            + _deltas(t).astype("<i8").tobytes() + body.astype("<i8" if integral else "<f8").tobytes())
    return compress_raw(data)


def encode_series_many(series: Sequence[tuple[Sequence[int], Sequence[float]]]) -> list[bytes]:
    """``encode_series(t_ms, values)`` of each ``(t_ms, values)``, the same bytes, with the arithmetic
    done once over all of them: an import encodes thousands of series of some 60 samples, where
    numpy's cost per call is most of ``encode_series`` (2,240 series of a bench-fio directory: 0.11-0.16 s
    one by one, 0.06-0.08 s together; the compression, per series, is most of what is left). Raises
    ValueError when a series has more values than times or fewer."""
    import numpy as np
    counts = [len(t_ms) for t_ms, _ in series]
    if any(len(values) != n for (_, values), n in zip(series, counts, strict=True)):
        raise ValueError("a time series needs as many values as times")
    total = sum(counts)
    t = np.fromiter(chain.from_iterable(t_ms for t_ms, _ in series), dtype=np.int64, count=total)
    v = np.fromiter(chain.from_iterable(values for _, values in series), dtype=np.float64, count=total)
    ends = np.cumsum(counts, dtype=np.int64)
    starts = ends - np.asarray(counts, dtype=np.int64)
    # encode_series's test per sample; a series is integral when none of its samples fails it
    whole = (np.abs(v) < 2.0 ** 53) & (v == np.round(v))
    failed = np.concatenate(([0], np.cumsum(~whole)))
    integral = (failed[ends] == failed[starts]).tolist()
    ints = np.where(whole, v, 0).astype(np.int64)  # only integral series' are used; no NaN is cast
    t_deltas, v_deltas = _deltas(t), _deltas(ints)
    firsts = starts[ends > starts]  # each series' first delta is from 0, not from the series before
    t_deltas[firsts], v_deltas[firsts] = t[firsts], ints[firsts]
    floats = v.astype("<f8", copy=False)
    t_bytes, v_bytes = t_deltas.astype("<i8", copy=False), v_deltas.astype("<i8", copy=False)
    return [compress_raw(_SERIES_HEADER.pack(SERIES_FORMAT, _INTEGRAL if ok else 0, n) + t_bytes[a:b].tobytes()
                         + (v_bytes if ok else floats)[a:b].tobytes())
            for a, b, n, ok in zip(starts.tolist(), ends.tolist(), counts, integral, strict=True)]


def _deltas(a: Any) -> Any:
    """``numpy.diff(a, prepend=0)`` of a 1-d int64 array, without its concatenation (a series of a
    60-row log costs more in ``diff``'s set-up than in its arithmetic; an import encodes thousands)."""
    import numpy as np
    out = np.empty_like(a)
    out[:1] = a[:1]
    np.subtract(a[1:], a[:-1], out=out[1:])
    return out


def decode_series(blob: bytes) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """``(t_ms, values)`` of a series stored by ``encode_series``. Raises StoreError for a blob
    in another format or cut short."""
    data = zlib.decompress(blob)
    version, flags, count = _SERIES_HEADER.unpack_from(data)
    if version != SERIES_FORMAT or len(data) != _SERIES_HEADER.size + 16 * count:
        raise StoreError(f"a stored time series is in format {version} with {len(data)} bytes for {count} samples; "
                         f"this iolab reads format {SERIES_FORMAT}", hint="upgrade iolab")
    import numpy as np
    arrays = np.frombuffer(data, dtype="<i8", offset=_SERIES_HEADER.size).reshape(2, count)
    values = (np.cumsum(arrays[1]).astype(np.float64) if flags & _INTEGRAL
              else np.frombuffer(data, dtype="<f8", offset=_SERIES_HEADER.size + 8 * count))
    return tuple(np.cumsum(arrays[0]).tolist()), tuple(values.tolist())


