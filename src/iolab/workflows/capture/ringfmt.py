"""The kernel's description of its ring buffer and of the block events, read from tracefs' format files.

``ringbuf`` reads the binary pages by what these files say, never by hard-coded offsets:

- ``events/header_page``: a page is ``timestamp`` (u64, the clock at its first event), ``commit``
  (local_t: the bytes of events in ``data``; its top bits are flags, ``RB_MISSED_EVENTS`` (1 << 31:
  events were lost before this page) and ``RB_MISSED_STORED`` (1 << 30: their count is stored as an
  unsigned long right after the events); ``kernel/trace/ring_buffer.c``), then ``data``.
- ``events/header_event``: an event starts with a 32-bit word, ``type_len`` (5 bits) and
  ``time_delta`` (27 bits, ns after the previous event; the page's timestamp for the first).
  ``type_len`` 1..28: the data is ``type_len * 4`` bytes, right after the word; 0: its length (plus
  4, its own size) is the next u32 (``array[0]``) and the data follows that; 29: padding, the rest
  of the page when ``time_delta`` is 0, else a discarded event of ``array[0] + 4`` bytes in all;
  30: a time extend (8 bytes: ``time_delta + (array[0] << 27)`` is added to the time); 31: an
  absolute timestamp (8 bytes: ``time_delta | array[0] << 27`` is the time).
  (``include/linux/ring_buffer.h``, ``rb_event_length`` and ``rb_update_read_stamp`` in
  ``kernel/trace/ring_buffer.c``; libtraceevent's ``kbuffer-parse.c`` reads them the same way.)
- ``events/block/block_rq_issue/format`` and ``block_rq_complete/format``: the event's id
  (``common_type``), and each field's offset, size and signedness inside the data.

A format that differs from what ``ringbuf`` understands (a missing field, another size, another
header layout) raises ``CaptureError`` naming what was unexpected, before any event is enabled: the
capture then reads ``trace_pipe`` text instead (``tracefs.record``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...errors import IolabError


class CaptureError(IolabError):
    """The block trace could not be recorded (no tracefs, no block events, not root, an
    unexpected ring-buffer format)."""


#: ``type_len`` values (``enum ring_buffer_type``, ``include/linux/ring_buffer.h``), checked
#: against ``events/header_event``.
DATA_MAX, PADDING, TIME_EXTEND, TIME_STAMP = 28, 29, 30, 31
#: Bits of a page's ``commit`` that are flags, not a length (``kernel/trace/ring_buffer.c``).
RB_MISSED_EVENTS, RB_MISSED_STORED = 1 << 31, 1 << 30
TS_SHIFT = 27
#: Clocks whose timestamps are ns (``trace_clocks`` in ``kernel/trace/trace.c``: ``in_ns``);
#: ``counter`` and ``x86-tsc`` count something else.
NS_CLOCKS = frozenset({"local", "global", "uptime", "perf", "mono", "mono_raw", "boot", "tai"})
#: The fields read from each event: name, allowed sizes (bytes), and whether it is a char array.
_NEEDED = {"common_type": ((2,), False), "common_pid": ((4,), False), "sector": ((8,), False),
           "nr_sector": ((4,), False), "rwbs": (None, True)}
_FIELD = re.compile(r"^\s*field:(?P<decl>[^;]*);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);"
                    r"\s*signed:(?P<signed>-?\d+);", re.M)


@dataclass(frozen=True)
class Field:
    """One field of a ``format`` file: its C declaration, offset and size in bytes, signedness."""

    decl: str
    offset: int
    size: int
    signed: bool

    @property
    def is_char_array(self) -> bool:
        return bool(re.fullmatch(r"(unsigned )?char \w+\[\d+\]", self.decl.strip()))


@dataclass(frozen=True)
class EventFormat:
    """An event's ``format`` file: its name, id (``common_type``) and fields by name."""

    name: str
    id: int
    fields: dict[str, Field]

    @classmethod
    def parse(cls, text: str, required: Sequence[str] = ()) -> EventFormat:
        """Parse a ``format`` file and check the fields this reader uses (``_NEEDED`` and
        ``required``, e.g. ``comm`` of the issue). Raises CaptureError naming what was unexpected."""
        name = re.search(r"^name: (\S+)", text, re.M)
        ident = re.search(r"^ID: (\d+)", text, re.M)
        if name is None or ident is None:
            raise CaptureError("an event format file has no name or ID line", hint=FALLBACK_HINT)
        fields = {}
        for m in _FIELD.finditer(text):
            decl = m["decl"].strip()
            field_name = re.sub(r"\[\d*\]$", "", decl.split()[-1]) if decl else ""
            fields[field_name] = Field(decl, int(m["offset"]), int(m["size"]), m["signed"] not in ("0",))
        fmt = cls(name[1], int(ident[1]), fields)
        for field_name in (*_NEEDED, *required):
            sizes, char_array = _NEEDED.get(field_name, (None, True))
            found = fields.get(field_name)
            if found is None:
                raise CaptureError(f"the {fmt.name} event has no field {field_name!r} (fields: "
                                   f"{', '.join(fields)})", hint=FALLBACK_HINT)
            if char_array and not found.is_char_array:
                raise CaptureError(f"the {fmt.name} event's field {field_name!r} is {found.decl!r}, not a char array",
                                   hint=FALLBACK_HINT)
            if sizes is not None and found.size not in sizes:
                raise CaptureError(f"the {fmt.name} event's field {field_name!r} is {found.size} bytes, not "
                                   f"{' or '.join(map(str, sizes))}", hint=FALLBACK_HINT)
        return fmt

    @property
    def extent(self) -> int:
        """Bytes from the data's start to the end of the last field this reader reads."""
        return max(f.offset + f.size for name, f in self.fields.items() if name in _NEEDED or name == "comm")


