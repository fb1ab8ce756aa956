"""fio's json+ latency histograms (``clat_ns.bins``: bucket value in ns -> count), held compactly:
a run's reports carry hundreds of thousands of buckets (``Histogram``)."""

from __future__ import annotations

import operator
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pydantic is imported by what (de)serialises with it (``model._adapter``)
    from pydantic_core import core_schema

#: fio's counters are ``uint64_t``; histogram bucket values (ns) stay below 10^19 (20 digits).
MAX_COUNT = 2**64 - 1
MAX_BUCKET = 10**19
_DIGITS_MARKED = bytes.maketrans(b"0123456789", b"\xff" * 10)  # a byte no ASCII text holds
_TOO_LONG = b"\xff" * 20


class Histogram(Mapping[int, int]):
    """A latency histogram, immutable: bucket value (a midpoint, in ns) -> I/O count.

    json+ reports hold hundreds of buckets per direction, as JSON objects with decimal keys.
    Converting every key to an int and back to a string for the store cost as much as decoding
    the JSON again (benchmarks/import.py), so ``from_text_keys`` keeps such an object as it is
    once its keys are known to be canonical decimal integers (so each int has one spelling), and
    the int-keyed dict is built on first use as a mapping. Either way the histogram is stored as
    the same JSON object (``jsonable``). ``Histogram(mapping)`` takes int keys and counts
    (``operator.index``: TypeError for anything else).

    Every histogram is one fio can print: bucket values 0 to 10^19-1 ns (317 years; fio's largest
    bucket is about 17 s), counts of 1 or more, at most 2^64-1 in all; the constructor raises
    ``ValueError`` for anything else, ``from_text_keys`` returns None.
    """

    __slots__ = ("_ints", "_text")

    def __init__(self, counts: Mapping[int, int] | None = None) -> None:
        self._ints: dict[int, int] | None = {
            operator.index(k): operator.index(v) for k, v in (counts or {}).items()}
        self._text: dict[str, int] | None = None
        if self._ints and (min(self._ints) < 0 or max(self._ints) >= MAX_BUCKET or min(self._ints.values()) <= 0
                           or sum(self._ints.values()) > MAX_COUNT):
            raise ValueError(f"not a histogram of fio's: bucket values are 0 to 10^19-1 ns, counts 1 or more and "
                             f"at most 2^64-1 in all: {self._ints!r:.200}")

    @classmethod
    def from_text_keys(cls, obj: dict[str, Any]) -> Histogram | None:
        """``obj`` (decoded JSON, not to be changed afterwards) as a histogram, or None when a key is
        not a canonical decimal integer (``"0"``, ``"1234"``: no sign, space or leading zero) or a
        count is not an int > 0 (a JSON ``true`` counts as 1, as in Python). Checked with a few
        passes in C rather than a Python step per bucket."""
        if obj:
            try:
                keys, counts = ",".join(obj), obj.values()
                total = sum(counts)
                if not keys.isascii() or type(total) is not int or total > MAX_COUNT or min(counts) <= 0:
                    return None
            except TypeError:  # a key that is not a string, a count that is not a number
                return None
            # ASCII bytes, each digit marked 0xff: a table lookup per byte, where str.isdigit() is a Unicode lookup
            shape = keys.encode().translate(_DIGITS_MARKED)
            if "" in obj or keys.count(",") != len(obj) - 1 or shape.translate(None, b"\xff,") or _TOO_LONG in shape:
                return None  # an empty key, one that is not digits only, or one of 20 digits (>= 10^19 ns)
            if (keys[0] == "0" or ",0" in keys) and any(len(k) > 1 and k[0] == "0" for k in obj):
                return None  # a leading zero
        histogram = cls.__new__(cls)
        histogram._ints, histogram._text = None, obj
        return histogram

    def _counts(self) -> dict[int, int]:
        if self._ints is None:
            assert self._text is not None
            self._ints = dict(zip(map(int, self._text), self._text.values(), strict=True))
        return self._ints

    def jsonable(self) -> dict[str, int]:
        """The histogram as a JSON object: ``{"1234": 5, …}`` (the store's form)."""
        if self._text is not None:
            return self._text
        return {str(k): v for k, v in self._counts().items()}

    def __getitem__(self, key: int) -> int:
        return self._counts()[key]

    def __iter__(self) -> Iterator[int]:
        return iter(self._counts())

    def __len__(self) -> int:
        return len(self._text if self._text is not None else self._counts())

    def __contains__(self, key: object) -> bool:
        return key in self._counts()

    def keys(self) -> KeysView[int]:
        return self._counts().keys()

    def values(self) -> ValuesView[int]:
        return (self._text if self._text is not None else self._counts()).values()

    def items(self) -> ItemsView[int, int]:
        return self._counts().items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Histogram) and self._text is not None and other._text is not None:
            return self._text == other._text  # canonical keys: equal text, equal numbers
        if isinstance(other, Mapping):
            return self._counts() == (other._counts() if isinstance(other, Histogram) else dict(other.items()))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Histogram({self._counts()!r})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        from pydantic_core import core_schema
        as_json = core_schema.plain_serializer_function_ser_schema(
            histogram_jsonable, when_used="json",
            return_schema=core_schema.dict_schema(core_schema.str_schema(), core_schema.int_schema()))
        return core_schema.no_info_plain_validator_function(cls._validate, serialization=as_json)

    @classmethod
    def _validate(cls, value: Any) -> Histogram:
        """Pydantic's validator: a Histogram, or a mapping with int or decimal string keys."""
        if isinstance(value, Histogram):
            return value
        if not isinstance(value, Mapping):
            raise ValueError("a histogram is a mapping of bucket values to counts")
        if isinstance(value, dict) and (fast := cls.from_text_keys(value)) is not None:
            return fast
        try:
            return cls({int(k): v for k, v in value.items()})
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a histogram of int bucket values to int counts: {exc}") from exc


def histogram_jsonable(value: Any) -> dict[str, int]:
    """A Histogram (or another int-keyed mapping) as its JSON object; TypeError for anything else."""
    if isinstance(value, Histogram):
        return value.jsonable()
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
