"""Observing the jobs of a run: the observers chosen when it was planned, applied around each job.

``Observers`` is what ``run.execute.start`` stores with the run (so ``--resume`` observes the same
hosts) and what ``run.job`` uses per job: ``watch(target)`` starts sampling the exporters that
concern the job's target (or, with a Prometheus server, only notes the time), and
``Watch.finish`` returns each host's samples (stored with the result) and its ``HostUsage``
(stored in ``extra["observed"]``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..model import FioReport, HostSamples, HostUsage, from_jsonable, to_jsonable
from . import local, prometheus
from .config import Probed
from .exporter import NodeFacts
from .sampler import Observation
from .usage import host_usage


@dataclass(frozen=True)
class Observers:
    """A run's observers: each probed endpoint (with the target it watches, None for all jobs,
    and its facts), and the Prometheus server to read from instead of scraping (if any)."""

    probed: tuple[Probed, ...] = ()
    prometheus: str | None = None

    def for_target(self, target: str) -> list[Probed]:
        return [p for p in self.probed if p.target in (None, target)]

    def facts(self) -> dict[str, NodeFacts]:
        """Host name -> facts, for the hosts whose exporter answered the probe."""
        return {p.endpoint.host: p.facts for p in self.probed if p.facts is not None}

    def stored(self) -> dict[str, Any]:
        """The run option that ``from_options`` reads back."""
        return {"probed": [to_jsonable(p) for p in self.probed], "prometheus": self.prometheus}

    @classmethod
    def from_options(cls, run_options: Mapping[str, Any]) -> Observers:
        stored = run_options.get("observe") or {}
        return cls(tuple(from_jsonable(Probed, p) for p in stored.get("probed", ())), stored.get("prometheus"))

    def watch(self, target: str) -> Watch:
        return Watch(self.for_target(target), self.prometheus)


def measured_window(report: FioReport | None, started_at: datetime, ended_at: datetime,
                    measured_start_ms: int | None = None) -> tuple[datetime, datetime] | None:
    """When fio measured (after ``ramp_time``), lasting the longest measured phase of the report's
    jobs (``JobResult.measured_ms``: not ``job_runtime``, which a reporting group sums): from
    ``measured_start_ms`` when the runner knows it (``runner.local.measured_start_ms``, exact), else
    ending when fio wrote the report (``timestamp_ms``, up to ~0.1 s late; the process's end when
    the report gives whole seconds only, as client/server output does). Within the process's
    lifetime; None without a report or runtimes. fio does not report per-job end times, so with
    ``stonewall`` groups this is the last group's span."""
    if report is None:
        return None
    runtimes = [j.measured_ms for j in report.jobs if j.measured_ms]
    if not runtimes:
        return None
    if measured_start_ms is not None:
        start = datetime.fromtimestamp(measured_start_ms / 1000, UTC)
        return max(started_at, start), min(ended_at, start + timedelta(milliseconds=max(runtimes)))
    end = ended_at
    if report.timestamp_ms and report.timestamp_ms % 1000:
        end = min(end, datetime.fromtimestamp(report.timestamp_ms / 1000, UTC))
    return max(started_at, end - timedelta(milliseconds=max(runtimes))), end


class Watch:
    """The observation of one job (a context manager; see the module docstring)."""

    def __init__(self, probed: Sequence[Probed], prometheus_url: str | None) -> None:
        self.probed = tuple(probed)
        self.prometheus = prometheus_url
        self.started_at = datetime.now(UTC)
        # With a Prometheus server, this host read directly (local.SELF) is still sampled live:
        # no Prometheus scrapes it.
        live = [p.endpoint for p in self.probed if prometheus_url is None or p.endpoint.address == local.SELF]
        self._observation = Observation(live)

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._observation.__exit__(None, None, None)

    def finish(self, report: FioReport | None, started_at: datetime, ended_at: datetime,
               measured_start_ms: int | None = None) -> tuple[tuple[HostSamples, ...], tuple[HostUsage, ...]]:
        """Each observed host's samples and usage over the job's measured window
        (``measured_window``)."""
        if not self.probed:
            return (), ()
        window = measured_window(report, started_at, ended_at, measured_start_ms)
        if self.prometheus is None:
            found = self._observation.finish(window)
        else:
            sampled = iter(self._observation.finish(window))
            window_ms = None if window is None else tuple(
                round((w - self.started_at).total_seconds() * 1000) for w in window)
            found = tuple(next(sampled) if p.endpoint.address == local.SELF else
                          prometheus.read(self.prometheus, p.endpoint, self.started_at, datetime.now(UTC),
                                          window_ms)  # type: ignore[arg-type]
                          for p in self.probed)
        usages = tuple(host_usage(s, p.facts, p.error if not s.t_ms else None)
                       for s, p in zip(found, self.probed, strict=True))
        return found, usages
