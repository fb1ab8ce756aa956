"""The rules a replay's jobs are cut by (``replay``), over a trace's requests a chunk at a time in
issue order (``Trace.chunks``, ``Requests.chunks``), each carrying its state from chunk to chunk, so
that the replay's figures of a capture of any length take the memory of a chunk: the size classes and
the flushes' class (``ClassRule``), the lanes requests are dealt to (``Lanes``), the most of them in
flight (``InFlight``), and a class's lanes counted either way once its typical service time is known
(``LaneCount``). ``replay.classes``, ``replay.lanes`` and ``replay.replay_job_names`` use them, and
``record.capture_report`` the class rule.
"""

from __future__ import annotations

import math

import numpy as np

from .trace import FLUSH, READ, WRITE, Trace


def size_class(nbytes: int) -> str:
    """``bs-4k`` for 1..4096 bytes, ``bs-8k`` for 4097..8192 …, ``bs-1m``, ``bs-2m`` …"""
    top = 1 << max(12, math.ceil(math.log2(max(nbytes, 1))))
    return f"bs-{top >> 20}m" if top >= 1 << 20 else f"bs-{top >> 10}k"


#: The size classes' upper bounds in bytes: class k holds requests of ``2**(11 + k)`` + 1 to ``2**(12 + k)``
#: bytes (class 0: up to 4 KiB).
TOPS = 1 << np.arange(12, 49, dtype=np.int64)
#: ``ClassRule.of``'s marks of the requests that are in no size class: flushes (their class is chosen once
#: all are seen, ``ClassRule.flush_class``) and requests that are not replayed (discards, others).
FLUSH_ROW, NOT_REPLAYED = 254, 255


def class_name(k: int) -> str:
    """The job name of size class ``k`` (``ClassRule.of``): ``bs-4k`` for 0 …"""
    return size_class(int(TOPS[k]))


class ClassRule:
    """``replay.classes``' rule over a trace's requests a chunk at a time, in issue order (``Trace.chunks``,
    ``Requests.chunks``): a data request's class from its size; a flush's vote for the class of the
    last write before it, carried from chunk to chunk, counted apart; the flushes' class chosen once
    every chunk was seen (``flush_class``). Memory: the chunk's temporaries."""

    def __init__(self) -> None:
        #: flushes by the class of the last write before them (a slot past the last class: the
        #: largest requests, beyond 2**48 bytes, whose class the largest bound cannot name)
        self.votes = np.zeros(TOPS.size + 1, dtype=np.int64)
        self.without_write = 0  # flushes with no write before them
        self.smallest: int | None = None  # the smallest class of a data request so far
        self._last_write = -1  # the class of the last write so far

    def of(self, chunk: Trace) -> np.ndarray:
        """Each request's class (uint8): its size class for a read or write, ``FLUSH_ROW`` for a
        flush, ``NOT_REPLAYED`` for the rest; counts the flushes' votes. Chunks come in issue order."""
        klass = np.searchsorted(TOPS, chunk.nbytes, side="left").astype(np.uint8)
        data = (chunk.op == READ) | (chunk.op == WRITE)
        if data.any():
            low = int(klass[data].min())
            self.smallest = low if self.smallest is None else min(self.smallest, low)
        flush = chunk.op == FLUSH
        if flush.any():
            writes = np.flatnonzero(chunk.op == WRITE)
            # the class of the carried last write, then of each write here: a flush's vote is the one
            # before as many of this chunk's writes as precede it
            write_class = np.concatenate([[self._last_write], klass[writes]]).astype(np.int64)
            before = write_class[np.searchsorted(writes, np.flatnonzero(flush))]
            self.without_write += int(np.count_nonzero(before < 0))
            self.votes += np.bincount(before[before >= 0], minlength=self.votes.size)
            self._last_write = int(write_class[-1])
        elif (chunk.op == WRITE).any():
            self._last_write = int(klass[np.flatnonzero(chunk.op == WRITE)[-1]])
        klass[flush] = FLUSH_ROW
        klass[~(data | flush)] = NOT_REPLAYED
        return klass

    def flush_class(self) -> int | None:
        """The class all flushes join (the most votes, the smallest class on a tie; flushes with no
        write before them vote for the smallest data class); None without flushes or data requests."""
        if self.smallest is None or not (self.without_write or self.votes.any()):
            return None
        votes = self.votes.copy()
        votes[self.smallest] += self.without_write
        return int(votes.argmax())


#: How many of a class's first requests give its typical service time (``typical``, ``replay._typical_service_ns``).
SAMPLE = 1 << 16


def typical(issued_ns: np.ndarray, complete_ns: np.ndarray) -> int:
    """The median service time in ns (at least 1) of the completed ones of these requests: what one
    without a completion is taken to hold its lane for (``replay._typical_service_ns``)."""
    done = complete_ns >= 0
    service = complete_ns[done] - issued_ns[done]
    return max(1, int(np.median(service))) if service.size else 1


def held_until(issued_ns: np.ndarray, complete_ns: np.ndarray, typical_ns: int) -> np.ndarray:
    """When each request frees its lane: its completion, or its issue plus ``typical_ns`` without one."""
    return np.where(complete_ns >= 0, complete_ns, issued_ns + typical_ns)


