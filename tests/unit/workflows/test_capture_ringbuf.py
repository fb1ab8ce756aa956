"""The binary ring-buffer reader (``capture.ringbuf``, over the formats ``capture.ringfmt`` reads):
real pages recorded on this machine read as the kernel's own text of the same events reads
(``tests/data/ringbuf``), and constructed pages for what a short recording rarely holds: time
extends, absolute stamps, padding and discarded events, long records, lost events, garbage after a
string's NUL, formats this reader must refuse; the merge of CPUs under a watermark."""

from __future__ import annotations

import lzma
import re
import struct

import numpy as np
import pytest

from iolab.workflows.capture import ringbuf, ringfmt, stream
from iolab.workflows.capture import trace as trace_mod
from paths import DATA

RECORDED = DATA / "ringbuf" / "fio-loop"
FILES = ("header_page", "header_event", "block_rq_issue.format", "block_rq_complete.format")
#: One event line of the ``trace`` file: task, pid, CPU, seconds, µs, event, rwbs, sector, sectors.
_LINE = re.compile(r"^\s*(.*)-(\d+)\s+\[(\d+)\]\s+\S+\s+(\d+)\.(\d{6}): block_rq_(issue|complete): \S+ (\S+) "
                   r"(?:\d+ )?\(\) (\d+) \+ (\d+)")


def _texts() -> list[str]:
    return [(RECORDED / name).read_text() for name in FILES]


LAYOUT = ringfmt.Layout.parse(*_texts())


def _pages(cpu: int) -> np.ndarray:
    return np.frombuffer(lzma.decompress((RECORDED / f"cpu{cpu}.raw.xz").read_bytes()), dtype=np.uint8).copy()


def _text_events() -> list[tuple[int, int, bool, int, str, int, int, str]]:
    """(cpu, µs, issue, pid, rwbs, sector, sectors, task) of every event line of the recorded text."""
    text = lzma.decompress((RECORDED / "trace.txt.xz").read_bytes()).decode()
    return [(int(m[3]), int(m[4]) * 1_000_000 + int(m[5]), m[6] == "issue", int(m[2]), m[7], int(m[8]), int(m[9]),
             m[1].strip()) for m in map(_LINE.match, text.splitlines()) if m]


