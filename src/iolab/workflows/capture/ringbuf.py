"""The block events read from the kernel's binary ring-buffer pages, as trace-cmd and perf read them.

Why not ``trace_pipe``: there the kernel formats every event as text in the reader's time (at
~630k events/s on 2 CPUs that was 1.4 CPU-s per second, and a quarter of the events were lost).
``per_cpu/cpuN/trace_pipe_raw`` hands the same events as the ring buffer holds them: whole pages,
binary, copied and never formatted. No kept Python library parses them (Debian packages
libtraceevent and libtracefs, C libraries whose per-event calls through ctypes would cost more than
the text; trace-cmd's Python bindings are not packaged; PyPI's ``ftrace`` 0.0.1 is abandoned
since 2020), so this module is a small parser of its own, over what the kernel describes in
tracefs and never over hard-coded offsets:

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

A format that differs from what this parser understands (a missing field, another size, another
header layout) raises ``CaptureError`` naming what was unexpected, before any event is enabled: the
capture then reads ``trace_pipe`` text instead (``tracefs.record``). An event this parser cannot
account for inside a page (a length past the page's end, an unknown event id) raises too: the
capture fails rather than store a wrong trace.

Speed: a page holds 50–70 events of two lengths, mixed, so no page is one array of records. The
pages read in one ``readv`` are walked in lockstep instead (``decode``): each step reads the next
event header of every page still unfinished at once (numpy), so the Python loop runs once per event
*position* in a page (~75 times a batch), not once per event; time extends, padding and long
records are ordinary steps. The events' fields are then gathered at once and read through a
structured dtype built from the format files.

Merging: each CPU has its own buffer, each in time order; ``Reader.drain`` returns the events of all
CPUs in time order up to a watermark, the earliest time a CPU may still produce an event at (the
later of its last event and its clock when it was drained empty, less ``SLACK_NS`` for events
reserved but not yet committed then), and holds the rest for the next drain.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import IolabError
from .stream import Events


class CaptureError(IolabError):
    """The block trace could not be recorded (no tracefs, no block events, not root, an
    unexpected ring-buffer format)."""


#: ``type_len`` values (``enum ring_buffer_type``, ``include/linux/ring_buffer.h``), checked
#: against ``events/header_event``.
DATA_MAX, PADDING, TIME_EXTEND, TIME_STAMP = 28, 29, 30, 31
#: Bits of a page's ``commit`` that are flags, not a length (``kernel/trace/ring_buffer.c``).
RB_MISSED_EVENTS, RB_MISSED_STORED = 1 << 31, 1 << 30
TS_SHIFT = 27
#: An event reserved (its time taken) before its CPU was drained empty but committed after (an
#: interrupt's events in between) is read at the next drain: the watermark waits this long for it.
SLACK_NS = 10_000_000
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
            raise CaptureError("an event format file has no name or ID line", hint=_FALLBACK_HINT)
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
                                   f"{', '.join(fields)})", hint=_FALLBACK_HINT)
            if char_array and not found.is_char_array:
                raise CaptureError(f"the {fmt.name} event's field {field_name!r} is {found.decl!r}, not a char array",
                                   hint=_FALLBACK_HINT)
            if sizes is not None and found.size not in sizes:
                raise CaptureError(f"the {fmt.name} event's field {field_name!r} is {found.size} bytes, not "
                                   f"{' or '.join(map(str, sizes))}", hint=_FALLBACK_HINT)
        return fmt

    @property
    def extent(self) -> int:
        """Bytes from the data's start to the end of the last field this reader reads."""
        return max(f.offset + f.size for name, f in self.fields.items() if name in _NEEDED or name == "comm")


_FALLBACK_HINT = "the capture reads trace_pipe text instead; please report this kernel's format files"


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
                                   hint=_FALLBACK_HINT)
            if sizes is not None and fields[name][1] not in sizes:
                raise CaptureError(f"the ring buffer's page header field {name!r} is {fields[name][1]} bytes, not "
                                   f"{' or '.join(map(str, sizes))}", hint=_FALLBACK_HINT)
        page = cls(fields["timestamp"][0], *fields["commit"], *fields["data"])
        if page.data % 4 or page.data_size % 4 or page.timestamp % 8:
            raise CaptureError(f"the ring buffer's page header is not 4-byte aligned ({text.strip()!r})",
                               hint=_FALLBACK_HINT)
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
                               f"{pattern.split(chr(92))[0]} {value}, found {found}", hint=_FALLBACK_HINT)


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
            raise CaptureError(f"cannot read the ring buffer's format files: {exc}", hint=_FALLBACK_HINT) from None
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
                               "first word of both events", hint=_FALLBACK_HINT)
        if layout.issue.id == layout.complete.id:
            raise CaptureError(f"block_rq_issue and block_rq_complete have the same ID {layout.issue.id}",
                               hint=_FALLBACK_HINT)
        return layout


