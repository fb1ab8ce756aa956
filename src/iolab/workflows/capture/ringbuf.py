"""The block events read from the kernel's binary ring-buffer pages, as trace-cmd and perf read them.

Why not ``trace_pipe``: there the kernel formats every event as text in the reader's time (at
~630k events/s on 2 CPUs that was 1.4 CPU-s per second, and a quarter of the events were lost).
``per_cpu/cpuN/trace_pipe_raw`` hands the same events as the ring buffer holds them: whole pages,
binary, copied and never formatted. No kept Python library parses them (Debian packages
libtraceevent and libtracefs, C libraries whose per-event calls through ctypes would cost more than
the text; trace-cmd's Python bindings are not packaged; PyPI's ``ftrace`` 0.0.1 is abandoned
since 2020), so this module is a small parser of its own, over what the kernel describes in
tracefs (``ringfmt``: the pages' and events' layouts) and never over hard-coded offsets. An event
it cannot account for inside a page (a length past the page's end, an unknown event id) raises
``CaptureError``: the capture fails rather than store a wrong trace.

Speed: a page holds 50–70 events of two lengths, mixed, so no page is one array of records. The
pages read in one ``readv`` are walked in lockstep instead (``decode``): each step reads the next
event header of every page still unfinished at once (numpy), so the Python loop runs once per event
*position* in a page (~75 times a batch), not once per event; time extends, padding and long
records are ordinary steps. Each field of every event is then gathered at once, a word at a time,
at the offset its format file gives. Measured on recorded pages of fio's 4k reads: ~0.17 µs an event
to decode, ~0.04 to merge (``stream.Parser.add``'s pairing and spooling: ~0.3).

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

from .ringfmt import (
    DATA_MAX,
    FALLBACK_HINT,
    NS_CLOCKS,
    PADDING,
    RB_MISSED_EVENTS,
    RB_MISSED_STORED,
    TIME_EXTEND,
    TIME_STAMP,
    TS_SHIFT,
    CaptureError,
    Field,
    Layout,
    PageFormat,
)
from .stream import Events

#: An event reserved (its time taken) before its CPU was drained empty but committed after (an
#: interrupt's events in between) is read at the next drain: the watermark waits this long for it.
SLACK_NS = 10_000_000


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
                           f"{page.data_size}", hint=FALLBACK_HINT)
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
                           hint=FALLBACK_HINT)
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
    """One field of every event (data starting at word ``data_at`` of ``flat``), as ``dtype`` (the
    machine's byte order: the ring buffer is its memory): a field of at most 8 bytes is cut out of
    the words it spans as one integer (little-endian machines), anything else byte by byte."""
    first, skip = field.offset // 4, field.offset % 4
    width = np.dtype(dtype).itemsize
    if np.little_endian and width <= 8 and skip + width <= 12:
        value = flat[data_at + first].astype(np.uint64) >> np.uint64(8 * skip)
        for k, shift in ((1, 32 - 8 * skip), (2, 64 - 8 * skip)):
            if skip + width > 4 * k:
                value |= flat[data_at + first + k].astype(np.uint64) << np.uint64(shift)
        if width < 8:
            value &= np.uint64((1 << 8 * width) - 1)
        return value.view("S8").astype(dtype) if dtype.startswith("S") else value.astype(dtype)
    last = (field.offset + width - 1) // 4
    words = np.empty((data_at.size, last - first + 1), dtype=np.uint32)
    for k in range(last - first + 1):
        words[:, k] = flat[data_at + first + k]
    raw = words.view(np.uint8)[:, skip:skip + width]
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
                           "event's type", hint=FALLBACK_HINT)
    kind = _gather(flat, data_at, layout.issue.fields["common_type"], "u2")  # the same place in both (Layout)
    issue = kind == layout.issue.id
    known = issue | (kind == layout.complete.id)
    if not known.all():
        raise CaptureError(f"{where}: an event of id {int(kind[~known][0])}, neither block_rq_issue "
                           f"({layout.issue.id}) nor block_rq_complete ({layout.complete.id})", hint=FALLBACK_HINT)
    # every field read lies inside its record from here on (the page holds the record: decode checked)
    short = data_bytes < np.where(issue, layout.issue.extent, layout.complete.extent)
    if short.any():
        raise CaptureError(f"{where}: an event of {int(data_bytes[short][0])} bytes, shorter than its format's "
                           "fields", hint=FALLBACK_HINT)
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
            raise CaptureError(f"the trace clock is {clock!r}, whose timestamps are not ns", hint=FALLBACK_HINT)
        self.instance = instance
        self.layout = layout
        self.cpus: list[_Cpu] = []
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
                               hint=FALLBACK_HINT) from None
        if not self.cpus:
            raise CaptureError(f"{instance} has no per_cpu/cpuN/trace_pipe_raw", hint=FALLBACK_HINT)
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
                                       f"{size}", hint=FALLBACK_HINT)
                if not got:
                    empty = True
                    break
                filled += got // size
            if not filled:
                break
            taken += filled * size
            decoded = decode(self._buffer[:filled * size], self.layout, f"cpu{cpu.number}'s ring buffer")
            cpu.missed += decoded.missed
            self.merger.add(cpu.number, decoded)
        return empty