def test_recorded_pages_hold_the_events_the_kernel_printed() -> None:
    """Every CPU's pages, decoded, are the kernel's text of the same events, one for one: time
    (the text rounds ns to the nearest µs), issue or completion, pid, rwbs, sector, sectors."""
    expected = _text_events()
    assert len(expected) > 800 and {e[4] for e in expected} >= {"R", "WS", "FF", "DS"}
    for cpu in (0, 1):
        decoded = ringbuf.decode(_pages(cpu), LAYOUT)
        events = decoded.events
        got = list(zip(((events.t_ns + 500) // 1000).tolist(), events.issue.tolist(), events.pid.tolist(),
                       [r.decode() for r in events.rwbs.tolist()], events.sector.tolist(),
                       events.nr_sectors.tolist(), strict=True))
        assert got == [e[1:7] for e in expected if e[0] == cpu]
        assert decoded.missed == 0
        assert decoded.names == {e[3]: e[7].encode() for e in expected if e[0] == cpu and e[2]}


def test_recorded_pages_pair_into_the_trace_the_text_gives() -> None:
    """Both CPUs merged (``Merger``) and paired by ``stream.Parser``: the requests the text gives,
    with the same sectors, sizes, kinds, pids and task names, times within the text's µs."""
    merger = ringbuf.Merger([0, 1])
    for cpu in (0, 1):
        merger.add(cpu, ringbuf.decode(_pages(cpu), LAYOUT))
    parser = stream.Parser()
    parser.add(merger.take(final=True))
    binary = parser.trace()
    text = lzma.decompress((RECORDED / "trace.txt.xz").read_bytes())
    reference = stream.Parser()
    reference.feed(text)
    printed = reference.trace()
    assert len(binary) == len(printed) > 400
    for mine, theirs in zip(binary.columns()[2:], printed.columns()[2:], strict=True):
        assert mine.tolist() == theirs.tolist()
    assert np.abs(binary.issue_ns - printed.issue_ns).max() <= 1000
    done = printed.complete_ns >= 0
    assert (binary.complete_ns >= 0).tolist() == done.tolist()
    assert np.abs(binary.complete_ns[done] - printed.complete_ns[done]).max() <= 1000
    assert binary.comms == printed.comms
    assert set(printed.comms.values()) == {"fio", "kworker/0:0H", "kworker/1:1H"}  # flushes: the block layer's


# ---- constructed pages, with the recorded kernel's formats ------------------------------------


def _data(kind: str, pid: int, sector: int, sectors: int, rwbs: bytes, comm: bytes = b"fio",
          extra: int = 1) -> bytes:
    """An event's data as the format places it (``extra`` bytes after the fixed fields: the empty
    ``cmd`` string's NUL)."""
    fmt = LAYOUT.issue if kind == "issue" else LAYOUT.complete
    size = max(f.offset + f.size for f in fmt.fields.values()) + extra
    data = bytearray(size)
    f = fmt.fields
    struct.pack_into("<H", data, f["common_type"].offset, fmt.id)
    struct.pack_into("<i", data, f["common_pid"].offset, pid)
    struct.pack_into("<Q", data, f["sector"].offset, sector)
    struct.pack_into("<I", data, f["nr_sector"].offset, sectors)
    data[f["rwbs"].offset:f["rwbs"].offset + len(rwbs)] = rwbs
    if kind == "issue":
        data[f["comm"].offset:f["comm"].offset + len(comm)] = comm
    return bytes(data)


def _event(data: bytes, delta: int, long: bool = False) -> bytes:
    """A data record: ``type_len`` = its words (1..28), or 0 with the length in ``array[0]``."""
    data += bytes(-len(data) % 4)
    if long or len(data) > 112:
        return struct.pack("<II", delta << 5, len(data) + 4) + data
    return struct.pack("<I", delta << 5 | len(data) // 4) + data


def _extend(delta: int) -> bytes:
    return struct.pack("<II", (delta & (2**27 - 1)) << 5 | ringfmt.TIME_EXTEND, delta >> 27)


def _stamp(t_ns: int) -> bytes:
    return struct.pack("<II", (t_ns & (2**27 - 1)) << 5 | ringfmt.TIME_STAMP, t_ns >> 27)


def _discarded(size: int, delta: int) -> bytes:
    """A discarded event (padding with a time delta): ``size`` bytes in all."""
    return struct.pack("<II", delta << 5 | ringfmt.PADDING, size - 4) + bytes(size - 8)


def _page(stamp: int, *records: bytes, flags: int = 0, missed: int | None = None, pad: bool = False) -> bytes:
    body = b"".join(records)
    if pad:  # the rest of the page padding: counted in commit (a full page the writer left)
        body += struct.pack("<I", ringfmt.PADDING) + bytes(8)
    page = bytearray(LAYOUT.page.size)
    struct.pack_into("<QQ", page, 0, stamp, len(body) | flags)
    page[LAYOUT.page.data:LAYOUT.page.data + len(body)] = body
    if missed is not None:
        struct.pack_into("<Q", page, LAYOUT.page.data + len(body), missed)
    return bytes(page)


def _decode(*pages: bytes) -> ringbuf.Decoded:
    return ringbuf.decode(np.frombuffer(b"".join(pages), dtype=np.uint8), LAYOUT)


def test_time_extends_absolute_stamps_and_discarded_events_keep_the_clock() -> None:
    """Deltas add up from the page's stamp; a time extend adds ``array[0] << 27`` too (a gap of
    over 134 ms); an absolute stamp sets the time; a discarded event's delta counts (the next
    event's is from it); padding ending the page ends its events."""
    issue, done = _data("issue", 7, 800, 8, b"R"), _data("complete", 0, 800, 8, b"R")
    big_gap = 3 * 2**27 + 12_345
    first = _page(1_000_000, _event(issue, 0), _event(done, 40_000), _extend(big_gap), _event(issue, 0),
                  _discarded(68, 500), _event(done, 700), _stamp(9_000_000_000), _event(issue, 5), pad=True)
    second = _page(9_500_000_000, _event(done, 100))
    events = _decode(first, second).events
    assert events.t_ns.tolist() == [1_000_000, 1_040_000, 1_040_000 + big_gap, 1_040_000 + big_gap + 1_200,
                                    9_000_000_005, 9_500_000_100]
    assert events.issue.tolist() == [True, False, True, False, True, False]


def test_a_long_record_and_another_length_are_read_by_their_own_lengths() -> None:
    """A record whose length is in ``array[0]`` (``type_len`` 0) and records longer than the
    format's fields (a passthrough request's command bytes) are skipped by their own lengths."""
    records = [_event(_data("issue", 9, 64, 16, b"WS", extra=1), 10, long=True),
               _event(_data("issue", 9, 128, 8, b"WS", extra=40), 10),
               _event(_data("complete", 9, 64, 16, b"WS", extra=200), 10),
               _event(_data("complete", 9, 128, 8, b"WS"), 10)]
    events = _decode(_page(0, *records)).events
    assert events.sector.tolist() == [64, 128, 64, 128]
    assert events.nr_sectors.tolist() == [16, 8, 16, 8]
    assert events.t_ns.tolist() == [10, 20, 30, 40]


def test_lost_events_are_counted_from_the_pages_flags() -> None:
    """``RB_MISSED_EVENTS`` with the count stored after the events counts that many; the flag
    alone counts one."""
    rec = _event(_data("complete", 0, 8, 8, b"R"), 1)
    decoded = _decode(_page(0, rec, flags=ringfmt.RB_MISSED_EVENTS | ringfmt.RB_MISSED_STORED, missed=1234),
                      _page(0, rec, flags=ringfmt.RB_MISSED_EVENTS), _page(0, rec))
    assert decoded.missed == 1235
    assert decoded.events.t_ns.size == 3


def test_strings_end_at_their_nul() -> None:
    """The kernel leaves whatever the buffer held after a string's NUL (the last event's longer
    rwbs): it is not part of the string."""
    decoded = _decode(_page(0, _event(_data("issue", 5, 0, 8, b"R\0SM\xff\x01zz", comm=b"sh\0garbage"), 1)))
    events = decoded.events
    assert events.rwbs.tolist() == [b"R"]
    assert decoded.names == {5: b"sh"}
    assert trace_mod.parse_rwbs(events.rwbs[0].decode(), 8) == trace_mod.parse_rwbs("R", 8)


@pytest.mark.parametrize(("page", "message"), [
    (struct.pack("<QQ", 0, 5000) + bytes(4080), "5000 bytes of events"),
    (_page(0, struct.pack("<I", 20) + bytes(16)), "run past its commit"),
])
def test_pages_that_cannot_be_walked_are_refused(page: bytes, message: str) -> None:
    """A commit past the page's data, a record whose length runs past the commit."""
    with pytest.raises(ringfmt.CaptureError, match=message):
        _decode(page)


def test_an_event_of_another_id_is_refused() -> None:
    data = bytearray(_data("complete", 0, 8, 8, b"R"))
    struct.pack_into("<H", data, 0, 4242)
    with pytest.raises(ringfmt.CaptureError, match="an event of id 4242"):
        _decode(_page(0, _event(bytes(data), 1)))


def test_a_record_shorter_than_its_format_is_refused() -> None:
    data = _data("issue", 1, 0, 8, b"R")[:40]
    with pytest.raises(ringfmt.CaptureError, match="shorter than its format"):
        _decode(_page(0, _event(data, 1)))


# ---- formats ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("which", "old", "new", "message"), [
    (2, "field:sector_t sector;\toffset:16;\tsize:8;", "field:u32 sector;\toffset:16;\tsize:4;",
     "block_rq_issue event's field 'sector' is 4 bytes, not 8"),
    (3, "field:char rwbs[10];", "field:int rwbs;", "field 'rwbs' is 'int rwbs', not a char array"),
    (2, "field:char comm[16];", "field:char command[16];", "block_rq_issue event has no field 'comm'"),
    (3, "field:int common_pid;", "field:int common_tgid;", "no field 'common_pid'"),
    (1, "time_delta  :   27 bits", "time_delta  :   28 bits", "expected time_delta"),
    (1, "padding     : type == 29", "padding     : type == 28", "expected padding"),
    (0, "field: u64 timestamp;", "field: u64 stamp;", "no 'timestamp' field"),
    (0, "field: local_t commit;\toffset:8;\tsize:8;", "field: local_t commit;\toffset:8;\tsize:2;",
     "'commit' is 2 bytes"),
])
def test_a_format_this_reader_does_not_know_is_refused_by_name(which: int, old: str, new: str, message: str) -> None:
    texts = _texts()
    assert old in texts[which]
    texts[which] = texts[which].replace(old, new)
    with pytest.raises(ringfmt.CaptureError, match=re.escape(message)) as raised:
        ringfmt.Layout.parse(*texts)
    assert "trace_pipe text" in (raised.value.hint or "")