@dataclass(frozen=True)
class Decoded:
    """The events of a run of pages (one CPU's, in the order read), as ``Events`` columns but with
    ``task`` empty (``names`` holds the comm each pid last issued under); ``missed`` counts the
    events the pages say were lost before them (a flag without a stored count counts 1)."""

    events: Events
    names: dict[int, bytes]
    missed: int


#: Words an event takes, by ``type_len``: data 1..28 the header and ``type_len`` words; a time
#: extend or stamp 2; 0 (``type_len`` 0 and padding: the length is in ``array[0]``) is looked up.
_WORDS = np.array([0, *range(2, 30), 0, 2, 2], dtype=np.int64)


def decode(buf: np.ndarray, layout: Layout, where: str = "the ring buffer") -> Decoded:
    """The block events in ``buf`` (uint8, whole pages of ``layout.page.size`` bytes, one CPU's, in
    the order read). ``where`` names the source in errors. Raises CaptureError when a page cannot be
    walked (a length past its commit, a commit past its data, an event of another id)."""
    page = layout.page
    n_pages = buf.size // page.size
    pages = buf[:n_pages * page.size].reshape(n_pages, page.size)
    flat = pages.view(np.uint32).reshape(-1)
    stamp = np.ascontiguousarray(pages[:, page.timestamp:page.timestamp + 8]).view(np.uint64).reshape(-1)
    commit = np.ascontiguousarray(pages[:, page.commit:page.commit + page.commit_size]).view(
        np.uint64 if page.commit_size == 8 else np.uint32).reshape(-1).astype(np.int64)
    length = commit & (RB_MISSED_STORED - 1)
    bad = (length > page.data_size) | (length % 4 != 0)
    if bad.any():
        i = int(bad.argmax())
        raise CaptureError(f"{where}: page {i} says it holds {int(length[i])} bytes of events, in a data area of "
                           f"{page.data_size}", hint=_FALLBACK_HINT)
    missed = _missed(pages, commit, length, page)
    # every page walked at once, one event position a step: ``at`` is each page's next event (a word
    # of ``flat``), ``end`` where its events end
    at = np.arange(n_pages, dtype=np.int64) * (page.size // 4) + page.data // 4
    end = at + length // 4
    starts: list[tuple[np.ndarray, np.ndarray]] = []
    active = np.flatnonzero(at < end)
    while active.size:
        here = at[active]
        starts.append((active, here))
        type_len = flat[here] & 31
        size = _WORDS[type_len]
        looked_up = np.flatnonzero(size == 0)
        if looked_up.size:  # a long record, padding or a discarded event: rare
            size[looked_up] = _looked_up(flat, here[looked_up], type_len[looked_up], end[active[looked_up]])
        at[active] = here + size
        active = active[at[active] < end[active]]
    if (at > end).any():
        i = int((at > end).argmax())
        raise CaptureError(f"{where}: page {i}'s events run past its commit ({int(length[i])} bytes)",
                           hint=_FALLBACK_HINT)
    if not starts:
        return Decoded(_no_events(), {}, missed)
    # page by page, each in its events' order: the steps as rows of a (step, page) table read by column
    table = np.full((len(starts), n_pages), -1, dtype=np.int64)
    for step, (pages_here, here) in enumerate(starts):
        table[step, pages_here] = here
    event_at = table.T.reshape(-1)
    event_at = event_at[event_at >= 0]
    header = flat[event_at]
    type_len = (header & 31).astype(np.int64)
    delta = (header >> 5).astype(np.int64)
    array0 = flat[np.minimum(event_at + 1, flat.size - 1)].astype(np.int64)
    page_of = event_at // (page.size // 4)
    t_ns = _times(page_of, type_len, delta, array0, stamp)
    data = type_len <= DATA_MAX
    data_at = event_at[data] + np.where(type_len[data] == 0, 2, 1)
    data_bytes = np.where(type_len == 0, array0 - 4, type_len * 4)[data]
    events, names = _fields(flat, data_at, data_bytes, t_ns[data], layout, where)
    return Decoded(events, names, missed)


def _looked_up(flat: np.ndarray, at: np.ndarray, type_len: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Words taken by records whose length is not in ``type_len``: ``array[0] + 4`` bytes for a long
    record or a discarded event, the rest of the page for padding with no time delta."""
    delta = flat[at] >> 5
    rest = (type_len == PADDING) & (delta == 0)
    return np.where(rest, end - at, 1 + (flat[np.minimum(at + 1, flat.size - 1)].astype(np.int64) + 3) // 4)


def _missed(pages: np.ndarray, commit: np.ndarray, length: np.ndarray, page: PageFormat) -> int:
    """Events lost before these pages: the count stored after a page's events, or 1 for a flag alone."""
    flagged = np.flatnonzero(commit & RB_MISSED_EVENTS)
    total = 0
    for i in flagged.tolist():
        at = page.data + int(length[i])
        stored = commit[i] & RB_MISSED_STORED and at + 8 <= page.size
        total += int(pages[i, at:at + 8].view(np.uint64)[0]) if stored else 1
    return total


def _times(page_of: np.ndarray, type_len: np.ndarray, delta: np.ndarray, array0: np.ndarray,
           stamp: np.ndarray) -> np.ndarray:
    """Each event's time (ns): its page's timestamp, or the last absolute timestamp before it in its
    page, plus the deltas since (a time extend adds ``array[0] << 27``; a discarded event's delta
    counts, as libtraceevent counts it: the next event's delta is from it)."""
    extend = type_len == TIME_EXTEND
    step = delta.copy()
    step[extend] += array0[extend] << TS_SHIFT
    absolute = type_len == TIME_STAMP
    total = np.cumsum(step)
    if not absolute.any():  # each page's events: its stamp plus the deltas since its first
        first = np.flatnonzero(np.concatenate([[True], page_of[1:] != page_of[:-1]]))
        page_base = stamp.astype(np.int64)
        page_base[page_of[first]] -= total[first] - step[first]
        return page_base[page_of] + total
    step[absolute] = 0
    total = np.cumsum(step)
    starts = np.concatenate([[True], page_of[1:] != page_of[:-1]]) | absolute
    base = np.where(absolute, delta | (array0 << TS_SHIFT), stamp[page_of].astype(np.int64))
    # an absolute stamp holds 59 bits; the top ones are the page's (rb_fix_abs_ts)
    base[absolute] |= stamp[page_of[absolute]].astype(np.int64) & ~((1 << 59) - 1)
    segment = np.cumsum(starts) - 1
    start_at = np.flatnonzero(starts)
    return base[start_at][segment] + total - (total[start_at] - step[start_at])[segment]


def _gather(flat: np.ndarray, data_at: np.ndarray, field: Field, dtype: str) -> np.ndarray:
    """One field of every event (data starting at word ``data_at`` of ``flat``), as ``dtype`` (native
    byte order: the ring buffer is the machine's memory): the words it spans gathered, then cut."""
    first, last = field.offset // 4, (field.offset + field.size - 1) // 4
    if not field.offset % 4 and field.size == 4:  # one word: as it is
        return flat[data_at + first].view(dtype)
    if not field.offset % 4 and field.size == 8 and dtype == "u8":  # two words, low first (little-endian)
        low, high = flat[data_at + first].astype(np.uint64), flat[data_at + first + 1].astype(np.uint64)
        return low | high << np.uint64(32) if np.little_endian else low << np.uint64(32) | high
    words = np.empty((data_at.size, last - first + 1), dtype=np.uint32)
    for k in range(last - first + 1):
        words[:, k] = flat[data_at + first + k]
    skip = field.offset % 4
    raw = words.view(np.uint8)[:, skip:skip + np.dtype(dtype).itemsize]
    return np.ascontiguousarray(raw).view(dtype).reshape(-1)


def _field(flat: np.ndarray, data_at: np.ndarray, issue: np.ndarray, layout: Layout, name: str,
           dtype: str) -> np.ndarray:
    """Field ``name`` of every event, from the issue's or the completion's offset (one gather when
    both formats put it at the same place, as they do on the kernels seen)."""
    mine, theirs = layout.issue.fields[name], layout.complete.fields[name]
    if mine.offset == theirs.offset:
        return _gather(flat, data_at, mine, dtype)
    return np.where(issue, _gather(flat, data_at, mine, dtype), _gather(flat, data_at, theirs, dtype))


def _fields(flat: np.ndarray, data_at: np.ndarray, data_bytes: np.ndarray, t_ns: np.ndarray, layout: Layout,
            where: str) -> tuple[Events, dict[int, bytes]]:
    """The two events' fields (``_gather``: as their format files place them), and the comm each
    pid last issued under."""
    if (data_bytes < 4).any():
        raise CaptureError(f"{where}: an event of {int(data_bytes[data_bytes < 4][0])} bytes, too short for an "
                           "event's type", hint=_FALLBACK_HINT)
    kind = _gather(flat, data_at, layout.issue.fields["common_type"], "u2")  # the same place in both (Layout)
    issue = kind == layout.issue.id
    known = issue | (kind == layout.complete.id)
    if not known.all():
        raise CaptureError(f"{where}: an event of id {int(kind[~known][0])}, neither block_rq_issue "
                           f"({layout.issue.id}) nor block_rq_complete ({layout.complete.id})", hint=_FALLBACK_HINT)
    # every field read lies inside its record from here on (the page holds the record: decode checked)
    short = data_bytes < np.where(issue, layout.issue.extent, layout.complete.extent)
    if short.any():
        raise CaptureError(f"{where}: an event of {int(data_bytes[short][0])} bytes, shorter than its format's "
                           "fields", hint=_FALLBACK_HINT)
    pid = _field(flat, data_at, issue, layout, "common_pid", "i4").astype(np.int64)
    rwbs_size = min(8, layout.issue.fields["rwbs"].size, layout.complete.fields["rwbs"].size)
    events = Events(t_ns=t_ns, issue=issue, pid=pid, task=np.zeros(t_ns.size, "S1"),
                    rwbs=_to_nul(_field(flat, data_at, issue, layout, "rwbs", f"S{rwbs_size}").astype("S8")),
                    sector=_field(flat, data_at, issue, layout, "sector", "u8"),
                    nr_sectors=_field(flat, data_at, issue, layout, "nr_sector", "u4").astype(np.int64))
    return events, _comms(flat, data_at[issue], pid[issue], layout)


def _comms(flat: np.ndarray, issue_at: np.ndarray, pid: np.ndarray, layout: Layout) -> dict[int, bytes]:
    """The comm of each pid's last issue (read only there: a run of one pid's issues has one name)."""
    if not pid.size:
        return {}
    run_ends = np.flatnonzero(np.concatenate([pid[1:] != pid[:-1], [True]]))
    last = run_ends.size - 1 - np.unique(pid[run_ends][::-1], return_index=True)[1]
    at = run_ends[last]
    comm = layout.issue.fields["comm"]
    names = _to_nul(_gather(flat, issue_at[at], comm, f"S{min(16, comm.size)}"))
    return dict(zip(pid[at].tolist(), names.tolist(), strict=True))


def _to_nul(chars: np.ndarray) -> np.ndarray:
    """Bytes strings cut at their first NUL, as C reads them (the kernel leaves whatever was in the
    buffer after a string's NUL: numpy keeps it)."""
    width = chars.dtype.itemsize
    if width == 8:  # one word each: the bytes from the lowest zero byte on cleared (Mycroft's zero-byte test)
        word = np.ascontiguousarray(chars).view("<u8").reshape(-1)
        if not np.little_endian:
            word = word.byteswap()
        zero = (word - np.uint64(0x0101010101010101)) & ~word & np.uint64(0x8080808080808080)
        lowest = zero & (~zero + np.uint64(1))
        keep = np.where(zero == 0, np.uint64(2**64 - 1), (lowest >> np.uint64(7)) - np.uint64(1))
        word = word & keep
        return (word if np.little_endian else word.byteswap()).view("S8")
    codes = np.ascontiguousarray(chars).view(np.uint8).reshape(-1, width).copy()
    codes[np.logical_or.accumulate(codes == 0, axis=1)] = 0
    return codes.view(f"S{width}").reshape(-1)


def _no_events() -> Events:
    return Events(t_ns=np.zeros(0, np.int64), issue=np.zeros(0, bool), pid=np.zeros(0, np.int64),
                  task=np.zeros(0, "S16"), rwbs=np.zeros(0, "S8"), sector=np.zeros(0, np.uint64),
                  nr_sectors=np.zeros(0, np.int64))


def _concat(parts: Sequence[Events]) -> Events:
    if len(parts) == 1:
        return parts[0]
    return Events(*(np.concatenate([getattr(p, name) for p in parts]) for name in Events.__dataclass_fields__))


def _take(events: Events, index: np.ndarray | slice) -> Events:
    return Events(*(getattr(events, name)[index] for name in Events.__dataclass_fields__))


#: Pages read and decoded together (4 MiB of 4 KiB pages; ``readv`` takes at most 1024 buffers,
#: ``IOV_MAX``): the kernel copies one page per buffer and stops when the CPU's buffer is empty.
READ_PAGES = 1024


class Merger:
    """The events of several CPUs, each CPU's in time order, handed on merged in time order up to a
    watermark: the earliest time a CPU may still produce an event at (the latest of its last
    event's time and, when it was read empty, its clock then less ``SLACK_NS``). Names each event's
    ``task``: its pid's latest issuing comm (``<idle>`` for pid 0, ``<...>`` for a pid seen issuing
    nothing, as ``trace_pipe`` prints a task it has no name for)."""

    def __init__(self, cpus: Sequence[int]) -> None:
        self._held: dict[int, list[Events]] = {cpu: [] for cpu in cpus}
        self._bound = dict.fromkeys(cpus, 0)
        self._names: dict[int, bytes] = {0: b"<idle>"}

    def add(self, cpu: int, decoded: Decoded) -> None:
        """Hold ``cpu``'s next events (read after those held before)."""
        self._names.update(decoded.names)
        if decoded.events.t_ns.size:
            self._held[cpu].append(decoded.events)
            self._bound[cpu] = max(self._bound[cpu], int(decoded.events.t_ns[-1]))

    def read_empty(self, cpu: int, clock_ns: int) -> None:
        """``cpu`` was read empty; its clock was ``clock_ns`` just before (its later events come after)."""
        self._bound[cpu] = max(self._bound[cpu], clock_ns - SLACK_NS)

    def take(self, final: bool = False) -> Events:
        """The events held up to the watermark (``final``: all), in time order, tasks named. A
        CPU's events are in time order (its deltas are unsigned), so what is ready is a prefix."""
        watermark = min(self._bound.values())
        parts = []
        for cpu, held_parts in self._held.items():
            if not held_parts:
                continue
            held = _concat(held_parts)
            ready = held.t_ns.size if final else int(np.searchsorted(held.t_ns, watermark, "right"))
            parts.append(_take(held, slice(0, ready)))
            self._held[cpu] = [_take(held, slice(ready, None))] if ready < held.t_ns.size else []
        if not parts:
            return _no_events()
        events = _concat(parts)
        if len(parts) > 1:  # sorted runs, one a CPU: the stable sort merges them
            events = _take(events, np.argsort(events.t_ns, kind="stable"))
        return self._named(events)

    def _named(self, events: Events) -> Events:
        """``task`` of every event from its pid (``Events`` wants one name per pid in a batch, as
        ``trace_pipe`` prints one). The distinct pids are found by a table of ``_SLOTS`` slots (pid
        modulo its size), and by sorting only when two share a slot."""
        slot = events.pid & (_SLOTS - 1)
        owner = np.full(_SLOTS, -1, dtype=np.int64)
        owner[slot] = events.pid
        if (owner[slot] == events.pid).all():
            used = np.flatnonzero(owner >= 0)
            table = np.zeros(_SLOTS, dtype="S16")
            table[used] = [self._names.get(pid, b"<...>") for pid in owner[used].tolist()]
            task = table[slot]
        else:
            pids, inverse = np.unique(events.pid, return_inverse=True)
            names = np.array([self._names.get(pid, b"<...>") for pid in pids.tolist()], dtype="S16")
            task = names[inverse.reshape(-1)]
        return Events(t_ns=events.t_ns, issue=events.issue, pid=events.pid, task=task, rwbs=events.rwbs,
                      sector=events.sector, nr_sectors=events.nr_sectors)


#: Slots of ``Merger._named``'s table of pids (a power of two).
_SLOTS = 4096


@dataclass
class _Cpu:
    """One CPU's ``trace_pipe_raw`` and the events its pages said were lost."""

    number: int
    fd: int
    missed: int = 0


class Reader:
    """Each CPU's ring-buffer pages of an ftrace instance, read without blocking, merged in time
    (``Merger``).

    ``drain`` reads what every CPU holds and returns the events that are final, in time order;
    ``finish`` (once the events are disabled) the rest. Memory: ``READ_PAGES`` pages and the events
    held (a drain's worth)."""

    def __init__(self, instance: Path, layout: Layout, clock: str = "local") -> None:
        if clock not in NS_CLOCKS:
            raise CaptureError(f"the trace clock is {clock!r}, whose timestamps are not ns", hint=_FALLBACK_HINT)
        self.instance = instance
        self.layout = layout
        self.cpus: list[_Cpu] = []
        self.read_bytes = 0
        size = layout.page.size
        raw = bytearray(READ_PAGES * size)
        self._buffer = np.frombuffer(raw, dtype=np.uint8)  # decode copies what it keeps: reused by every read
        self._views = [memoryview(raw)[i * size:(i + 1) * size] for i in range(READ_PAGES)]
        try:
            for path in sorted(instance.glob("per_cpu/cpu*/trace_pipe_raw"), key=lambda p: int(p.parent.name[3:])):
                self.cpus.append(_Cpu(int(path.parent.name[3:]), os.open(path, os.O_RDONLY | os.O_NONBLOCK)))
        except OSError as exc:
            self.close()
            raise CaptureError(f"cannot open {instance}/per_cpu/cpuN/trace_pipe_raw: {exc.strerror}",
                               hint=_FALLBACK_HINT) from None
        if not self.cpus:
            raise CaptureError(f"{instance} has no per_cpu/cpuN/trace_pipe_raw", hint=_FALLBACK_HINT)
        self.merger = Merger([cpu.number for cpu in self.cpus])

    def drain(self, limit_bytes: int | None = None) -> tuple[Events, bool]:
        """Read every CPU's pages (about ``limit_bytes`` each at most) and return the events up to the
        watermark, in time order, and whether every CPU was read empty."""
        empty = True
        for cpu in self.cpus:
            clock_ns = self._clock_ns(cpu)
            read_all = self._read(cpu, limit_bytes)
            empty &= read_all
            if read_all and clock_ns is not None:
                self.merger.read_empty(cpu.number, clock_ns)
        return self.merger.take(), empty

    def finish(self) -> Events:
        """Read everything left (the events disabled first) and return all events held, in time order."""
        for cpu in self.cpus:
            self._read(cpu, None)
        return self.merger.take(final=True)

    def missed_by_cpu(self) -> dict[int, int]:
        """Events the pages read said were lost before them (``RB_MISSED_EVENTS``), by CPU number."""
        return {cpu.number: cpu.missed for cpu in self.cpus}

    def close(self) -> None:
        """Close the CPUs' files (the instance can be removed only then)."""
        for cpu in self.cpus:
            os.close(cpu.fd)
        self.cpus = []

    def _clock_ns(self, cpu: _Cpu) -> int | None:
        """The trace clock now (ns, µs resolution: ``now ts:`` of ``per_cpu/cpuN/stats``), None when unreadable."""
        try:
            text = (self.instance / "per_cpu" / f"cpu{cpu.number}" / "stats").read_text()
        except OSError:
            return None
        m = re.search(r"^now ts:\s*(\d+)\.(\d{6})", text, re.M)
        return int(m[1]) * 1_000_000_000 + int(m[2]) * 1000 if m else None

    def _read(self, cpu: _Cpu, limit_bytes: int | None) -> bool:
        """Read ``cpu``'s pages, decoded ``READ_PAGES`` at a time, into events held; True when it
        was read empty (False: ``limit_bytes`` reached first)."""
        size = self.layout.page.size
        taken = 0
        empty = False
        while not empty and (limit_bytes is None or taken < limit_bytes):
            filled = 0
            while filled < READ_PAGES:
                try:
                    got = os.readv(cpu.fd, self._views[filled:])
                except BlockingIOError:
                    got = 0
                if got % size:
                    raise CaptureError(f"cpu{cpu.number}'s trace_pipe_raw gave {got} bytes, not whole pages of "
                                       f"{size}", hint=_FALLBACK_HINT)
                if not got:
                    empty = True
                    break
                filled += got // size
            if not filled:
                break
            taken += filled * size
            self.read_bytes += filled * size
            decoded = decode(self._buffer[:filled * size], self.layout, f"cpu{cpu.number}'s ring buffer")
            cpu.missed += decoded.missed
            self.merger.add(cpu.number, decoded)
        return empty
