"""Sampling node_exporters while a job runs: a background thread per host, once a second.

``observing(endpoints)`` starts one thread per exporter; each scrapes at once (before fio
starts), then every ``interval_s`` on a fixed schedule, and once more when the job has ended, so
the samples bracket the whole job. A scrape that fails (refused, timed out, garbage) is recorded
in a ``Gap`` and sampling goes on: an observer never stops or slows a run. ``finish(window)``
stops the threads and returns one ``HostSamples`` per exporter, the job's measured window
marked on the samples' clock.

A scrape's time is the middle of its HTTP request (node_exporter reads /proc while answering);
times are ms since the observation began, on the monotonic clock, and ``started_at`` is the
wall-clock time of 0.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType

from ..errors import HostError
from ..model import Gap, HostSamples, Series
from . import exporter, local, sshsample
from .exporter import Key, Scrape

#: Seconds between scrapes, and the most one scrape may take (less than the interval, so that a
#: hung exporter costs a gap, never the schedule).
INTERVAL_S = 1.0
TIMEOUT_S = 0.8


@dataclass(frozen=True)
class Endpoint:
    """An exporter to observe: ``host`` is iolab's name for the host (``local``, a fio server's
    label, a watched host's name), ``role`` ``local``, ``server`` or ``observed``, ``address``
    the exporter's ``host:port``, or ``local.SELF`` for this host read directly."""

    host: str
    role: str
    address: str


Scraper = Callable[[str, float], Scrape]


def scrape(address: str, timeout_s: float) -> Scrape:
    """One reduced sample of ``address``: this host's /proc and /sys for ``local.SELF``, an
    ``ssh://`` host's over its connection (``sshsample``), else the node_exporter there
    (``exporter.scrape``). Raises ``HostError``."""
    if address == local.SELF:
        return local.scrape()
    return sshsample.scrape(address, timeout_s) if sshsample.is_ssh(address) else exporter.scrape(address, timeout_s)


def source_of(address: str) -> str:
    """Where an endpoint's samples come from, as stored in ``HostSamples.source``."""
    if address == local.SELF:
        return local.SOURCE
    return f"{address} {sshsample.SOURCE}" if sshsample.is_ssh(address) else exporter.metrics_url(address)


class _Observer(threading.Thread):
    """Scrapes one exporter until stopped, then once more."""

    def __init__(self, endpoint: Endpoint, start: float, interval_s: float, timeout_s: float,
                 scrape: Scraper) -> None:
        super().__init__(name=f"iolab-observe-{endpoint.host}", daemon=True)
        self.endpoint = endpoint
        self.start_mono = start
        self.interval_s, self.timeout_s, self.scrape_fn = interval_s, timeout_s, scrape
        self.stopping = threading.Event()
        self.samples: list[tuple[int, Scrape]] = []
        self.gaps: list[Gap] = []
        self._failing: Gap | None = None

    def run(self) -> None:
        tick = 0
        while True:
            self._once()
            tick += 1
            delay = self.start_mono + tick * self.interval_s - time.monotonic()
            if self.stopping.wait(max(0.0, delay)):
                self._once()  # the job has ended: one more sample brackets its end
                break
        if self._failing is not None:
            self.gaps.append(self._failing)

    def _once(self) -> None:
        before = time.monotonic()
        try:
            got = self.scrape_fn(self.endpoint.address, self.timeout_s)
        except HostError as exc:
            self._failed(int((before - self.start_mono) * 1000), exc.message)
            return
        except Exception as exc:
            self._failed(int((before - self.start_mono) * 1000), f"{type(exc).__name__}: {exc}")
            return
        t_ms = int(((before + time.monotonic()) / 2 - self.start_mono) * 1000)
        if self._failing is not None:
            self.gaps.append(self._failing)
            self._failing = None
        self.samples.append((t_ms, got))

    def _failed(self, t_ms: int, message: str) -> None:
        f = self._failing
        self._failing = Gap(t_ms, t_ms, 1, message) if f is None else Gap(f.start_ms, t_ms, f.attempts + 1, f.error)


class Observation:
    """The observers of one job (a context manager: leaving it stops them all).

    ``window`` passed to ``finish`` is the job's measured phase as wall-clock datetimes.
    """

    def __init__(self, endpoints: Sequence[Endpoint], interval_s: float = INTERVAL_S, timeout_s: float = TIMEOUT_S,
                 scrape: Scraper = scrape) -> None:
        self.endpoints = tuple(endpoints)
        self.started_at = datetime.now(UTC)
        start = time.monotonic()
        self._observers = [_Observer(e, start, interval_s, timeout_s, scrape) for e in self.endpoints]
        for o in self._observers:
            o.start()

    def __enter__(self) -> Observation:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop()

    def _stop(self) -> None:
        for o in self._observers:
            o.stopping.set()
        for o in self._observers:
            o.join(self._observers[0].timeout_s * 2 + 1 if self._observers else 0)

    def finish(self, window: tuple[datetime, datetime] | None) -> tuple[HostSamples, ...]:
        """Stop sampling (after one last scrape) and return each exporter's samples."""
        self._stop()
        window_ms = None
        if window is not None:
            start, end = ((w - self.started_at).total_seconds() * 1000 for w in window)
            window_ms = (round(start), round(end))
        return tuple(samples(o.endpoint, self.started_at, o.samples, tuple(o.gaps), window_ms)
                     for o in self._observers)


def samples(endpoint: Endpoint, started_at: datetime, scrapes: Sequence[tuple[int, Scrape]], gaps: tuple[Gap, ...],
            window_ms: tuple[int, int] | None, source: str | None = None) -> HostSamples:
    """``HostSamples`` from reduced scrapes: one ``Series`` per key seen, in order of first
    appearance, None where a scrape lacked it."""
    keys: dict[Key, None] = {}
    for _, s in scrapes:
        keys.update(dict.fromkeys(s.values))
    series = tuple(Series(name, dict(labels), tuple(s.values.get((name, labels)) for _, s in scrapes))
                   for name, labels in keys)
    cpu_counts = [s.cpu_count for _, s in scrapes if s.cpu_count]
    return HostSamples(host=endpoint.host, role=endpoint.role, source=source or source_of(endpoint.address),
                       started_at=started_at, t_ms=tuple(t for t, _ in scrapes), series=series, window_ms=window_ms,
                       gaps=gaps, cpu_count=max(cpu_counts) if cpu_counts else None)
