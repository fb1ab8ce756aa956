"""What a capture's fingerprint holds (``Fingerprint``, defined in ``fingerprint``'s docstring) and
how a stored one is read, without numpy: showing and reporting a capture import no capture,
store or fio code, and no numpy (0.12 s of a report's start-up)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...model import Run

#: A capture's run origin (``record`` stores captures with it).
ORIGIN = "capture"
GRANULE_BYTES = 4096
#: Bins of the charts' aggregates: depth and heat over time, heat over the LBA span.
TIME_BINS, LBA_BINS = 60, 32


@dataclass(frozen=True)
class Dist:
    """A distribution's summary, in the unit its name says (µs for times)."""

    mean: float | None = None
    p50: float | None = None
    p99: float | None = None
    max: float | None = None
    count: int = 0


@dataclass(frozen=True)
class Fingerprint:
    """See the module docstring. Percentages 0-100; None (JSON null, "–" in tables) where nothing
    was measured: without requests no rate, flush or FUA share, inter-arrival or depth at issue;
    without read or write requests no LBA range, mix, sizes or skew (``empty``). ``bs_counts`` maps
    kind -> {bytes: requests};
    ``depth_time_pct`` maps a depth to the share of the capture's time spent at it; ``active_s`` is the
    span IOPS and bandwidth are over (see the module docstring; 0 in fingerprints stored before it); ``depth_over_time``
    and ``heat`` are chart aggregates over ``TIME_BINS`` equal time bins (``bin_s`` each): the mean
    depth per bin, and data requests per time bin × LBA bin (``LBA_BINS`` equal bins from
    ``lba_first_bytes`` to ``lba_end_bytes``); so are ``flushes_over_time`` (flush requests issued
    per bin) and ``flush_service_over_time`` (their mean service time per bin, µs; None for a bin
    without a completed one): both empty in fingerprints stored before them, and for a trace
    without flushes."""

    requests: int
    duration_s: float
    lost_events: int
    ios: Mapping[str, int]
    bytes: Mapping[str, int]
    read_pct_ios: float | None
    read_pct_bytes: float | None
    iops: float | None
    bw_bytes_s: float | None
    bs_counts: Mapping[str, Mapping[int, int]]
    sequential_pct: float | None
    random_pct: float | None
    sequential_pct_by_kind: Mapping[str, float]
    depth_mean: float
    depth_mean_busy: float | None
    depth_max: int
    depth_at_issue: Dist
    depth_time_pct: Mapping[int, float]
    busy_pct: float
    interarrival_us: Dist
    interarrival_cv: float | None
    latency_us: Mapping[str, Dist]
    hot1_pct: float | None
    hot10_pct: float | None
    granules_touched: int
    lba_first_bytes: int | None
    lba_end_bytes: int | None
    flush_pct: float | None
    fua_pct: float | None
    sync_write_pct: float | None
    processes: Mapping[str, int]
    bin_s: float
    depth_over_time: tuple[float, ...]
    heat: tuple[tuple[int, ...], ...] = field(default_factory=tuple)
    active_s: float = 0.0
    zeroes_ios: int = 0
    zeroes_bytes: int = 0
    left_out: Mapping[str, int] = field(default_factory=dict)
    granules_by: str = "start"
    flushes_over_time: tuple[int, ...] = ()
    flush_service_over_time: tuple[float | None, ...] = ()

    @property
    def data_ios(self) -> int:
        return self.ios.get("read", 0) + self.ios.get("write", 0)

    @property
    def empty(self) -> bool:
        """No read or write request was captured: nothing to replay, fit or rate."""
        return self.data_ios == 0


def stored_fingerprint(run: Run) -> Fingerprint | None:
    """The fingerprint stored with a capture run (None for any other run)."""
    from ...model import from_jsonable
    if run.info.origin != ORIGIN or not run.results or "fingerprint" not in (run.results[0].extra or {}):
        return None
    return from_jsonable(Fingerprint, run.results[0].extra["fingerprint"])