def test_offsets_come_from_the_format_files() -> None:
    """A kernel that placed the fields elsewhere is read where its format says (here: every field
    after common_pid moved 8 bytes on, as a new field before them would)."""
    texts = _texts()
    for which in (2, 3):
        texts[which] = re.sub(r"offset:(\d+);", lambda m: f"offset:{int(m[1]) + 8 if int(m[1]) >= 8 else m[1]};",
                              texts[which])
    moved = ringfmt.Layout.parse(*texts)
    assert moved.issue.fields["sector"].offset == LAYOUT.issue.fields["sector"].offset + 8
    issue = bytearray(_data("issue", 3, 0, 0, b""))
    issue[8:8] = bytes(8)  # the fields from offset 8 on move
    layout_data = bytearray(max(f.offset + f.size for f in moved.issue.fields.values()) + 1)
    layout_data[:len(issue)] = issue[:len(layout_data)]
    struct.pack_into("<Q", layout_data, moved.issue.fields["sector"].offset, 4096)
    struct.pack_into("<I", layout_data, moved.issue.fields["nr_sector"].offset, 16)
    layout_data[moved.issue.fields["rwbs"].offset] = ord("W")
    events = ringbuf.decode(np.frombuffer(_page(0, _event(bytes(layout_data), 3)), dtype=np.uint8), moved).events
    assert (events.sector.tolist(), events.nr_sectors.tolist(), events.rwbs.tolist()) == ([4096], [16], [b"W"])