class Lanes:
    """Requests dealt to lanes as ``replay.lanes`` deals them, a chunk at a time in issue order, each lane's
    state (when it is free) carried from chunk to chunk. The lowest free lane takes a request whenever
    it is free, so lane 0 is the greedy chain from its first request (each next is the first issued at
    or after the previous one completed), lane 1 the same chain over the requests lane 0 left, and so
    on: one vectorized search per lane, then a hop per request along its chain. ``free_at``: a time
    per lane opened; ``with_data``: whether it took a read or write (``deal``'s ``data``)."""

    def __init__(self) -> None:
        self.free_at: list[int] = []
        self.with_data: list[bool] = []

    def deal(self, issued_ns: np.ndarray, done_ns: np.ndarray, data: np.ndarray | None = None) -> np.ndarray:
        """Each request's lane (int64), given when it frees its lane (``done_ns``, ``held_until``)."""
        lane_of = np.full(issued_ns.size, -1, dtype=np.int64)
        if not issued_ns.size:
            return lane_of
        if (not self.free_at or self.free_at[0] <= issued_ns[0]) and (issued_ns[1:] >= done_ns[:-1]).all():
            # one after another from a free first lane: all to it, without a hop each
            lane_of[:] = 0
            self._took(0, int(done_ns[-1]), data is not None and bool(data.any()))
            return lane_of
        remaining = np.arange(issued_ns.size)
        lane = 0
        while remaining.size:
            issued, done = issued_ns[remaining], done_ns[remaining]
            i = int(np.searchsorted(issued, self.free_at[lane], side="left")) if lane < len(self.free_at) else 0
            if i < remaining.size:
                after = np.maximum(np.searchsorted(issued, done, side="left"),
                                   np.arange(1, remaining.size + 1)).tolist()
                chain, end = [], remaining.size
                while i < end:
                    chain.append(i)
                    i = after[i]
                taken = remaining[chain]
                lane_of[taken] = lane
                self._took(lane, int(done[chain[-1]]), data is not None and bool(data[taken].any()))
                remaining = np.delete(remaining, chain)
            lane += 1
        return lane_of

    def _took(self, lane: int, free_at: int, data: bool) -> None:
        if lane == len(self.free_at):
            self.free_at.append(free_at)
            self.with_data.append(data)
        else:
            self.free_at[lane] = free_at
            self.with_data[lane] |= data


class InFlight:
    """The lanes ``replay.lanes`` deals requests to, before it merges lanes of flushes alone, counted from
    the requests in issue order a chunk at a time: first fit in issue order opens a lane only when
    every open one is busy, so the count (``most``) is 1 + the most requests still in flight (issued
    before, completed after) when one is issued. A request completed the instant it was issued frees
    its lane for the requests issued after it in that instant; one without a completion holds its
    lane for ``typical_ns``, as in ``replay.lanes``. The completions not yet passed are carried sorted from
    chunk to chunk (a later request completes after its issue, so after every issue before it):
    memory is the chunk's and the requests in flight, not the class's."""

    def __init__(self, typical_ns: int) -> None:
        self.typical_ns = typical_ns
        self.most = 0
        self._issued = self._freed = self._passed = 0
        self._pending = np.zeros(0, dtype=np.int64)  # completions after the last chunk's last issue, sorted

    def add(self, issued: np.ndarray, completes: np.ndarray) -> None:
        if not issued.size:
            return
        instant = completes == issued
        pool = np.concatenate([self._pending, held_until(issued, completes, self.typical_ns)[~instant]])
        pool.sort()
        freed_before = self._freed + np.cumsum(instant) - instant
        busy = (np.arange(self._issued, self._issued + issued.size) - freed_before - self._passed
                - np.searchsorted(pool, issued, side="right"))
        self.most = max(self.most, int(busy.max()) + 1)
        self._issued += issued.size
        self._freed += int(instant.sum())
        cut = int(np.searchsorted(pool, issued[-1], side="right"))  # at or before every later issue
        self._passed, self._pending = self._passed + cut, pool[cut:]


class LaneCount:
    """The lanes one class's requests need (a window's part, or the whole class), fed in issue order a
    chunk at a time: ``replay._most_in_flight``'s count (``InFlight``), or, ``dealt``, that of ``replay.lanes``
    (``Lanes``: the lanes holding data, at least one), which a part holding flushes needs. The first
    ``SAMPLE`` requests are held until the typical service time they give is known (``typical``),
    then each chunk is counted as it comes."""

    def __init__(self, dealt: bool) -> None:
        self.dealt = dealt
        self._held: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._held_rows = 0
        self._counter: InFlight | Lanes | None = None
        self._typical_ns = 1

    def add(self, issued: np.ndarray, completes: np.ndarray, data: np.ndarray) -> None:
        if self._counter is not None:
            self._count(issued, completes, data)
            return
        self._held.append((issued, completes, data))
        self._held_rows += issued.size
        if len(self._held) > 64:  # a class of a few requests a chunk: a list of a few arrays
            self._held = [self._joined()]
        if self._held_rows >= SAMPLE:
            self._start()

    def total(self) -> int:
        """The lanes, once every request was added."""
        if self._counter is None:
            if not self._held_rows:
                return 0
            self._start()
        if isinstance(self._counter, Lanes):
            return max(1, sum(self._counter.with_data))
        assert self._counter is not None
        return self._counter.most

    def _joined(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        issued, completes, data = (np.concatenate(column) for column in zip(*self._held, strict=True))
        return issued, completes, data

    def _start(self) -> None:
        issued, completes, data = self._joined()
        self._held = []
        self._typical_ns = typical(issued[:SAMPLE], completes[:SAMPLE])
        self._counter = Lanes() if self.dealt else InFlight(self._typical_ns)
        self._count(issued, completes, data)

    def _count(self, issued: np.ndarray, completes: np.ndarray, data: np.ndarray) -> None:
        if isinstance(self._counter, Lanes):
            self._counter.deal(issued, held_until(issued, completes, self._typical_ns), data)
        elif self._counter is not None:
            self._counter.add(issued, completes)