FALLBACK_HINT = "the capture reads trace_pipe text instead; please report this kernel's format files"


@dataclass(frozen=True)
class PageFormat:
    """``events/header_page``: where a page's timestamp, commit and data are (bytes)."""

    timestamp: int
    commit: int
    commit_size: int
    data: int
    data_size: int

    @property
    def size(self) -> int:
        """A page's size in bytes (the data's end: the sub-buffer size, 4096 by default)."""
        return self.data + self.data_size

    @classmethod
    def parse(cls, text: str) -> PageFormat:
        """Parse ``events/header_page``. Raises CaptureError naming what was unexpected."""
        fields: dict[str, tuple[int, int]] = {}
        for m in _FIELD.finditer(text):
            name = m["decl"].split()[-1]
            fields.setdefault(name, (int(m["offset"]), int(m["size"])))
        for name, sizes in (("timestamp", (8,)), ("commit", (4, 8)), ("data", None)):
            if name not in fields:
                raise CaptureError(f"the ring buffer's page header (events/header_page) has no {name!r} field",
                                   hint=FALLBACK_HINT)
            if sizes is not None and fields[name][1] not in sizes:
                raise CaptureError(f"the ring buffer's page header field {name!r} is {fields[name][1]} bytes, not "
                                   f"{' or '.join(map(str, sizes))}", hint=FALLBACK_HINT)
        page = cls(fields["timestamp"][0], *fields["commit"], *fields["data"])
        if page.data % 4 or page.data_size % 4 or page.timestamp % 8:
            raise CaptureError(f"the ring buffer's page header is not 4-byte aligned ({text.strip()!r})",
                               hint=FALLBACK_HINT)
        return page


def check_header_event(text: str) -> None:
    """Check ``events/header_event`` against the layout this parser reads (module docstring).
    Raises CaptureError naming the first difference."""
    expected = [(r"type_len\s*:\s*(\d+) bits", 5), (r"time_delta\s*:\s*(\d+) bits", 27),
                (r"padding\s*:\s*type == (\d+)", PADDING), (r"time_extend\s*:\s*type == (\d+)", TIME_EXTEND),
                (r"time_stamp\s*:\s*type == (\d+)", TIME_STAMP), (r"data max type_len\s*==\s*(\d+)", DATA_MAX)]
    for pattern, value in expected:
        m = re.search(pattern, text)
        if m is None or int(m[1]) != value:
            found = m[0] if m else "nothing"
            raise CaptureError(f"the ring buffer's event header (events/header_event) differs: expected "
                               f"{pattern.split(chr(92))[0]} {value}, found {found}", hint=FALLBACK_HINT)


@dataclass(frozen=True)
class Layout:
    """Everything ``decode`` needs to know of the kernel's formats: the page, the event header (checked),
    the issue and completion events."""

    page: PageFormat
    issue: EventFormat
    complete: EventFormat

    @classmethod
    def read(cls, events: Path) -> Layout:
        """From a tracefs ``events`` directory (the instance's or the top one's, both are the same
        files). Raises CaptureError."""
        try:
            texts = {name: (events / name).read_text() for name in (
                "header_page", "header_event", "block/block_rq_issue/format", "block/block_rq_complete/format")}
        except OSError as exc:
            raise CaptureError(f"cannot read the ring buffer's format files: {exc}", hint=FALLBACK_HINT) from None
        return cls.parse(texts["header_page"], texts["header_event"], texts["block/block_rq_issue/format"],
                         texts["block/block_rq_complete/format"])

    @classmethod
    def parse(cls, header_page: str, header_event: str, issue: str, complete: str) -> Layout:
        """From the four files' texts. Raises CaptureError."""
        check_header_event(header_event)
        layout = cls(PageFormat.parse(header_page), EventFormat.parse(issue, required=("comm",)),
                     EventFormat.parse(complete))
        types = (layout.issue.fields["common_type"], layout.complete.fields["common_type"])
        if types[0].offset != types[1].offset or types[0].offset + types[0].size > 4:
            raise CaptureError(f"common_type is at offsets {types[0].offset} and {types[1].offset}, not in the "
                               "first word of both events", hint=FALLBACK_HINT)
        if layout.issue.id == layout.complete.id:
            raise CaptureError(f"block_rq_issue and block_rq_complete have the same ID {layout.issue.id}",
                               hint=FALLBACK_HINT)
        return layout