# ---- merging CPUs -----------------------------------------------------------------------------


def _cpu_events(times: list[int], pid: int, issue: bool = True) -> ringbuf.Decoded:
    n = len(times)
    return ringbuf.Decoded(stream.Events(t_ns=np.array(times, np.int64), issue=np.full(n, issue),
                                         pid=np.full(n, pid, np.int64), task=np.zeros(n, "S1"),
                                         rwbs=np.full(n, b"R", "S8"), sector=np.arange(n, dtype=np.uint64),
                                         nr_sectors=np.full(n, 8, np.int64)),
                           {pid: b"app"} if issue else {}, 0)


def test_events_wait_until_every_cpu_is_past_them() -> None:
    """A CPU's events are handed on only up to the time every other CPU is known to be past: the
    last event read from it, or its clock (less ``SLACK_NS``) when it was read empty; a CPU that
    has told nothing holds everything back."""
    merger = ringbuf.Merger([0, 1])
    merger.add(0, _cpu_events([100, 200, 300], pid=10))
    assert merger.take().t_ns.size == 0  # cpu 1 may still hold earlier events
    merger.add(1, _cpu_events([150, 250], pid=0, issue=False))
    taken = merger.take()
    assert taken.t_ns.tolist() == [100, 150, 200, 250]
    assert taken.task.tolist() == [b"app", b"<idle>", b"app", b"<idle>"]
    merger.read_empty(1, 400 + ringbuf.SLACK_NS)
    assert merger.take().t_ns.tolist() == [300]
    merger.add(0, _cpu_events([500], pid=11, issue=False))
    assert merger.take().t_ns.size == 0
    final = merger.take(final=True)
    assert final.t_ns.tolist() == [500] and final.task.tolist() == [b"<...>"]


def test_names_follow_pids_however_many_share_a_slot() -> None:
    """Pids that share a slot of the names table (4096 apart) keep their own names."""
    merger = ringbuf.Merger([0])
    merger.add(0, _cpu_events([1, 2], pid=5))
    merger.add(0, ringbuf.Decoded(_cpu_events([3, 4], pid=5 + 4096).events, {5 + 4096: b"other"}, 0))
    assert merger.take(final=True).task.tolist() == [b"app", b"app", b"other", b"other"]
